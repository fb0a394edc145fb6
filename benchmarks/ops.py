"""Time of mmfix's PyTorch ops against mmcv's compiled kernels, per op, in the same run.

    python benchmarks/ops.py [--family roi_align ...] [--repeat 7] [--threads N]

Each case of ``benchmarks/op_cases/<family>.py`` runs through mmcv 2.1.0's compiled
extension (from the prebuilt wheel, see tests/ops_support.py) and through mmfix's,
alternately; the median time of each and their ratio (mmfix / compiled) are printed.
Where compiled mmcv has no CPU kernel for an op, only mmfix's time is printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]


def _time(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", help="only these op families (module names)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument(
        "--stat",
        choices=["median", "min"],
        default="median",
        help="statistic of the repeats; min is steadier on a machine shared with other work",
    )
    args = parser.parse_args()
    pick = statistics.median if args.stat == "median" else min

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import op_cases

    from mmfix._ops import _ext
    from ops_support import compiled_ext_or_none

    mmfix_ext = _ext.build()
    compiled = compiled_ext_or_none("times")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.stat} of {args.repeat}")
    print(f"{'case':60} {'compiled ms':>12} {'mmfix ms':>10} {'ratio':>7}")
    for family, module in op_cases.families(args.family):
        for label, make in module.cases():
            mine = make(mmfix_ext)
            theirs = None
            if compiled is not None:
                try:
                    theirs = make(compiled)
                    theirs()  # compiled mmcv has no CPU kernel for some ops
                except RuntimeError:
                    theirs = None
            mine()  # warm-up
            times_mine, times_theirs = [], []
            for _ in range(args.repeat):
                times_mine.append(_time(mine))
                if theirs is not None:
                    times_theirs.append(_time(theirs))
            m = pick(times_mine) * 1e3
            if theirs is None:
                print(f"{family + ': ' + label:60} {'(no CPU kernel)':>12} {m:10.2f} {'':>7}")
            else:
                t = pick(times_theirs) * 1e3
                print(f"{family + ': ' + label:60} {t:12.2f} {m:10.2f} {m / t:7.2f}")


if __name__ == "__main__":
    main()
