"""4,000 seeded mutations of a real MMEngine checkpoint through the patched loader.

Half mutate the structures crafted files abuse: numpy dtype/array and HistoryBuffer
states, memo indices and the zip directory (2,000+ of those); a fifth of the cases
also go through ``mmfix inspect``'s static reader.

Each either loads or raises mmfix's clear error (CheckpointCorruptError /
CheckpointRefusedError); none crashes the interpreter, hangs past a bound, or
executes anything (an audit hook watches for process creation and exec/compile).
"""

from __future__ import annotations

import json
import sys

import pytest

from conftest import REPO, clean_env, run

pytestmark = pytest.mark.slow  # thousands of crafted files

FIXTURES = REPO / "tests" / "fixtures"
CASES = 4000
CHUNK = 1000
PER_CASE_BOUND_S = 10.0


@pytest.mark.parametrize("first", range(0, CASES, CHUNK))
def test_seeded_mutations_load_or_raise_our_error(first: int) -> None:
    proc = run(
        [
            sys.executable,
            str(REPO / "tests" / "fuzz_worker.py"),
            str(FIXTURES / "runner_numpy2.pth"),
            str(FIXTURES / "runner_numpy1.pth"),
            str(first),
            str(CHUNK),
        ],
        env=clean_env(),
        timeout=600,
    )
    assert proc.returncode == 0, f"the interpreter died (status {proc.returncode}):\n{proc.stderr[-3000:]}"
    line = next(x for x in proc.stdout.splitlines() if x.startswith("FUZZ "))
    result = json.loads(line[5:])
    assert result["bad"] == [], result["bad"]
    assert result["disagree"] == [], result["disagree"]  # inspect's "loads" is the loader's
    assert result["executed"] == []
    assert sum(result["outcomes"].values()) == CHUNK
    assert result["outcomes"].get("CheckpointCorruptError", 0) > CHUNK // 4  # the mutations really bite
    assert result["slowest_s"] < PER_CASE_BOUND_S
    for kind in ("numpy-state", "memo", "zip-directory"):
        assert result["kinds"].get(kind, 0) > CHUNK // 20, result["kinds"]
