"""Checkpoint loading with mmfix vs stock torch, measured in the same run.

    python benchmarks/checkpoint_load.py [--load-mb 200] [--mmap-mb 500] [--repeat 9]

1. Load time of a --load-mb checkpoint through the patched torch.load vs the
   original function object, interleaved, page cache warm: median of the paired ratios
   (goal <= 1.02).
2. Summed PSS growth (/proc/PID/smaps_rollup) of 4 processes holding the same
   --mmap-mb checkpoint, without and with MMFIX_MMAP=1, as a ratio to the file
   size (goal with mmap <= 1.25; without it each process holds its own copy, ~4.0).
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
print("ready", flush=True)
sys.stdin.readline()
ckpt = torch.load(sys.argv[1])
total = sum(float(t.sum()) for t in ckpt.values())  # touch every page
print("loaded", flush=True)
sys.stdin.readline()
"""


def make_checkpoint(path: str, megabytes: int) -> None:
    import torch

    n = megabytes * 1024 * 1024 // 4 // 50
    torch.save({f"layer{i}.weight": torch.randn(n) for i in range(50)}, path)


def pss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise RuntimeError("no Pss line")


def summed_pss_growth(path: str, mmap: bool, processes: int = 4) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMFIX_")}
    env["MMFIX_MMAP"] = "1" if mmap else "0"
    children = [subprocess.Popen([sys.executable, "-c", CHILD, path], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, env=env) for _ in range(processes)]
    try:
        for child in children:
            assert child.stdout.readline().strip() == "ready"
        before = sum(pss_kb(c.pid) for c in children)
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:
            assert child.stdout.readline().strip() == "loaded"
        after = sum(pss_kb(c.pid) for c in children)
    finally:
        for child in children:
            try:
                child.stdin.write("exit\n")
                child.stdin.close()
            except BrokenPipeError:
                pass
            child.wait(timeout=60)
    return (after - before) * 1024 / os.path.getsize(path)


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
    parser.add_argument("--mmap-mb", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "load.pth")
        make_checkpoint(small, args.load_mb)
        s, p, ratio = load_time_ratio(small, args.repeat)
        print(f"load {args.load_mb} MB: stock {s * 1000:.1f} ms, mmfix {p * 1000:.1f} ms, "
              f"median ratio {ratio:.3f} (goal <= 1.02)")
        os.remove(small)
        big = os.path.join(tmp, "mmap.pth")
        make_checkpoint(big, args.mmap_mb)
        without = summed_pss_growth(big, mmap=False)
        with_mmap = summed_pss_growth(big, mmap=True)
        print(f"4 processes holding one {args.mmap_mb} MB checkpoint, summed PSS growth / file size: "
              f"without mmap {without:.2f}x, with MMFIX_MMAP=1 {with_mmap:.2f}x (goal <= 1.25)")


if __name__ == "__main__":
    main()
