"""scripts/matrix.sh (issue 21) says what it runs, and the README's table and .ci/run agree with it.

Only the script's reading commands run here (`list`, `plan`, a wrong name): they install nothing.
The cells themselves run in CI (.ci/run ends with `matrix.sh --jobs 2 ci`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "matrix.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="scripts/matrix.sh is a bash script")


def _matrix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def _cells() -> dict[str, list[str]]:
    listed = _matrix("list")
    assert listed.returncode == 0, listed.stderr
    rows = [[field.strip() for field in line.split("|")] for line in listed.stdout.splitlines() if line.strip()]
    return {row[0]: row for row in rows}


def test_the_readme_table_lists_every_cell_with_its_ci_column_and_python() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Version matrix") : readme.index("\n## ", readme.index("## Version matrix") + 1)]
    table = {
        m.group(1): (m.group(2), m.group(3))
        for m in re.finditer(r"^\| `([a-z0-9]+)` \| (yes|no) \| ([0-9.]+) \|", section, flags=re.M)
    }
    cells = _cells()
    assert set(table) == set(cells)
    for name, row in cells.items():
        assert table[name] == (row[2], row[1]), name


def test_ci_runs_the_readme_test_command_and_the_ci_cells_beside_it() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if line.startswith("pip install -r requirements/test.txt"))
    assert command in ci and "python -m pytest -q -n auto" in command
    # The cells' venvs are built from the start, their tests run after the main suite (issue 29).
    install = "MMFIX_MATRIX_STEPS=install bash scripts/matrix.sh --jobs 3 ci"
    tests = "MMFIX_MATRIX_STEPS=tests MMFIX_MATRIX_WORKERS=0 bash scripts/matrix.sh --jobs 2 ci"
    assert ci.index(install) < ci.index(command) < ci.index(tests)
    assert {name for name, row in _cells().items() if row[2] == "yes"} == {"floor", "ceiling", "mmpose"}


def test_plan_prints_the_pins_the_shared_requirements_and_a_cells_own_tests() -> None:
    ceiling = _matrix("plan", "ceiling")
    assert ceiling.returncode == 0, ceiling.stderr
    lines = ceiling.stdout.splitlines()
    assert "mmcv-lite==2.2.0" in lines and "mmcv-lite==2.1.0" not in lines  # the cell's pin wins
    assert not any(line.startswith(("ruff", "mypy")) for line in lines)  # the lint run's tools
    assert any(line.startswith("--no-deps") and line.endswith("mmsegmentation==1.2.2") for line in lines)
    assert not any(line.startswith("runs:") for line in lines)  # the three standard runs

    mmpose = _matrix("plan", "mmpose")
    assert mmpose.returncode == 0, mmpose.stderr
    assert "numpy<2" in mmpose.stdout.splitlines() and "numpy>=2" not in mmpose.stdout.splitlines()
    runs = [line for line in mmpose.stdout.splitlines() if line.startswith("runs:")]
    assert len(runs) == 1 and "REQUIRE_TOOLBOXES=mmpose" in runs[0] and "-k mmpose" in runs[0]


def test_a_cell_that_does_not_exist_is_refused_naming_it() -> None:
    for args in (("no-such-cell",), ("plan", "no-such-cell")):
        result = _matrix(*args)
        assert result.returncode == 2
        assert "no cell named 'no-such-cell'" in result.stderr


def test_the_heavy_first_table_names_existing_test_files_and_orders_them_first() -> None:
    import sys

    from conftest import HEAVY_FIRST

    tests = Path(__file__).resolve().parents[1]
    assert all((tests / name).is_file() for name in HEAVY_FIRST), [n for n in HEAVY_FIRST if not (tests / n).is_file()]
    listing = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            str(tests / "unit"),
            str(tests / "integration" / "test_faults.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tests.parent,
        timeout=300,
    ).stdout.splitlines()
    ids = [line for line in listing if "::" in line]
    # the listed heavy file comes first though collected after the unit tests
    assert ids and ids[0].startswith("tests/integration/test_faults.py::"), ids[:3]


def test_ci_tests_step_shares_out_every_cells_units_once_and_fails_the_cell_of_a_failing_unit(tmp_path: Path) -> None:
    # The scheduler of `MMFIX_MATRIX_STEPS=tests --jobs 2` (issue 29) on installed-looking cells
    # whose interpreter only records what it was asked to run: the real cells' venvs take minutes.
    trace = tmp_path / "trace"
    for cell in ("floor", "ceiling", "mmpose"):
        (tmp_path / f"{cell}.installed").write_text(f"== {cell}: Python x\n   installed in 10 s: recorded\n")
        (tmp_path / f"{cell}.installed-seconds").write_text("10\n")
        python = tmp_path / cell / "bin" / "python"
        python.parent.mkdir(parents=True)
        failing = "floor" if cell == "floor" else "no-such-cell"
        python.write_text(
            "#!/bin/bash\n"
            f'echo "{cell} $*" >>{trace}\n'
            f'if [[ "$*" == *test_bounded_cost* && {cell} == {failing} ]]; then\n'
            '  echo "=== 1 failed, 3 passed in 1.00s ==="; echo "FAILED tests/x.py::y"; exit 1\nfi\n'
            'echo "=== 3 passed in 1.00s ==="\n'
        )
        python.chmod(0o755)
    result = subprocess.run(
        ["bash", str(SCRIPT), "--jobs", "2", "ci"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "MMFIX_MATRIX_DIR": str(tmp_path),
            "MMFIX_MATRIX_STEPS": "tests",
            "MMFIX_MATRIX_WORKERS": "0",
        },
    )
    assert result.returncode == 1, result.stdout + result.stderr
    runs = sorted(trace.read_text().splitlines())
    standard = [
        "-m not slow or matrix --ignore=tests/ops",
        "-m not slow or matrix tests/ops",
        "tests/integration/test_bounded_cost.py tests/unit/test_pickle_cost.py",
        "tests/integration/test_crafted_checkpoints.py tests/integration/test_malicious_checkpoints.py",
        "tests/integration/test_todays_stack.py",
    ]
    suffix = "-m pytest -q -p no:cacheprovider --durations=10 -n 0 --dist loadfile "
    expected = [f"{cell} {suffix}{args}" for cell in ("ceiling", "floor") for args in standard]
    expected.append(f"mmpose {suffix}{_cells()['mmpose'][4].split(' -- ', 1)[1]}")
    assert runs == sorted(expected)  # every unit once, nothing else
    verdicts = result.stdout.split("== matrix:")[1].split()
    assert verdicts[:2] == ["FAIL", "floor"] and "PASS" in verdicts and "ceiling" in verdicts
    assert "FAILED tests/x.py::y" in result.stdout
    assert result.stdout.count("== floor: Python x") == 1  # each cell's header once, its units below it
