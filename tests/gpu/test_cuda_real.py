"""The device checks that need a real GPU; skipped on machines without CUDA.

Run them where a GPU is available: `python -m pytest -q tests/gpu`.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import CONFIG, REPO, TRAIN, clean_env, run

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")


def _nproc() -> int:
    return min(2, torch.cuda.device_count())


def _torchrun(script: Path, *args: str, nproc: int | None = None):
    cmd = [
        MMFIX_RUN,
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(nproc or _nproc()),
        str(script),
        *args,
    ]
    return run(cmd, env=clean_env(), timeout=600, check=True)


def _results(stdout: str) -> list[dict]:
    return [json.loads(line[7:]) for line in stdout.splitlines() if line.startswith("RESULT ")]


def test_allocations_at_import_and_map_location_cuda_land_on_the_local_rank(tmp_path: Path) -> None:
    ckpt = tmp_path / "on_gpu0.pth"
    torch.save({"w": torch.ones(1024, device="cuda:0")}, ckpt)
    script = tmp_path / "worker.py"
    script.write_text(
        textwrap.dedent(f"""
        import json, os, torch
        early = torch.zeros(1, device="cuda")          # user code at import time
        loaded = torch.load({str(ckpt)!r}, map_location="cuda")
        print("RESULT " + json.dumps({{"local_rank": int(os.environ["LOCAL_RANK"]),
                                       "early": early.device.index, "loaded": loaded["w"].device.index,
                                       "current": torch.cuda.current_device()}}), flush=True)
    """)
    )
    for r in _results(_torchrun(script).stdout):
        assert r["early"] == r["loaded"] == r["current"] == r["local_rank"]


def test_default_load_of_a_gpu0_checkpoint_allocates_nothing_on_gpu(tmp_path: Path) -> None:
    ckpt = tmp_path / "on_gpu0.pth"
    torch.save({"w": torch.ones(64, 1024, 1024, device="cuda:0")}, ckpt)  # 256 MiB
    script = tmp_path / "worker.py"
    script.write_text(
        textwrap.dedent(f"""
        import json, torch
        torch.cuda.init()
        before = [torch.cuda.memory_allocated(i) for i in range(torch.cuda.device_count())]
        ckpt = torch.load({str(ckpt)!r})
        after = [torch.cuda.memory_allocated(i) for i in range(torch.cuda.device_count())]
        shared = "memfd:mmfix-checkpoint" in open("/proc/self/maps").read()
        print("RESULT " + json.dumps({{"device": ckpt["w"].device.type, "grew": [a - b for a, b in zip(after, before)],
                                       "shared": shared}}))
    """)
    )
    for r in _results(_torchrun(script).stdout):
        assert r["device"] == "cpu" and all(g == 0 for g in r["grew"])
        # with several ranks on the node they load from one sealed host copy (issue 14)
        assert r["shared"] is (_nproc() > 1)


def test_example_trains_with_nccl_on_gpus(tmp_path: Path) -> None:
    cmd = [
        MMFIX_RUN,
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(_nproc()),
        str(TRAIN),
        str(CONFIG),
        "--launcher",
        "pytorch",
        "--work-dir",
        str(tmp_path),
        "--cfg-options",
        "train_cfg.max_epochs=1",
    ]
    proc = run(cmd, env=clean_env(PYTHONPATH=str(REPO / "tests")), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "epoch_1.pth").exists()
