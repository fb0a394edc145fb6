#!/usr/bin/env bash
# The version matrix (issue 21): mmfix patches torch's and MMEngine's internals, so every release
# that pyproject.toml claims is run, each in a fresh virtual environment of its own.
#
#   scripts/matrix.sh ci          the cells meant for CI (column `ci` = yes)
#   scripts/matrix.sh all         every cell
#   scripts/matrix.sh CELL...     the named cells
#   scripts/matrix.sh list        the table
#
# Each cell: a fresh venv under $MMFIX_MATRIX_DIR/<cell> (default /tmp/mmfix-matrix), the cell's
# pinned requirements plus `-e .` plus requirements/test.txt's test tools (its own torch, MMEngine,
# numpy and wrapt pins are the cell's to choose; ruff and mypy are the lint run's, not a cell's)
# plus requirements/mmdet.txt (mmcv-lite and MMDetection, pure Python: the `not slow` suite's ops
# tests drive mmfix's ops through mmcv's Python API, see EXTRA_REQUIREMENTS),
# then `python -m pytest -q -m "not slow"` and the checkpoint-security tests (SECURITY_TESTS,
# which are marked slow and need MMEngine). Prints PASS/FAIL per cell with the time taken (install
# + tests) and exits non-zero if any cell fails. The pip output and each pytest run's full output
# are in $MMFIX_MATRIX_DIR/<cell>.log.
#
# Only the libraries mmfix patches vary here: the whole-stack tests (MMDetection, compiled mmcv,
# the OpenMMLab toolboxes, SLURM) are .ci/run's main run, so their REQUIRE_* switches are cleared
# inside a cell (they skip there, saying why).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
ROOT=${MMFIX_MATRIX_DIR:-/tmp/mmfix-matrix}

# One row per cell: name | python | ci | pip requirements (space-separated, no spaces inside one).
#  ci = yes: run by `matrix.sh ci`; no: by `all` or by name only. py39 and py313 download their
#  torch and its CUDA libraries from PyPI (~3 GB: 1-2 min here, measured 30-57 MB/s) but, like
#  every cell, take ~15 min on 2 cores (the security tests ~10 of them), more than CI's 90 min leave
#  beside the main suite and the two CI cells.
CELLS=(
    # The newest releases: torch 2.14.1 (its CUDA build, from this machine's local index), wrapt 2.x.
    "newest | 3.11 | yes | torch==2.14.1 wrapt>=2,<3 mmengine==0.10.7 numpy>=2"
    # pyproject.toml's floors: torch 2.7, wrapt 1.14, MMEngine 0.10.0. The floor was torch 2.4
    # until this matrix ran it (2026-12-02): on torch 2.4.1, torch.load defaults to
    # weights_only=False before 2.6 (a plain load ran a payload through mmfix), its (object, name)
    # allowlist entries need a newer add_safe_globals, mappable.py imports torch.utils.serialization,
    # and embedding_bag hits an autograd assert (carafe); on 2.6.0 only
    # tests/unit/test_shared_copy_checks.py failed (torch.utils.serialization is torch 2.7+). On an
    # older torch mmfix now applies nothing and says so at import. Not yet run on 2.7.1.
    # wrapt 1.14.0 has no cp311 wheel: pip builds it from its sdist (with its C extension; gcc).
    # numpy<2: MMEngine 0.10.0 (Oct 2023) predates numpy 2, so this cell keeps the stack of its
    # time; opencv-python<4.12 because 4.12+ requires numpy>=2 (without the pin pip downloads and
    # rejects five opencv-python releases, ~350 MB, before settling on 4.11).
    "oldest | 3.11 | yes | torch==2.7.1 wrapt==1.14.0 mmengine==0.10.0 numpy<2 opencv-python<4.12"
    # Python's floor and ceiling. torch 2.8.0 is the last release with cp39 wheels (numpy 2.0.2
    # the last numpy); 3.13 gets torch 2.14.1's cp313 wheel from PyPI.
    "py39   | 3.9  | no  | torch==2.8.0 wrapt>=2,<3 mmengine==0.10.7 numpy>=2"
    "py313  | 3.13 | no  | torch==2.14.1 wrapt>=2,<3 mmengine==0.10.7 numpy>=2"
)

SECURITY_TESTS=(
    tests/integration/test_crafted_checkpoints.py
    tests/integration/test_malicious_checkpoints.py
    tests/integration/test_bounded_cost.py
    tests/unit/test_pickle_cost.py
)

# Installed in every cell: without mmcv the 59 `not slow` tests that drive mmfix's ops through
# mmcv's Python API (tests/ops_support.py's require_mmcv) skip, and a cell would not run them on
# its torch.
EXTRA_REQUIREMENTS=(requirements/mmdet.txt)

# Packages whose versions each cell pins itself; requirements/test.txt's other lines are its test tools.
CELL_OWNED="torch mmengine numpy wrapt"
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

# requirements/test.txt less comments, the cell-owned packages and the lint tools.
test_tools() {
    local line name
    while IFS= read -r line; do
        line=$(trim "${line%%#*}")
        [[ -n $line ]] || continue
        name=$(sed -E 's/^([A-Za-z0-9_.-]+).*/\1/' <<<"$line" | tr '[:upper:]_' '[:lower:]-')
        [[ " $CELL_OWNED $LINT_TOOLS " == *" $name "* ]] && continue
        printf '%s\n' "$line"
    done <requirements/test.txt
}

# cell_pytest NAME VENV ARGS...: one pytest run; prints its summary line (and failures).
cell_pytest() {
    local name=$1 venv=$2 out summary prc=0
    shift 2
    out=$ROOT/$name.pytest.out
    echo "---- python -m pytest -q $*" >>"$ROOT/$name.log"
    env -u REQUIRE_MMDET -u REQUIRE_COMPILED_MMCV -u REQUIRE_TOOLBOXES -u REQUIRE_SLURM \
        -u REQUIRE_NO_PKG_RESOURCES -u REQUIRE_MMCV22 -u PYTHONPATH \
        VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
        "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" >"$out" 2>&1 || prc=$?
    cat "$out" >>"$ROOT/$name.log"
    summary=$(grep -E '^=+ .* in [0-9.]+s' "$out" | tail -n 1 || true)
    [[ -n $summary ]] || summary=$(tail -n 1 "$out")
    echo "   pytest -q $*: $summary"
    if ((prc != 0)); then
        grep -E '^(FAILED|ERROR) ' "$out" | sed 's/^/   | /' || true
    fi
    rm -f "$out"
    return $prc
}

# run_cell NAME: 0 if the cell installs and its tests pass. Prints progress; everything else goes to the log.
run_cell() {
    local name=$1 row py reqs tools python venv log rc=0 t0 t_install
    row=$(row_of "$name") || { echo "matrix: no cell named '$name'" >&2; return 2; }
    py=$(field "$row" 2)
    read -r -a reqs <<<"$(field "$row" 4)"
    mapfile -t tools < <(test_tools)
    local -a extra=()
    local f
    for f in "${EXTRA_REQUIREMENTS[@]}"; do extra+=(-r "$f"); done
    venv=$ROOT/$name
    log=$ROOT/$name.log
    mkdir -p "$ROOT"
    : >"$log"
    echo "== $name: Python $py; ${reqs[*]}; + -e . ${tools[*]} ${extra[*]}"
    t0=$SECONDS
    if ! python=$(find_python "$py"); then
        echo "   no Python $py on this machine (PATH or pyenv)"
        return 1
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv" >>"$log" 2>&1 || { echo "   venv failed (see $log)"; return 1; }
    if ! "$venv/bin/python" -m pip install --progress-bar off "${reqs[@]}" "${tools[@]}" \
        "${extra[@]}" -e "$REPO" >>"$log" 2>&1; then
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

    # The tests, in the cell's environment (its bin/ first on PATH: the tests run mmfix-run and
    # torchrun), from the repository root, with the whole-stack REQUIRE_* switches off.
    cell_pytest "$name" "$venv" -m "not slow" || rc=1
    cell_pytest "$name" "$venv" "${SECURITY_TESTS[@]}" || rc=1
    echo "   ($name: install ${t_install} s, tests $((SECONDS - t0 - t_install)) s)"
    return $rc
}

usage() {
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

(($# > 0)) || usage
for f in "${SECURITY_TESTS[@]}"; do
    [[ -f $f ]] || { echo "matrix: $f is missing (SECURITY_TESTS)" >&2; exit 2; }
done

selected=()
case $1 in
    -h | --help) usage ;;
    list)
        printf '%s\n' "${CELLS[@]}"
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

results=()
failed=0
for name in "${selected[@]}"; do
    start=$SECONDS
    if run_cell "$name"; then
        results+=("PASS  $name  $((SECONDS - start)) s")
    else
        results+=("FAIL  $name  $((SECONDS - start)) s  (log: $ROOT/$name.log)")
        failed=1
    fi
done
echo "== matrix:"
printf '   %s\n' "${results[@]}"
exit $failed
