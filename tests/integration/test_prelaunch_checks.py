"""A legacy launch that cannot work stops before anything starts (issue 11, items 1 and 2).

Real `mmfix-run python tools/train.py … --gpus N` commands. Every Python process started
is recorded by a user sitecustomize that mmfix's bootstrap chains to, so "nothing
started" is observed, not assumed: exactly one interpreter (the command itself) ran.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, TRAIN, clean_env, run

pytestmark = pytest.mark.slow  # launch attempts

DDP_CONFIG = REPO / "tests" / "configs" / "toy_ddp.py"
MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")
RECORDER = """
import os, sys
with open(os.environ["PYTHON_STARTS"], "a") as fh:
    fh.write(f"{os.getpid()} {' '.join(getattr(sys, 'orig_argv', sys.argv))}\\n")
"""


def legacy(tmp_path: Path, *args: object, **env: str):
    """Run the legacy command; return (process, seconds, the Python starts recorded)."""
    (tmp_path / "recorder").mkdir(exist_ok=True)
    (tmp_path / "recorder" / "sitecustomize.py").write_text(RECORDER)
    starts = tmp_path / "starts.txt"
    environment = clean_env(PYTHONPATH=str(tmp_path / "recorder"), PYTHON_STARTS=str(starts), **env)
    begin = time.monotonic()
    proc = run([MMFIX_RUN, sys.executable, str(TRAIN), *map(str, args)], env=environment, cwd=tmp_path, timeout=120)
    seconds = time.monotonic() - begin
    return proc, seconds, starts.read_text().splitlines() if starts.exists() else []


def assert_refused_before_anything_started(proc, seconds: float, starts: list[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("error:") == 1
    assert seconds < 2, seconds
    assert len(starts) == 1 and str(TRAIN) in starts[0], starts  # no torchrun, no worker ever ran


def test_gpus_above_the_usable_cpu_count_on_a_cpu_only_host_is_refused(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    proc, seconds, starts = legacy(
        tmp_path, DDP_CONFIG, "--gpus", cores + 1, "--work-dir", tmp_path / "w", CUDA_VISIBLE_DEVICES=""
    )
    assert_refused_before_anything_started(proc, seconds, starts, f"would start {cores + 1} CPU workers")
    assert f"--gpus {cores} or fewer" in proc.stderr and "MMFIX_ALLOW_CPU_OVERSUBSCRIBE=1" in proc.stderr
    assert not (tmp_path / "w").exists()


def test_the_affinity_mask_not_the_machine_sets_the_limit(tmp_path: Path) -> None:
    # taskset narrows this process to one core: --gpus 2 is then one worker per core too many.
    command = ["taskset", "-c", "0", MMFIX_RUN, sys.executable, str(TRAIN), str(DDP_CONFIG), "--gpus", "2"]
    proc = run(command, env=clean_env(CUDA_VISIBLE_DEVICES=""), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "only 1 CPU core." in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "case",
    [
        "missing config",
        "config is a folder",
        "config does not parse",
        "missing --resume-from",
        "missing --load-from",
        "--options with --cfg-options",
    ],
)
def test_prelaunch_checks_stop_in_under_two_seconds(tmp_path: Path, case: str) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("model = dict(type='X',\n")
    args, needle = {
        "missing config": ([tmp_path / "nope.py"], "does not exist"),
        "config is a folder": ([tmp_path], "is not a file"),
        "config does not parse": ([broken], "is not valid Python (line"),
        "missing --resume-from": ([DDP_CONFIG, "--resume-from", tmp_path / "epoch_9.pth"], "epoch_9.pth' does not"),
        "missing --load-from": ([DDP_CONFIG, "--load-from", tmp_path / "pre.pth"], "pre.pth' does not exist"),
        "--options with --cfg-options": (
            [DDP_CONFIG, "--options", "a=1", "--cfg-options", "b=2"],
            "--options and --cfg-options were both given",
        ),
    }[case]
    proc, seconds, starts = legacy(tmp_path, *args, "--gpus", "2", CUDA_VISIBLE_DEVICES="")
    assert_refused_before_anything_started(proc, seconds, starts, needle)
