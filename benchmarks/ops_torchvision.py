"""Time of torchvision's CPU kernels against mmfix's own PyTorch code, for the ops where both
compute what mmcv computes (nms; roi_align's average pooling), in the same run.

    PYTHONPATH=. python benchmarks/ops_torchvision.py [--family nms ...] [--repeat 5] [--threads N]

Needs a torch with a torchvision that loads (e.g. /work/venvs/tv). Each case of
``benchmarks/op_cases/<family>.py`` runs through mmfix's extension with torchvision's kernel
switched in and out (``mmfix._ops._torchvision.FAST_PATHS``), alternately; the ratio is
torchvision / mmfix's own code. It decides which CPU fast paths FAST_PATHS lists.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

#: op family -> the op name FAST_PATHS uses
FAMILIES = {"nms": "nms", "roi_align": "roi_align"}


def _time(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", help="only these op families")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from mmfix._ops import _ext, _torchvision

    if _torchvision.ops() is None:
        sys.exit("torchvision's kernels do not load with this torch: nothing to compare")
    ext = _ext.build()
    saved = _torchvision.FAST_PATHS
    print(f"torch {torch.__version__}, torchvision {_torchvision.ops().__name__}, {torch.get_num_threads()} threads")
    print(f"{'case':64} {'mmfix ms':>9} {'tv ms':>9} {'tv/mmfix':>9}")
    try:
        for family, op in FAMILIES.items():
            if args.family and family not in args.family:
                continue
            module = importlib.import_module(f"op_cases.{family}")
            for label, make in module.cases():
                run = make(ext)
                with_tv = saved | {(op, "cpu")}
                without = frozenset(p for p in saved if p != (op, "cpu"))
                times: dict[str, list[float]] = {"tv": [], "own": []}
                for paths in (with_tv, without):
                    _torchvision.FAST_PATHS = paths
                    run()  # warm-up
                for _ in range(args.repeat):
                    for paths, key in ((with_tv, "tv"), (without, "own")):
                        _torchvision.FAST_PATHS = paths
                        times[key].append(_time(run))
                own = statistics.median(times["own"]) * 1e3
                tv = statistics.median(times["tv"]) * 1e3
                print(f"{family + ': ' + label:64} {own:9.2f} {tv:9.2f} {tv / own:9.2f}")
    finally:
        _torchvision.FAST_PATHS = saved


if __name__ == "__main__":
    main()
