"""Real 2-process CPU runs through torchrun with a real MMEngine Runner (gloo)."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO, TRAIN, clean_env, run, run_python

pytestmark = pytest.mark.slow  # torchrun runs

DDP_CONFIG = REPO / "tests" / "configs" / "toy_ddp.py"
MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")


def torchrun(work_dir: Path, *extra: str, mmfix: bool = True, **env: str):
    cmd = [
        sys.executable,
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
        str(work_dir),
        *extra,
    ]
    if mmfix:
        cmd = [MMFIX_RUN, *cmd]
    # CUDA_VISIBLE_DEVICES= : a CPU-only run even on a CUDA host
    environment = clean_env(PYTHONPATH=str(REPO / "tests"), CUDA_VISIBLE_DEVICES="", **env)
    if not mmfix:
        environment["MMFIX_DISABLE"] = "1"
    proc = run(cmd, env=environment, timeout=300)
    return proc, proc.stdout + proc.stderr


def test_two_rank_cpu_training_under_mmfix(tmp_path: Path) -> None:
    proc, log = torchrun(tmp_path, MMFIX_MEMORY_REPORT="1")
    assert proc.returncode == 0, log[-4000:]
    probes = [torch.load(tmp_path / f"probe_rank{r}.pth") for r in (0, 1)]
    assert [p["world_size"] for p in probes] == [2, 2]
    assert [p["steps"] for p in probes] == [8, 8]  # 64 samples / batch 8 / 2 ranks x 2 epochs
    for key, value in probes[0]["state"].items():
        assert torch.equal(value, probes[1]["state"][key]), f"{key} differs between ranks: DDP did not average"
    # Different data on each rank, identical weights: the gradients really were averaged.
    assert len((tmp_path / "saved_by_rank0").read_text().split()) >= 2  # epoch and best checkpoints
    assert not (tmp_path / "saved_by_rank1").exists()
    assert (tmp_path / "epoch_2.pth").exists()
    assert log.count("mmfix uses gloo instead") == 1  # one warning, from rank 0
    assert "memory report: peak memory per rank" in log
    table = log[log.index("memory report: peak memory per rank") :]
    assert " cpu " in table and "\n    0  " in table and "\n    1  " in table


def test_the_same_run_fails_without_mmfix(tmp_path: Path) -> None:
    proc, log = torchrun(tmp_path, mmfix=False)
    assert proc.returncode != 0
    assert "_cuda_setDevice" in log or "No CUDA GPUs are available" in log


def test_unused_parameters_are_named_and_the_switch_fixes_it(tmp_path: Path) -> None:
    proc, log = torchrun(tmp_path / "a", "--cfg-options", "model.unused_branch=True")
    assert proc.returncode != 0
    assert "UnusedParametersError: DDP stopped training: these parameters received no gradient" in log
    assert "aux_head.weight, aux_head.bias" in log
    assert "--cfg-options find_unused_parameters=True" in log
    # Each rank ends with the message, once, and no traceback of its own; torchrun's summary
    # still names the rank and the error (from the error file).
    for rank in (0, 1):
        assert proc.stderr.count(f"[rank {rank}] mmfix.UnusedParametersError: DDP stopped training") == 1
    summary = log[log.index("Root Cause") :]
    assert "error_file: <N/A>" not in summary and "UnusedParametersError: DDP stopped training" in summary
    head = proc.stderr[: proc.stderr.index("ChildFailedError")]
    assert head.count("Traceback (most recent call last)") <= 1  # torchrun's own, ahead of its summary

    proc, log = torchrun(tmp_path / "b", "--cfg-options", "model.unused_branch=True", MMFIX_FIND_UNUSED_PARAMETERS="1")
    assert proc.returncode == 0, log[-3000:]
    assert "DDP runs with find_unused_parameters=True" in log
    assert (tmp_path / "b" / "epoch_2.pth").exists()


# --- device pinning, with torch.cuda faked: this machine has no GPU ------------------------

FAKE_CUDA = """
import json, torch, torch.cuda as tc
calls = []
state = {"init": False}
def fake_lazy_init():
    if not state["init"]:
        calls.append("init")
        state["init"] = True
tc.is_initialized = lambda: state["init"]
tc._lazy_init = fake_lazy_init
tc.is_available = lambda: True
tc.device_count = lambda: 2
tc.set_device = lambda d: calls.append(["set", d])
import mmfix
before = list(calls)
try:
    torch.cuda._lazy_init()   # what the first CUDA allocation (or map_location='cuda') triggers
    err = None
except Exception as e:
    err = [type(e).__name__, str(e)]
torch.cuda._lazy_init()
print(json.dumps({"at_import": before, "calls": calls, "error": err,
                  "status": mmfix.status()["patches"]["cuda_device"]["state"]}))
"""


def _fake(**env: str) -> dict:
    return json.loads(run_python(FAKE_CUDA, env=clean_env(**env)).stdout.strip().splitlines()[-1])


def test_device_pinned_to_local_rank_at_cuda_init_not_at_import() -> None:
    out = _fake(LOCAL_RANK="1", RANK="1", WORLD_SIZE="2")
    assert out["at_import"] == []  # import mmfix did not initialise CUDA
    assert out["calls"] == ["init", ["set", 1]] and out["error"] is None
    assert out["status"] == "active"


def test_device_pinned_from_slurm_localid_in_a_multitask_srun_step() -> None:
    out = _fake(SLURM_STEP_ID="0", SLURM_PROCID="3", SLURM_LOCALID="1", SLURM_NTASKS="4")
    assert out["calls"] == ["init", ["set", 1]]


def test_no_pinning_outside_workers() -> None:
    out = _fake()
    assert out["calls"] == ["init"] and out["status"] == "skipped"


def test_local_rank_beyond_visible_devices_is_a_clear_error() -> None:
    out = _fake(LOCAL_RANK="3", CUDA_VISIBLE_DEVICES="0,1")
    kind, message = out["error"]
    assert kind == "DeviceAssignmentError"
    assert "LOCAL_RANK=3" in message and "only 2 CUDA devices are visible" in message
    assert "CUDA_VISIBLE_DEVICES is '0,1'" in message and "--nproc_per_node 2" in message


def test_memory_report_flags_outliers() -> None:
    from mmfix._patches.memory_report import format_table

    gib = 2**30
    rows = [
        {
            "rank": r,
            "host": "n1",
            "device": f"cuda:{r}",
            "peak_allocated": gib,
            "peak_reserved": v * gib,
            "peak_rss": gib,
        }
        for r, v in enumerate([1.0, 1.05, 2.0, 1.0])
    ]
    table = format_table(rows)
    flagged = [line for line in table.splitlines() if "above the median" in line and line.strip()[0].isdigit()]
    assert len(flagged) == 1 and flagged[0].split()[0] == "2" and "95% above the median" in flagged[0]  # median 1.025


# --- mmfix doctor ------------------------------------------------------------------------------


def test_doctor_reports_what_a_bug_report_needs() -> None:
    holder = socket.socket()
    try:
        holder.bind(("0.0.0.0", 29500))
        holder.listen()
    except OSError:
        pass  # something else holds it: the report must say "in use" either way
    try:
        env = clean_env(
            CUDA_VISIBLE_DEVICES="",
            RANK="0",
            WORLD_SIZE="2",
            MASTER_PORT="29500",
            SLURM_JOB_ID="42",
            SLURM_NTASKS="2",
            MMFIX_MMAP="1",
        )
        report = json.loads(run([sys.executable, "-m", "mmfix", "doctor", "--json"], env=env, check=True).stdout)
        text = run([sys.executable, "-m", "mmfix", "doctor"], env=env, check=True).stdout
    finally:
        holder.close()
    assert report["packages"]["torch"] == torch.__version__.split("+")[0] or report["packages"]["torch"].startswith(
        torch.__version__.split("+")[0]
    )
    assert report["packages"]["mmengine"] == "0.10.7"
    assert report["torch"]["cuda_available"] is False
    assert report["environment"]["CUDA_VISIBLE_DEVICES"] == ""
    assert report["environment"]["distributed"] == {"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "29500"}
    assert report["environment"]["slurm"] == {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "2"}
    assert report["ports"]["29500_free"] is False
    assert report["mmfix"]["status"]["patches"]["torch_load"]["state"] == "active"
    assert report["mmfix"]["status"]["patches"]["cpu_distributed"]["state"] == "active"
    assert any("resume fails without mmfix" in p for p in report["known_problems"])
    assert "port 29500 (torchrun's default master port): IN USE" in text
    assert "MMFIX_MMAP=1" in text and "## Known problems" in text


@pytest.mark.parametrize(
    "versions,needle",
    [
        ({"torch": "2.5.1", "mmengine": "0.10.7"}, None),
        ({"torch": "2.6.0", "mmengine": "0.10.8"}, None),
        ({"torch": "2.6.0", "mmengine": "0.10.4"}, "resume fails"),
        ({"torch": "2.1.0", "mmengine": "0.10.3", "mmdet": "3.3.0", "mmcv": "1.7.2"}, "asserts mmcv"),
        # mmcv 2.2 is accepted under mmfix (the mmcv_bound patch): not a known problem any more.
        ({"torch": "2.6.0", "mmengine": "0.10.8", "mmdet": "3.3.0", "mmcv": "2.2.0"}, None),
    ],
)
def test_known_bad_combinations(versions: dict, needle: str | None) -> None:
    from mmfix._doctor import known_problems

    problems = known_problems(versions, cuda_available=True)
    if needle is None:
        assert problems == []
    else:
        assert any(needle in p for p in problems)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("destroyed_by_script", "switched_off", "expected"),
    [(False, False, "False"), (True, False, "False"), (False, True, "True")],
    ids=["mmfix-destroys", "script-destroys", "disable-restores-stock-exit"],
)
def test_the_gloo_group_is_destroyed_before_interpreter_teardown(
    tmp_path: Path, destroyed_by_script: bool, switched_off: bool, expected: str
) -> None:
    # Left to interpreter finalisation, gloo's worker threads abort a finished CPU run ("terminate called
    # without an active exception", SIGABRT) in about a third of two-rank runs on this machine, and
    # torchrun then reports the run as failed. MMEngine never destroys the group, so mmfix does at exit.
    # An atexit handler registered before mmfix's runs after it (LIFO): it sees what finalisation will.
    seen = tmp_path / "seen.txt"
    code = f"""
        import atexit
        import torch.distributed as dist

        atexit.register(lambda: open({str(seen)!r}, "w").write(str(dist.is_initialized())))
        import mmfix
        from mmengine.dist import init_dist, all_gather_object

        init_dist("pytorch")  # nccl in MMEngine's default: a CPU run becomes gloo
        assert dist.get_backend() == "gloo"
        all_gather_object({{"rank": dist.get_rank()}})
        if {destroyed_by_script}:
            dist.destroy_process_group()  # a script that cleans up itself is left alone
        if {switched_off}:
            mmfix.disable()  # switched off: the exit is stock again (the group is left as MMEngine leaves it)
    """
    env = clean_env(
        CUDA_VISIBLE_DEVICES="",
        RANK="0",
        LOCAL_RANK="0",
        WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(_free_port()),
    )
    proc = run_python(code, env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seen.read_text() == expected
    assert "Traceback" not in proc.stderr
