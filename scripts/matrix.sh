#!/usr/bin/env bash
# The version matrix (issue 21): mmfix patches torch's and MMEngine's internals, so every release
# that pyproject.toml claims is run, each in a fresh virtual environment of its own.
#
#   scripts/matrix.sh ci          the cells meant for CI (column `ci` = yes; .ci/run runs them)
#   scripts/matrix.sh all         every cell
#   scripts/matrix.sh CELL...     the named cells
#   scripts/matrix.sh list        the table
#   scripts/matrix.sh plan CELL   what that cell would install, one requirement a line
#   --jobs N (first)              run up to N cells at once
#
# Each cell: a fresh venv under $MMFIX_MATRIX_DIR/<cell> (default /tmp/mmfix-matrix) with the
# cell's pinned requirements, `-e .`, and the lines of REQUIREMENT_FILES for every package the cell
# does not pin itself (requirements/test.txt's test tools less ruff and mypy, which are the lint
# run's; requirements/mmdet.txt's mmcv-lite and MMDetection, pure Python: the `not slow` suite's
# ops tests drive mmfix's ops through mmcv's Python API). Then `python -m pytest -q -m "not slow or matrix"`
# (in two runs: tests/ops, the rest), the checkpoint-security tests (SECURITY_*_TESTS, two runs)
# and today's-stack tests (STACK_TESTS), the last two marked slow: the cell's units (UNITS).
# Prints PASS/FAIL per cell with the time taken (install + tests) and exits non-zero if any cell
# fails. The pip output and each pytest run's full output are in
# $MMFIX_MATRIX_DIR/<cell>.log. Each pytest run uses $MMFIX_MATRIX_WORKERS pytest-xdist workers
# (default 2, one file per worker at a time as in the README's test command; 0: one process).
# MMFIX_MATRIX_STEPS=install builds the cells' venvs only, =tests runs the tests in the venvs such
# a run built (.ci/run builds them beside its own set-up and main suite, and tests them after);
# with --jobs N, =tests shares out the cells' units, not whole cells, between the N slots, longest
# first (issue 29: whole cells left one slot idle for the last minutes, 738 s where the units
# fill both).
#
# Only the libraries mmfix patches vary here: the whole-stack tests (compiled mmcv, real
# MMDetection 2.28.2, the OpenMMLab toolboxes, SLURM) are .ci/run's main run, so their REQUIRE_*
# switches are cleared inside a cell (they skip there, saying why).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
ROOT=${MMFIX_MATRIX_DIR:-/tmp/mmfix-matrix}
WORKERS=${MMFIX_MATRIX_WORKERS:-2}
STEPS=${MMFIX_MATRIX_STEPS:-both}
# Bytecode written on first import, as .ci/run does (a cell's tests start hundreds of interpreters;
# under PYTHONDONTWRITEBYTECODE each would compile torch's sources again).
unset PYTHONDONTWRITEBYTECODE
[[ $STEPS =~ ^(install|tests|both)$ ]] || { echo "matrix: MMFIX_MATRIX_STEPS is install, tests or both" >&2; exit 2; }

# One row per cell: name | python | ci | pip requirements (space-separated, no spaces inside one;
# `nodeps:REQ` is installed with --no-deps into a folder of its own that only the STACK_TESTS run
# sees: a toolbox whose top-level import is tested there but whose heavy dependencies have no
# wheels for the cell's Python, kept out of the rest of the cell's tests; into the venv where
# the cell runs only its own tests) [| the cell's own tests: `VAR=VALUE ... -- PYTEST-ARGS`, run
# instead of the three standard runs below: for a cell that exists to give one group of tests
# the environment they need, not to vary a library mmfix patches].
#  ci = yes: run by `matrix.sh ci` (.ci/run runs those after the main suite); no: by `all` or by
#  name only. CI's two cells each put every lower bound (or every upper bound) together, so that
#  two cells cover both ends of every axis (Python, torch, wrapt, MMEngine, numpy) within CI's
#  time; the one-axis cells below them tell which axis a failure of theirs belongs to. Every cell
#  takes ~10-15 min on 2 cores; the Python 3.9 and 3.13 ones download their torch and its CUDA
#  libraries from PyPI first (~2-3 GB: 1-2 min here at 30-57 MB/s, then pip's cache).
CELLS=(
    # Every floor at once: Python 3.9, torch 2.7.1, wrapt 1.14.0, MMEngine 0.10.0, numpy 1.x.
    "floor   | 3.9  | yes | torch==2.7.1 wrapt==1.14.0 mmengine==0.10.0 numpy<2 opencv-python<4.12"
    # Every ceiling at once: Python 3.13, torch 2.14.1 (PyPI's cp313 CUDA build), wrapt 2.x, numpy 2.x.
    # mmcv-lite 2.2.0 (mmcv's last release, which MMDetection 3.3.0 refuses without mmfix):
    # MMDetection 3.3.0 imports and predicts on it, MMSegmentation 1.2.2 and MMDetection3D 1.4.0
    # import on it (tests/integration/test_todays_stack.py; open3d, which mmdet3d requires, has
    # no wheel for Python 3.13, and neither toolbox's top-level import needs its dependencies).
    "ceiling | 3.13 | yes | torch==2.14.1 wrapt>=2,<3 mmengine==0.10.7 numpy>=2 mmcv-lite==2.2.0 nodeps:mmsegmentation==1.2.2 nodeps:mmdet3d==1.4.0"
    # The newest releases on the main cell's Python: torch 2.14.1 (its CUDA build, from this
    # machine's local index), wrapt 2.x.
    "newest  | 3.11 | no  | torch==2.14.1 wrapt>=2,<3 mmengine==0.10.7 numpy>=2"
    # pyproject.toml's floors on the main cell's Python: torch 2.7, wrapt 1.14, MMEngine 0.10.0.
    # The floor was torch 2.4 until this matrix ran it (2026-12-02): on torch 2.4.1, torch.load
    # defaults to weights_only=False before 2.6 (a plain load ran a payload through mmfix), its
    # (object, name) allowlist entries need a newer add_safe_globals, mappable.py imports
    # torch.utils.serialization, and embedding_bag hits an autograd assert (carafe); on 2.6.0 only
    # tests/unit/test_shared_copy_checks.py failed (torch.utils.serialization is torch 2.7+). On an
    # older torch mmfix applies nothing and says so at import.
    # wrapt 1.14.0 has no cp311 wheel: pip builds it from its sdist (with its C extension; gcc);
    # on Python 3.9 (floor) it installs from a wheel.
    # numpy<2: MMEngine 0.10.0 (Oct 2023) predates numpy 2, so this cell keeps the stack of its
    # time; opencv-python<4.12 because 4.12+ requires numpy>=2 (without the pin pip downloads and
    # rejects five opencv-python releases, ~350 MB, before settling on 4.11).
    "oldest  | 3.11 | no  | torch==2.7.1 wrapt==1.14.0 mmengine==0.10.0 numpy<2 opencv-python<4.12"
    # Python's floor and ceiling alone. torch 2.8.0 is the last release with cp39 wheels (numpy
    # 2.0.2 the last numpy for 3.9); 3.13 as in `ceiling`.
    "py39    | 3.9  | no  | torch==2.8.0 wrapt>=2,<3 mmengine==0.10.7 numpy>=2"
    "py313   | 3.13 | no  | torch==2.14.1 wrapt>=2,<3 mmengine==0.10.7 numpy>=2"
    # MMPose's tools and models (issue 20): MMPose 1.3.2 imports xtcocotools, whose binary wheels
    # are built for numpy 1, so the main environment (numpy 2) skips them. Here the main cell's
    # torch (the one compiled mmcv 2.1.0 in ../shared/wheels was built for) with numpy 1 and
    # xtcocotools' wheel: the MMPose zoo models against compiled mmcv, and the legacy MMPose 0.x
    # command lines on MMPose 1.3.2's real tools (training with --gpus 2, resume, test).
    "mmpose  | 3.11 | yes | torch==2.13.0 numpy<2 opencv-python<4.12 xtcocotools==1.14.3 json-tricks==3.17.3 munkres==3.0.0 nodeps:mmpose==1.3.2 | REQUIRE_TOOLBOXES=mmpose REQUIRE_COMPILED_MMCV=1 -- tests/integration/test_toolbox_zoo_ops.py tests/integration/test_legacy_toolboxes.py tests/unit/test_translate_toolboxes.py tests/unit/test_config_mmpose.py tests/integration/test_family_0x_mmpose.py tests/integration/test_family_0x_mmpose_metrics.py tests/integration/test_family_0x_mmpose_lifting.py -k mmpose"
)

# The checkpoint-security tests, in two runs of about the same length (the crafted files through
# every loader; the bounded-cost ones): a cell's tests are shared out between CI's two slots by run.
SECURITY_CRAFTED_TESTS=(
    tests/integration/test_crafted_checkpoints.py
    tests/integration/test_malicious_checkpoints.py
)
SECURITY_COST_TESTS=(
    tests/integration/test_bounded_cost.py
    tests/unit/test_pickle_cost.py
)

# Today's stack on real packages (setuptools without pkg_resources: the `mmdet::` base and
# MMEngine's package helpers; MMDetection 3.3.0 on mmcv 2.2 where a cell installs it). Marked
# slow, cheap (~1 min); each cell runs them with REQUIRE_NO_PKG_RESOURCES=1 (requirements/test.txt
# installs setuptools >= 82 there) and, where the cell pins mmcv-lite 2.2, REQUIRE_MMCV22=1.
STACK_TESTS=(tests/integration/test_todays_stack.py)

# A cell's units (run_cell's `case`), longest first: the order in which MMFIX_MATRIX_STEPS=tests
# --jobs N hands them to its slots. Typical seconds in CI (2 cores, two units at once, one process
# each; 2026-12-06, floor and ceiling): own (mmpose) 180, cost 150-170, fast-rest ~150, crafted
# 130-150, fast-ops ~70, stack 3-21; alone on the machine fast-rest takes 103 s, fast-ops 49.
UNITS=(own cost fast-rest crafted fast-ops stack)

# Installed in every cell: without mmcv the 59 `not slow` tests that drive mmfix's ops through
# mmcv's Python API (tests/ops_support.py's require_mmcv) skip, and a cell would not run them on
# its torch. A package a cell pins itself (torch, MMEngine, numpy, wrapt, mmcv-lite …) is taken
# from the cell's row, not from these files.
REQUIREMENT_FILES=(requirements/test.txt requirements/mmdet.txt)
LINT_TOOLS="ruff mypy"

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; s=${s%"${s##*[![:space:]]}"}; printf '%s' "$s"; }

# field CELLROW N: the Nth '|' field of a row, trimmed.
field() { trim "$(cut -d'|' -f"$2" <<<"$1")"; }

row_of() {
    local row
    for row in "${CELLS[@]}"; do
        if [[ $(field "$row" 1) == "$1" ]]; then
            printf '%s' "$row"
            return 0
        fi
    done
    return 1
}

# An interpreter of exactly this X.Y: pythonX.Y on PATH, else pyenv's versions.
find_python() {
    local want=$1 cand
    for cand in "$(command -v "python$want" 2>/dev/null || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want".*/bin/python; do
        [[ -n $cand && -x $cand ]] || continue
        if "$cand" -c "import sys; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$want' else 1)" 2>/dev/null; then
            printf '%s' "$cand"
            return 0
        fi
    done
    return 1
}

# package_name REQUIREMENT: its project name, normalised (lower case, '-' for '_' and '.').
package_name() { sed -E 's/^([A-Za-z0-9_.-]+).*/\1/' <<<"$1" | tr '[:upper:]_.' '[:lower:]--'; }

# shared_requirements "NAMES": REQUIREMENT_FILES' lines less comments, the packages in NAMES
# (the cell's own pins) and the lint tools.
shared_requirements() {
    local owned=" $1 $LINT_TOOLS " file line
    for file in "${REQUIREMENT_FILES[@]}"; do
        while IFS= read -r line; do
            line=$(trim "${line%%#*}")
            [[ -n $line ]] || continue
            [[ $owned == *" $(package_name "$line") "* ]] && continue
            printf '%s\n' "$line"
        done <"$file"
    done
}

# cell_pytest NAME VENV [VAR=VALUE...] -- ARGS...: one pytest run with those switches set;
# prints its summary line (and failures).
cell_pytest() {
    local name=$1 venv=$2 out summary prc=0
    shift 2
    local -a switches=()
    while [[ $1 != -- ]]; do switches+=("$1"); shift; done
    shift
    out=$ROOT/$name.$BASHPID.pytest.out  # a cell's units may run at once
    env -u REQUIRE_MMDET -u REQUIRE_COMPILED_MMCV -u REQUIRE_TOOLBOXES -u REQUIRE_SLURM \
        -u REQUIRE_NO_PKG_RESOURCES -u REQUIRE_MMCV22 -u REQUIRE_MMDET2 -u PYTHONPATH \
        VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "${switches[@]}" \
        "$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=10 -n "$WORKERS" --dist loadfile "$@" \
        >"$out" 2>&1 || prc=$?
    {  # into the cell's log whole, one run after the other
        flock 9
        echo "---- ${switches[*]} python -m pytest -q $*"
        cat "$out"
    } 9>>"$ROOT/$name.log" >>"$ROOT/$name.log"
    summary=$(grep -E '^=+ .* in [0-9.]+s' "$out" | tail -n 1 || true)
    [[ -n $summary ]] || summary=$(tail -n 1 "$out")
    echo "   pytest -q $*: $summary"
    if ((prc != 0)); then
        grep -E '^(FAILED|ERROR) ' "$out" | sed 's/^/   | /' || true
    fi
    rm -f "$out"
    return $prc
}

# pip_install VENV ARG...: pip install into VENV, logged to $log; again (3 tries in all) where a
# download broke off mid-stream, which pip does not retry itself (PyPI reset the connection while a
# CI run's floor cell downloaded, 2026-12-07: the cell failed unrun). Any other failure fails at once.
pip_install() {
    local venv=$1 try mark
    shift
    for try in 1 2 3; do
        mark=$(wc -l <"$log")
        "$venv/bin/python" -m pip install --progress-bar off --no-compile "$@" >>"$log" 2>&1 && return 0
        tail -n +"$((mark + 1))" "$log" |
            grep -qE 'Connection broken|ConnectionResetError|IncompleteRead|ReadTimeoutError|Read timed out|RemoteDisconnected' ||
            return 1
        echo "---- pip: a download broke off (try $try of 3)" >>"$log"
    done
    return 1
}

# install_cell: the cell's venv (run_cell's locals in scope); prints what was installed.
install_cell() {
    rm -f "$ROOT/$name.installed" "$ROOT/$name.installed-seconds"
    : >"$log"
    echo "== $name: Python $py; ${reqs[*]}; + -e . ${tools[*]}"
    if ! python=$(find_python "$py"); then
        echo "   no Python $py on this machine (PATH or pyenv)"
        return 1
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv" >>"$log" 2>&1 || { echo "   venv failed (see $log)"; return 1; }
    # `nodeps:` packages: into a folder only the stack tests see (on PYTHONPATH); in a cell that
    # runs only its own tests, into the venv itself (those tests start tools whose PYTHONPATH
    # they set themselves). --no-compile: Python compiles what the tests import; pip would
    # compile every module of torch (~10 s of CPU a venv).
    local -a target=(--target "$extra")
    [[ -z $own ]] || target=()
    rm -rf "$extra"
    if ! { pip_install "$venv" "${plain[@]}" "${tools[@]}" -e "$REPO" &&
        { ((${#nodeps[@]} == 0)) || pip_install "$venv" --no-deps "${target[@]}" "${nodeps[@]}"; }; }; then
        echo "   install failed after $((SECONDS - t0)) s; the end of $log:"
        tail -n 25 "$log" | sed 's/^/   | /'
        return 1
    fi
    t_install=$((SECONDS - t0))
    {
        echo "---- installed:"
        "$venv/bin/python" -m pip list --format=freeze
    } >>"$log" 2>&1
    echo "   installed in ${t_install} s: $("$venv/bin/python" -c '
import sys, importlib.metadata as m
names = ("torch", "wrapt", "mmengine", "numpy", "mmcv-lite", "mmdet")
print("Python %d.%d.%d" % sys.version_info[:3], *("%s %s" % (n, m.version(n)) for n in names))' 2>&1)"
}

# run_cell NAME [UNIT]: 0 if the cell installs (or, with MMFIX_MATRIX_STEPS=tests, was
# installed) and its tests pass (only UNIT's, if named). Prints progress; everything else goes to the log.
run_cell() {
    local name=$1 only_unit=${2:-} row py reqs tools python venv log rc=0 t0 t_install owned="" req
    row=$(row_of "$name") || { echo "matrix: no cell named '$name'" >&2; return 2; }
    py=$(field "$row" 2)
    read -r -a reqs <<<"$(field "$row" 4)"
    local -a plain=() nodeps=()
    for req in "${reqs[@]}"; do
        owned+=" $(package_name "${req#nodeps:}")"
        if [[ $req == nodeps:* ]]; then nodeps+=("${req#nodeps:}"); else plain+=("$req"); fi
    done
    mapfile -t tools < <(shared_requirements "$owned")
    # The stack tests' switches: no pkg_resources in every cell; mmcv 2.2 where the cell pins it.
    local -a stack=(REQUIRE_NO_PKG_RESOURCES=1)
    if [[ " ${reqs[*]} " == *" mmcv-lite==2.2."* ]]; then stack+=(REQUIRE_MMCV22=1); fi
    venv=$ROOT/$name
    log=$ROOT/$name.log
    mkdir -p "$ROOT"
    local extra=$ROOT/$name.nodeps own
    own=$(field "$row" 5)
    if ((${#nodeps[@]} > 0)); then stack+=("PYTHONPATH=$extra"); fi
    t0=$SECONDS
    if [[ $STEPS == tests ]]; then
        # The venv a MMFIX_MATRIX_STEPS=install run built (what it printed, and its seconds).
        if [[ ! -s $ROOT/$name.installed ]]; then
            echo "== $name: not installed (MMFIX_MATRIX_STEPS=install first; see $log)"
            return 1
        fi
        [[ -n $only_unit ]] || cat "$ROOT/$name.installed"  # (the units' scheduler prints it once)
        t_install=$(tail -n 1 "$ROOT/$name.installed-seconds")
        t0=$((SECONDS - t_install))
    else
        install_cell >"$ROOT/$name.installed.tmp" || { cat "$ROOT/$name.installed.tmp"; return 1; }
        cat "$ROOT/$name.installed.tmp"
        mv "$ROOT/$name.installed.tmp" "$ROOT/$name.installed"
        echo "$t_install" >"$ROOT/$name.installed-seconds"
        if [[ $STEPS == install ]]; then return 0; fi
    fi

    # The tests, in the cell's environment (its bin/ first on PATH: the tests run mmfix-run and
    # torchrun), from the repository root, with the whole-stack REQUIRE_* switches off: the one
    # unit asked for, or all of the cell's.
    local -a units
    if [[ -n $only_unit ]]; then units=("$only_unit"); else read -r -a units <<<"$(cell_units "$name")"; fi
    local unit
    for unit in "${units[@]}"; do
        case $unit in
            own)
                local -a own_switches=() own_args=()
                read -r -a own_args <<<"$own"
                while ((${#own_args[@]} > 0)) && [[ ${own_args[0]} != -- ]]; do
                    own_switches+=("${own_args[0]}")
                    own_args=("${own_args[@]:1}")
                done
                own_args=("${own_args[@]:1}")
                cell_pytest "$name" "$venv" "${own_switches[@]}" -- "${own_args[@]}" || rc=1
                ;;
            fast-ops) cell_pytest "$name" "$venv" -- -m "not slow or matrix" tests/ops || rc=1 ;;
            fast-rest) cell_pytest "$name" "$venv" -- -m "not slow or matrix" --ignore=tests/ops || rc=1 ;;
            crafted) cell_pytest "$name" "$venv" -- "${SECURITY_CRAFTED_TESTS[@]}" || rc=1 ;;
            cost) cell_pytest "$name" "$venv" -- "${SECURITY_COST_TESTS[@]}" || rc=1 ;;
            stack) cell_pytest "$name" "$venv" "${stack[@]}" -- "${STACK_TESTS[@]}" || rc=1 ;;
            *) echo "matrix: no unit named '$unit' (units: ${UNITS[*]})" >&2; return 2 ;;
        esac
    done
    if [[ -z $only_unit ]]; then echo "   ($name: install ${t_install} s, tests $((SECONDS - t0 - t_install)) s)"; fi
    return $rc
}

# cell_units NAME: the cell's units, in UNITS' order: `own` for a cell with its own tests, the
# standard ones (every other unit) otherwise.
cell_units() {
    local row unit
    row=$(row_of "$1") || return 2
    if [[ -n $(field "$row" 5) ]]; then
        echo own
        return 0
    fi
    for unit in "${UNITS[@]}"; do [[ $unit == own ]] || printf '%s ' "$unit"; done
    echo
}

usage() {
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

max_jobs=1
if [[ ${1:-} == --jobs ]]; then
    [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "matrix: --jobs needs a positive number" >&2; exit 2; }
    max_jobs=$2
    shift 2
fi
(($# > 0)) || usage
for f in "${SECURITY_CRAFTED_TESTS[@]}" "${SECURITY_COST_TESTS[@]}" "${STACK_TESTS[@]}" "${REQUIREMENT_FILES[@]}"; do
    [[ -f $f ]] || { echo "matrix: $f is missing (named at the top of $0)" >&2; exit 2; }
done

selected=()
case $1 in
    -h | --help) usage ;;
    list)
        printf '%s\n' "${CELLS[@]}"
        exit 0
        ;;
    plan)
        (($# == 2)) || usage
        row=$(row_of "$2") || { echo "matrix: no cell named '$2' (see: $0 list)" >&2; exit 2; }
        read -r -a reqs <<<"$(field "$row" 4)"
        owned=""
        for req in "${reqs[@]}"; do owned+=" $(package_name "${req#nodeps:}")"; done
        printf '%s\n' "${reqs[@]}" | grep -v '^nodeps:' || true
        shared_requirements "$owned"
        printf '%s\n' "-e $REPO"
        printf '%s\n' "${reqs[@]}" | sed -n 's/^nodeps:/--no-deps (--target: seen by the stack tests only, unless the cell runs its own tests) /p'
        own=$(field "$row" 5)
        [[ -z $own ]] || printf 'runs: %s\n' "$own"
        exit 0
        ;;
    ci | all)
        for row in "${CELLS[@]}"; do
            if [[ $1 == all || $(field "$row" 3) == yes ]]; then
                selected+=("$(field "$row" 1)")
            fi
        done
        ;;
    *)
        for name in "$@"; do
            row_of "$name" >/dev/null || { echo "matrix: no cell named '$name' (see: $0 list)" >&2; exit 2; }
            selected+=("$name")
        done
        ;;
esac

# cell_verdict NAME RC SECONDS: the summary line of one cell.
cell_verdict() {
    if (($2 == 0)); then
        printf 'PASS  %s  %s s' "$1" "$3"
    else
        printf 'FAIL  %s  %s s  (log: %s)' "$1" "$3" "$ROOT/$1.log"
    fi
}

results=()
failed=0
if [[ $STEPS == tests ]] && ((max_jobs > 1)); then
    # The cells' units shared out between the slots, longest first (UNITS), each printing into its
    # own file; printed cell by cell once all end. A cell's time: its install plus its units'.
    mkdir -p "$ROOT"
    for unit in "${UNITS[@]}"; do
        for name in "${selected[@]}"; do
            [[ " $(cell_units "$name") " == *" $unit "* ]] || continue
            while (($(jobs -rp | wc -l) >= max_jobs)); do wait -n || true; done
            (
                start=$SECONDS
                rc=0
                run_cell "$name" "$unit" >"$ROOT/$name.$unit.progress" 2>&1 || rc=$?
                echo "$rc $((SECONDS - start))" >"$ROOT/$name.$unit.rc"
            ) &
        done
    done
    wait
    for name in "${selected[@]}"; do
        if [[ -s $ROOT/$name.installed ]]; then
            cat "$ROOT/$name.installed"
            took=$(tail -n 1 "$ROOT/$name.installed-seconds")
        else
            echo "== $name: not installed (MMFIX_MATRIX_STEPS=install first; see $ROOT/$name.log)"
            took=0
        fi
        cell_rc=0 tests_took=0
        for unit in $(cell_units "$name"); do
            [[ -s $ROOT/$name.installed ]] && cat "$ROOT/$name.$unit.progress"
            read -r rc unit_took <"$ROOT/$name.$unit.rc"
            ((rc == 0)) || cell_rc=$rc
            tests_took=$((tests_took + unit_took))
        done
        [[ -s $ROOT/$name.installed ]] && echo "   ($name: install $took s, tests $tests_took s)"
        results+=("$(cell_verdict "$name" "$cell_rc" $((took + tests_took)))")
        ((cell_rc == 0)) || failed=1
    done
elif ((max_jobs == 1)); then
    for name in "${selected[@]}"; do
        start=$SECONDS
        rc=0
        run_cell "$name" || rc=$?
        results+=("$(cell_verdict "$name" $rc $((SECONDS - start)))")
        ((rc == 0)) || failed=1
    done
else
    # Up to $max_jobs cells at once, each printing into its own file; printed in order once all end.
    mkdir -p "$ROOT"
    for name in "${selected[@]}"; do
        while (($(jobs -rp | wc -l) >= max_jobs)); do wait -n || true; done
        (
            start=$SECONDS
            rc=0
            run_cell "$name" >"$ROOT/$name.progress" 2>&1 || rc=$?
            echo "$rc $((SECONDS - start))" >"$ROOT/$name.rc"
        ) &
    done
    wait
    for name in "${selected[@]}"; do
        cat "$ROOT/$name.progress"
        read -r rc took <"$ROOT/$name.rc"
        results+=("$(cell_verdict "$name" "$rc" "$took")")
        ((rc == 0)) || failed=1
    done
fi
echo "== matrix:"
printf '   %s\n' "${results[@]}"
exit $failed
