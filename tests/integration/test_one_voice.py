"""One voice for a launched job (issue 11, item 8): real `--gpus 2` launches (torchrun, gloo on CPU)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, TRAIN, clean_env, run, sigint_as_in_a_terminal

pytestmark = pytest.mark.slow  # launched jobs

DDP_CONFIG = REPO / "tests" / "configs" / "toy_ddp.py"
MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")
LINE = re.compile(r"^\d\d/\d\d \d\d:\d\d:\d\d - mmfix - (DEBUG|INFO|WARNING|ERROR) - ")


def test_a_bad_setting_is_reported_once_and_every_message_has_one_format(tmp_path: Path) -> None:
    env = clean_env(PYTHONPATH=str(REPO / "tests"), MMFIX_CPU_MAP="perhaps", MMFIX_MEMORY_REPORT="1")
    proc = run(
        [
            MMFIX_RUN,
            sys.executable,
            str(TRAIN),
            str(DDP_CONFIG),
            "--work-dir",
            str(tmp_path),
            "--gpus",
            "2",
            "--no-validate",
        ],
        env=env,
        timeout=300,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    # The launcher, torchrun and two workers all parse the settings: one report.
    assert log.count("MMFIX_CPU_MAP='perhaps' is not a yes/no value") == 1
    # Before MMEngine is loaded (the launch) and after (the memory report): the same format.
    mine = [line for line in proc.stderr.splitlines() if " - mmfix - " in line or "mmfix:" in line]
    assert any("command line translated" in line for line in mine)
    assert any("memory report: peak memory per rank" in line for line in mine)
    assert mine and all(LINE.match(line) for line in mine), mine
    assert "[mmfix]" not in log
    # ... and the training log file gets the same line.
    logfile = next(tmp_path.glob("*/*.log")).read_text()
    assert re.search(r"\d\d:\d\d:\d\d - mmfix - INFO - memory report: peak memory per rank", logfile)


def test_ctrl_c_of_a_launched_job_prints_at_most_one_line_per_rank(tmp_path: Path) -> None:
    work = tmp_path / "work"
    env = clean_env(PYTHONPATH=str(REPO / "tests"))
    job = subprocess.Popen(
        [
            MMFIX_RUN,
            sys.executable,
            str(TRAIN),
            str(DDP_CONFIG),
            "--work-dir",
            str(work),
            "--gpus",
            "2",
            "--no-validate",
            "--cfg-options",
            "train_cfg.max_epochs=400",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_as_in_a_terminal,
    )
    try:
        deadline = time.monotonic() + 240
        while not (work / "epoch_1.pth").exists():  # the workers are training
            assert job.poll() is None and time.monotonic() < deadline, "the job did not start training"
            time.sleep(0.5)
        os.killpg(job.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        _out, err = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode != 0
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-4000:]
    assert "_importhooks" not in err
    interrupted = [line for line in err.splitlines() if "interrupted" in line]
    assert 1 <= len(interrupted) <= 3, interrupted  # the two ranks and torchrun at most
    assert sum("rank 0" in line for line in interrupted) <= 1 and sum("rank 1" in line for line in interrupted) <= 1
