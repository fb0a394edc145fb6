"""Legacy and 3.x commands on a real single-node SLURM cluster (scripts/start_slurm_cluster.sh).

CI starts the cluster and sets REQUIRE_SLURM=1, so there these tests can fail but never skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import EXAMPLES, REPO, TRAIN, clean_env, run

pytestmark = pytest.mark.slow  # srun runs on a real cluster

DDP_CONFIG = REPO / "tests" / "configs" / "toy_ddp.py"
MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")


def _cluster_up() -> bool:
    if shutil.which("srun") is None:
        return False
    try:
        return subprocess.run(["srun", "-n", "1", "--quiet", "true"], timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture(scope="module", autouse=True)
def _cluster() -> None:
    """Asked once, when a test here is selected, not at collection: `srun true` waits ~9 s for
    the scheduler, which every pytest run that merely collects this file (the fast suite, each
    of the version matrix's runs) paid with a core idle (issue 29)."""
    if not _cluster_up():
        if os.environ.get("REQUIRE_SLURM") == "1":
            pytest.fail("REQUIRE_SLURM=1 but no SLURM cluster answers: run scripts/start_slurm_cluster.sh")
        pytest.skip("no SLURM cluster here (start one with scripts/start_slurm_cluster.sh)")


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def env(**extra: str) -> dict[str, str]:
    # srun exports the caller's environment to its tasks: PATH finds this interpreter,
    # PYTHONPATH the probe hook, MASTER_PORT keeps parallel jobs off each other's port.
    return clean_env(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(REPO / "tests"),
        MASTER_PORT=free_port(),
        **extra,
    )


def srun(*args: str, mmfix: bool = True, timeout: float = 300, **extra: str):
    cmd = ["srun", *args]
    e = env(**extra)
    if mmfix:
        cmd = [MMFIX_RUN, *cmd]
    else:
        e["MMFIX_DISABLE"] = "1"
    proc = run(cmd, env=e, timeout=timeout)
    return proc, proc.stdout + proc.stderr


def probes(work: Path) -> list[dict]:
    return [torch.load(p) for p in sorted(work.glob("probe_rank*.pth"))]


def assert_trained_together(work: Path) -> None:
    ranks = probes(work)
    assert [p["world_size"] for p in ranks] == [2, 2] and [p["steps"] for p in ranks] == [8, 8]
    for key, value in ranks[0]["state"].items():
        assert torch.equal(value, ranks[1]["state"][key]), key
    assert (work / "saved_by_rank0").exists() and not (work / "saved_by_rank1").exists()


def test_srun_with_launcher_slurm_trains_with_world_size_2(tmp_path: Path) -> None:
    proc, log = srun(
        "-n", "2", "python", str(TRAIN), str(DDP_CONFIG), "--launcher", "slurm", "--work-dir", str(tmp_path)
    )
    assert proc.returncode == 0, log[-3000:]
    assert_trained_together(tmp_path)


def test_the_same_srun_fails_without_mmfix(tmp_path: Path) -> None:
    proc, log = srun(
        "-n",
        "2",
        "python",
        str(TRAIN),
        str(DDP_CONFIG),
        "--launcher",
        "slurm",
        "--work-dir",
        str(tmp_path),
        mmfix=False,
    )
    assert proc.returncode != 0
    assert "_cuda_setDevice" in log or "No CUDA GPUs are available" in log


def test_srun_without_launcher_gets_launcher_slurm(tmp_path: Path) -> None:
    proc, log = srun("-n", "2", "python", str(TRAIN), str(DDP_CONFIG), "--work-dir", str(tmp_path))
    assert proc.returncode == 0, log[-3000:]
    assert log.count("--launcher slurm added: srun started 2 tasks") == 1  # rank 0 only
    assert_trained_together(tmp_path)


def test_legacy_command_under_srun_never_starts_torchrun(tmp_path: Path) -> None:
    proc, log = srun(
        "-n",
        "2",
        "python",
        str(TRAIN),
        str(DDP_CONFIG),
        "--work-dir",
        str(tmp_path),
        "--gpus",
        "2",
        "--seed",
        "0",
        "--no-validate",
    )
    assert proc.returncode == 0, log[-3000:]
    assert "--gpus 2 dropped: under srun each of the 2 tasks is one process" in log
    assert "torch.distributed.run" not in log and "torchelastic" not in log.lower()
    assert_trained_together(tmp_path)
    assert not list(tmp_path.glob("best_*.pth"))  # --no-validate reached the config


def test_torchrun_inside_a_multitask_srun_is_refused_with_the_two_commands(tmp_path: Path) -> None:
    start = time.monotonic()
    proc, log = srun(
        "-n",
        "2",
        "python",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(TRAIN),
        str(DDP_CONFIG),
        "--launcher",
        "pytorch",
        "--work-dir",
        str(tmp_path),
        timeout=240,
    )
    assert proc.returncode != 0
    # Stopped in torchrun's own process, before any worker: once, not once per worker,
    # and no ChildFailedError summary after it.
    assert log.count("torchrun was started inside an srun step with 2 tasks") == 1, log[-3000:]
    assert (
        "srun -n 2 python" in log and "--launcher slurm" in log and "srun -n 1 python -m torch.distributed.run" in log
    )
    assert f"python {TRAIN} CONFIG" in log
    assert "ChildFailedError" not in log and "Traceback" not in log
    assert not list(tmp_path.glob("epoch_*.pth"))  # nothing trained
    assert not list(tmp_path.glob("probe_rank*.pth"))  # no worker started
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("kill_on_bad_exit", [True, False])
def test_a_failing_rank_fails_the_whole_step(tmp_path: Path, kill_on_bad_exit: bool) -> None:
    args = ["-n", "2"] + (["--kill-on-bad-exit=1"] if kill_on_bad_exit else [])
    start = time.monotonic()
    proc, log = srun(
        *args,
        "python",
        str(TRAIN),
        str(DDP_CONFIG),
        "--launcher",
        "slurm",
        "--work-dir",
        str(tmp_path),
        PROBE_FAIL_RANK="1",
        timeout=280,
    )
    assert proc.returncode != 0
    assert "probe: deliberate failure on rank 1" in log
    assert time.monotonic() - start < 250


def test_2x_slurm_train_sh_runs_unchanged_against_3x_tools(tmp_path: Path) -> None:
    e = env(GPUS="2", GPUS_PER_NODE="2", CPUS_PER_TASK="1", SRUN_ARGS="")
    cmd = [
        MMFIX_RUN,
        "bash",
        "tools/slurm_train.sh",
        "debug",
        "toy",
        str(DDP_CONFIG),
        str(tmp_path),
        "--seed",
        "0",
        "--no-validate",
    ]
    proc = run(cmd, env=e, cwd=EXAMPLES, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert_trained_together(tmp_path)
    assert "randomness.seed=0" in proc.stdout + proc.stderr
