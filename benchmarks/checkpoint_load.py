"""Checkpoint loading with mmfix vs stock torch, measured in the same run.

    python benchmarks/checkpoint_load.py [--load-mb 200] [--mmap-mb 256] [--repeat 15] [--tensors 50]

1. Load time of a --load-mb checkpoint through the patched torch.load vs the
   original function object in one plain (non-distributed) process, interleaved,
   page cache warm: median of the paired ratios (goal <= 1.02).
2. Summed PSS growth (/proc/PID/smaps_rollup) of 4 processes that each load and
   hold the same --mmap-mb checkpoint at the same time, with a torchrun-style
   environment (LOCAL_RANK, RANK, LOCAL_WORLD_SIZE=4, WORLD_SIZE=4), as a ratio to
   the file size: stock torch, mmfix with default settings (the ranks share one sealed
   copy), MMFIX_MMAP=1 (the file itself mapped) and MMFIX_MMAP=0 (plain reads).
   Goal for the default: <= 1.1 (must be <= 1.25; stock holds one copy per process,
   ~4.0). The growth of the node's Shmem (/proc/meminfo) is printed next to it, so
   shared memory that no process maps could not hide from the figure, and the
   slowest rank's load time. --tensors sets how many tensors the checkpoints hold (a real
   training checkpoint has thousands: each rank then also reads the zip directory and the
   pickle to check that a mapped load reads what a plain load reads).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import os, sys, torch, mmfix
def pss_kb():
    with open("/proc/self/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1])
import time
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
ckpt = torch.load(sys.argv[1])
took = time.perf_counter() - start
total = sum(float(t.sum()) for t in ckpt.values())  # touch every page
print(f"loaded {took}", flush=True)
sys.stdin.readline()
"""

VARIANTS = {  # label -> environment
    "stock": {"MMFIX_DISABLE": "1"},
    "mmfix default": {},
    "MMFIX_MMAP=1": {"MMFIX_MMAP": "1"},
    "MMFIX_MMAP=0": {"MMFIX_MMAP": "0"},
}


def make_checkpoint(path: str, megabytes: int, tensors: int = 50) -> None:
    import torch

    n = megabytes * 1024 * 1024 // 4 // tensors
    torch.save({f"layer{i}.weight": torch.randn(n) for i in range(tensors)}, path)


def pss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise RuntimeError("no Pss line")


def shmem_kb() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    return 0


def summed_pss_growth(path: str, variant: dict[str, str], job: int, processes: int = 4) -> tuple[float, float, float]:
    """(summed PSS growth / file size, node Shmem growth / file size, slowest load in s)."""
    children = []
    for rank in range(processes):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MMFIX_", "TORCHELASTIC_"))}
        env.update(variant)
        # what torchrun gives its workers (one fresh job per variant)
        env.update(
            LOCAL_RANK=str(rank),
            RANK=str(rank),
            LOCAL_WORLD_SIZE=str(processes),
            WORLD_SIZE=str(processes),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(29600 + job),
            TORCHELASTIC_RUN_ID=f"bench-{os.getpid()}-{job}",
        )
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", CHILD, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            )
        )
    try:
        for child in children:
            assert child.stdout.readline().strip() == "ready"
        before = sum(pss_kb(c.pid) for c in children)
        shm_before = shmem_kb()
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        took = []
        for child in children:
            word, seconds = child.stdout.readline().split()
            assert word == "loaded"
            took.append(float(seconds))
        after = sum(pss_kb(c.pid) for c in children)
        shm_after = shmem_kb()
    finally:
        for child in children:
            try:
                child.stdin.write("exit\n")
                child.stdin.close()
            except BrokenPipeError:
                pass
            child.wait(timeout=60)
    size = os.path.getsize(path)
    return (after - before) * 1024 / size, (shm_after - shm_before) * 1024 / size, max(took)


def load_time_ratio(path: str, repeat: int) -> tuple[float, float, float]:
    os.environ.pop("MMFIX_DISABLE", None)
    import torch

    import mmfix  # noqa: F401  (patches torch.load in this process)

    patched = torch.load
    stock = patched.__wrapped__
    stock(path, map_location="cpu")  # warm the page cache
    t_stock, t_patched = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        stock(path, map_location="cpu")  # stock needs an explicit CPU mapping to be comparable
        t_stock.append(time.perf_counter() - start)
        start = time.perf_counter()
        patched(path)
        t_patched.append(time.perf_counter() - start)
    s, p = statistics.median(t_stock), statistics.median(t_patched)
    # median of the paired ratios: each pair ran back to back, so drift cancels
    return s, p, statistics.median(b / a for a, b in zip(t_stock, t_patched))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-mb", type=int, default=200)
    parser.add_argument("--mmap-mb", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--tensors", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "load.pth")
        make_checkpoint(small, args.load_mb, args.tensors)
        s, p, ratio = load_time_ratio(small, args.repeat)
        print(
            f"load {args.load_mb} MB: stock {s * 1000:.1f} ms, mmfix {p * 1000:.1f} ms, "
            f"median ratio {ratio:.3f} (goal <= 1.02)"
        )
        os.remove(small)
        big = os.path.join(tmp, "mmap.pth")
        make_checkpoint(big, args.mmap_mb, args.tensors)
        print(
            f"4 ranks (LOCAL_WORLD_SIZE=4) each loading and holding one {args.mmap_mb} MB checkpoint "
            f"({args.tensors} tensors) at once; "
            "summed PSS growth / file size (node Shmem growth / file size, slowest rank's load):"
        )
        for job, (label, variant) in enumerate(VARIANTS.items()):
            pss, shm, took = summed_pss_growth(big, variant, job)
            goal = "  (goal <= 1.1, must <= 1.25)" if label == "mmfix default" else ""
            print(f"  {label:14s} {pss:5.2f}x   (Shmem {shm:+5.2f}x, {took * 1000:6.0f} ms){goal}")


if __name__ == "__main__":
    main()
