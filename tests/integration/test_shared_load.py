"""The ranks of a node share one sealed copy of a checkpoint, and nothing loaded depends on the
file any more: real torchrun runs (gloo, CPU) with a real MMEngine Runner."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import REPO, TRAIN, clean_env, run, run_python

# torchrun runs; `alone`: the ranks of a node share one copy when they load at about the same
# time, which two cores shared with other test processes do not give (the README's test command
# runs these after the parallel part, by themselves).
pytestmark = [pytest.mark.slow, pytest.mark.alone]

DDP_CONFIG = REPO / "tests" / "configs" / "toy_ddp.py"
MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")


def torchrun(*cmd: str, nproc: int = 2, **env: str):
    full = [
        MMFIX_RUN,
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(nproc),
        *cmd,
    ]
    proc = run(full, env=clean_env(PYTHONPATH=str(REPO / "tests"), CUDA_VISIBLE_DEVICES="", **env), timeout=300)
    return proc, proc.stdout + proc.stderr


def train(work_dir: Path, *extra: str, **env: str):
    return torchrun(str(TRAIN), str(DDP_CONFIG), "--launcher", "pytorch", "--work-dir", str(work_dir), *extra, **env)


@pytest.fixture(scope="module")
def resume_point(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """epoch_1.pth of a real 2-rank run (SGD with momentum: it holds optimizer state)."""
    work = tmp_path_factory.mktemp("first_epoch")
    proc, log = train(work, "--cfg-options", "train_cfg.max_epochs=1")
    assert proc.returncode == 0, log[-3000:]
    return work / "epoch_1.pth"


def resumed(resume_point: Path, work: Path, disturb: str = "", **env: str) -> tuple[int, str, list[dict]]:
    """Resume from a copy of epoch 1 and train to epoch 3; DISTURB schedules what happens to
    that copy during the run (see tests/ddp_probe.py)."""
    work.mkdir(parents=True)
    start = work / "resume_from.pth"
    shutil.copy(resume_point, start)
    proc, log = train(
        work,
        "--resume",
        str(start),
        "--cfg-options",
        "train_cfg.max_epochs=3",
        DISTURB_CKPT=str(start),
        DISTURB=disturb,
        **env,
    )
    probes = [torch.load(work / f"probe_rank{r}.pth") for r in (0, 1)] if proc.returncode == 0 else []
    return proc.returncode, log, probes


@pytest.fixture(scope="module")
def undisturbed(resume_point: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The reference: plain reads (MMFIX_MMAP=0), checkpoint left alone."""
    code, log, probes = resumed(resume_point, tmp_path_factory.mktemp("ref") / "work", MMFIX_MMAP="0")
    assert code == 0, log[-3000:]
    assert "resumed epoch: 1" in log
    assert all(p["backing"]["tensors"] > 0 and not p["backing"]["memfd"] for p in probes)
    return probes


def same_weights(a: list[dict], b: list[dict]) -> bool:
    return all(torch.equal(x["state"][k], y["state"][k]) for x, y in zip(a, b) for k in x["state"])


@pytest.mark.parametrize(
    "disturb",
    [
        "rewrite@0,truncate@2,delete@4",  # all three, one after the other, mid-training
        "truncate@0",  # right after the resume, before any loaded tensor was touched
        "delete@0,replace@3",  # deleted, then a later save of the run under the same name
    ],
)
def test_resumed_run_survives_rewrite_truncate_delete(
    resume_point: Path, undisturbed: list[dict], tmp_path: Path, disturb: str
) -> None:
    code, log, probes = resumed(resume_point, tmp_path / "work", disturb)
    assert code == 0, log[-4000:]
    assert "resumed epoch: 1" in log
    assert "the ranks of this node load" in log and "from one sealed in-memory copy" in log
    assert probes[0]["backing"]["segment"] == probes[1]["backing"]["segment"] != 0  # one copy for both
    for probe in probes:
        # SGD momentum of CPU parameters stays as loaded (moving it to the parameter's device is a
        # no-op): it lives in mmfix's sealed segment, not in a mapping of the checkpoint file
        assert probe["backing"]["tensors"] > 0
        assert probe["backing"]["memfd"] and not probe["backing"]["file"], probe["backing"]
        assert probe["steps"] == 8  # epochs 2 and 3, 4 iterations each per rank
    assert same_weights(probes, undisturbed), "the disturbed run ended with other weights"


def test_mapping_the_file_itself_is_what_these_tests_catch(
    resume_point: Path, undisturbed: list[dict], tmp_path: Path
) -> None:
    """The control: with MMFIX_MMAP=1 the optimizer state stays backed by the file, and the same
    disturbance kills the run (SIGBUS) or changes its result."""
    code, log, probes = resumed(resume_point, tmp_path / "rewritten", "rewrite@0", MMFIX_MMAP="1")
    assert code != 0 or not same_weights(probes, undisturbed)
    if probes:
        assert all(p["backing"]["file"] for p in probes)
    code, log, _ = resumed(resume_point, tmp_path / "truncated", "truncate@0", MMFIX_MMAP="1")
    assert code != 0 and "SIGBUS" in log, log[-3000:]


# --- plain torch.load in distributed workers --------------------------------------------------

WORKER = """
import io, json, os, sys, time, torch, mmfix
import torch.distributed as dist
dist.init_process_group("gloo")
path = sys.argv[1]
kind = sys.argv[2]
if kind == "unmappable":
    # No filesystem here refuses mmap (FUSE needs a server this machine lacks), so the refusal
    # such a filesystem gives (ENODEV) is simulated at Python's mmap call, the probe mmfix makes
    # before it lets torch map anything: here every mapping fails, the file and the shared
    # segment alike.
    import errno, mmap
    real = mmap.mmap
    def refusing(fd, *a, **k):
        raise OSError(errno.ENODEV, "No such device")
    mmap.mmap = refusing
source = io.BytesIO(open(path, "rb").read()) if kind == "buffer" else path
if kind == "mmengine":  # what load_checkpoint / load_from / Runner.resume call
    from mmengine.runner.checkpoint import _load_checkpoint
    ckpt = _load_checkpoint(source)
else:
    ckpt = torch.load(source)
maps = open("/proc/self/maps").read()
before = {k: v.clone() for k, v in ckpt.items()}
dist.barrier()
if int(os.environ["LOCAL_RANK"]) == 0 and kind in ("zip", "legacy", "mmengine"):
    with open(path, "r+b") as fh:
        fh.write(os.urandom(os.path.getsize(path)))
    os.truncate(path, 100)
    os.remove(path)
dist.barrier()
same = all(torch.equal(before[k], v) for k, v in ckpt.items())
segments = {line.split()[4] for line in maps.splitlines() if "memfd:mmfix-checkpoint" in line}
result = {"rank": dist.get_rank(), "shared": "memfd:mmfix-checkpoint" in maps, "segments": sorted(segments),
          "file_mapped": os.path.realpath(path) in maps, "same": same,
          "sum": float(sum(v.double().sum() for v in ckpt.values()))}
with open(os.path.join(sys.argv[3], f"result{dist.get_rank()}.json"), "w") as fh:
    json.dump(result, fh)
dist.destroy_process_group()
"""


def workers(tmp_path: Path, path: Path, kind: str, nproc: int = 3, **env: str) -> tuple[list[dict], str]:
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    out = tmp_path / f"results_{kind}_{len(list(tmp_path.glob('results_*')))}"
    out.mkdir()
    proc, log = torchrun(str(script), str(path), kind, str(out), nproc=nproc, **env)
    assert proc.returncode == 0, log[-3000:]
    results = [json.loads((out / f"result{r}.json").read_text()) for r in range(nproc)]
    return results, log


def save(path: Path, legacy: bool = False) -> float:
    tensors = {f"w{i}": torch.randn(50_000) for i in range(4)}
    torch.save(tensors, path, _use_new_zipfile_serialization=not legacy)
    return float(sum(v.double().sum() for v in tensors.values()))


def test_plain_torch_load_in_workers_shares_and_survives_the_file_changing(tmp_path: Path) -> None:
    total = save(tmp_path / "w.pth")
    results, log = workers(tmp_path, tmp_path / "w.pth", "zip")
    assert all(r["shared"] and not r["file_mapped"] and r["same"] for r in results), results
    assert len({tuple(r["segments"]) for r in results}) == 1 and len(results[0]["segments"]) == 1  # one copy
    assert all(r["sum"] == pytest.approx(total, abs=1e-6) for r in results)
    assert log.count("from one sealed in-memory copy") == 1  # said once, by rank 0
    total = save(tmp_path / "w.pth")
    results, log = workers(tmp_path, tmp_path / "w.pth", "mmengine", nproc=2)
    assert all(r["shared"] and not r["file_mapped"] and r["same"] for r in results), results
    assert all(r["sum"] == pytest.approx(total, abs=1e-6) for r in results)


def test_legacy_format_falls_back_to_plain_reads(tmp_path: Path) -> None:
    total = save(tmp_path / "legacy.pth", legacy=True)
    results, log = workers(tmp_path, tmp_path / "legacy.pth", "legacy")
    assert all(not r["shared"] and not r["file_mapped"] and r["same"] for r in results), results
    assert all(r["sum"] == pytest.approx(total, abs=1e-6) for r in results)
    assert "legacy (pre-1.6, non-zip) format, which cannot be mapped: each rank reads its own copy" in log


def test_unmappable_filesystem_and_buffers_fall_back_to_plain_reads(tmp_path: Path) -> None:
    total = save(tmp_path / "w.pth")
    for kind in ("unmappable", "buffer"):
        results, log = workers(tmp_path, tmp_path / "w.pth", kind, nproc=2)
        assert all(
            not r["shared"] and not r["file_mapped"] and r["sum"] == pytest.approx(total, abs=1e-6) for r in results
        ), (kind, results)
        assert ("cannot be mapped here" in log and "mmfix reads it the plain way" in log) == (kind == "unmappable")
    # the explicit switch (map the file itself) falls back the same way there
    results, log = workers(tmp_path, tmp_path / "w.pth", "unmappable", nproc=2, MMFIX_MMAP="1")
    assert all(not r["file_mapped"] and r["sum"] == pytest.approx(total, abs=1e-6) for r in results)


def test_switches_single_process_and_other_map_locations_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "w.pth"
    total = save(path)
    results, _ = workers(tmp_path, path, "zip", nproc=2, MMFIX_MMAP="0")  # switched off: plain reads
    assert all(not r["shared"] and not r["file_mapped"] and r["same"] for r in results), results
    path = tmp_path / "again.pth"
    total = save(path)
    code = f"""
import json, mmfix, torch
path = {str(path)!r}
a = torch.load(path)
b = torch.load(path, map_location="meta")
print(json.dumps({{"shared": "memfd:" in open("/proc/self/maps").read(), "meta": b["w0"].device.type,
                   "sum": float(sum(v.double().sum() for v in a.values()))}}))
"""
    single = json.loads(run_python(code).stdout.strip().splitlines()[-1])  # not a distributed worker
    assert single == {"shared": False, "meta": "meta", "sum": pytest.approx(total, abs=1e-6)}
    worker_env = clean_env(LOCAL_RANK="0", RANK="0", LOCAL_WORLD_SIZE="2", WORLD_SIZE="2", MMFIX_SHARED_LOAD_WAIT="1")
    in_worker = json.loads(run_python(code, env=worker_env).stdout.strip().splitlines()[-1])
    assert in_worker == {"shared": True, "meta": "meta", "sum": pytest.approx(total, abs=1e-6)}


def test_a_killed_rank_leaves_no_shared_memory_or_socket_behind(tmp_path: Path) -> None:
    """Nothing is named: a SIGKILLed reader leaves no file in /dev/shm and no socket name; the
    segment itself is freed by the kernel with its last descriptor and mapping."""
    path = tmp_path / "w.pth"
    save(path)
    code = f"""
import os, signal, torch, mmfix
ckpt = torch.load({str(path)!r})  # leads: nobody else comes, so it keeps offering its copy
assert "memfd:mmfix-checkpoint" in open("/proc/self/maps").read()
sockets = [l.split()[-1] for l in open("/proc/net/unix") if "@mmfix-load-" in l]
print(" ".join(sockets), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    shm_before = set(Path("/dev/shm").iterdir())
    proc = run_python(
        code,
        check=False,
        env=clean_env(
            LOCAL_RANK="0", RANK="0", LOCAL_WORLD_SIZE="2", WORLD_SIZE="2", TORCHELASTIC_RUN_ID=f"kill-{tmp_path.name}"
        ),
    )
    names = proc.stdout.split()
    assert proc.returncode == -9 and len(names) == 1, (proc.stdout, proc.stderr[-2000:])
    assert set(Path("/dev/shm").iterdir()) == shm_before
    assert names[0] not in Path("/proc/net/unix").read_text()


IMPOSTOR = """
import json, os, socket, struct, sys, time
from mmfix._checkpoint import shared_load as _shared_load
path, behaviour = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(_shared_load.socket_name(os.stat(path), 1))  # where the rank's first load of it looks
server.listen()
print("ready", flush=True)
conn, _ = server.accept()
if behaviour == "unsealed":  # a writable segment of the right size: its owner could change it later
    fd = os.memfd_create("impostor")
    os.write(fd, open(path, "rb").read())
    conn.sendmsg([struct.pack("!Q", os.path.getsize(path))],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
time.sleep(30)  # "silent": holds the connection and never answers
"""


@pytest.mark.parametrize("behaviour", ["silent", "unsealed"])
def test_a_reader_that_never_answers_or_hands_an_unsealed_copy_is_not_trusted(tmp_path: Path, behaviour: str) -> None:
    path = tmp_path / "w.pth"
    total = save(path)
    worker_env = clean_env(
        LOCAL_RANK="1",
        RANK="1",
        LOCAL_WORLD_SIZE="2",
        WORLD_SIZE="2",
        TORCHELASTIC_RUN_ID=f"impostor-{tmp_path.name}",
        MMFIX_SHARED_LOAD_WAIT="3",
        MMFIX_LOG_LEVEL="INFO",
    )
    impostor = subprocess.Popen(
        [sys.executable, "-c", IMPOSTOR, str(path), behaviour], env=worker_env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert impostor.stdout.readline().strip() == "ready"
        code = f"""
import json, mmfix, torch
ckpt = torch.load({str(path)!r})
print(json.dumps({{"shared": "memfd:" in open("/proc/self/maps").read(),
                   "sum": float(sum(v.double().sum() for v in ckpt.values()))}}))
"""
        proc = run_python(code, env={**worker_env, "RANK": "0"})  # rank 0: its notices are shown
    finally:
        impostor.kill()
        impostor.wait()
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"shared": False, "sum": pytest.approx(total, abs=1e-6)}  # read its own copy, plainly
    if behaviour == "silent":
        assert "did not answer within MMFIX_SHARED_LOAD_WAIT; this rank reads its own copy" in proc.stderr
