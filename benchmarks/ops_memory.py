"""Peak memory of mmfix's PyTorch ops against mmcv's compiled kernels, per op, in the same run.

    python benchmarks/ops_memory.py [--family roi_align ...] [--threads N]

The cases are benchmarks/op_cases/ (the sizes MMDetection runs: FPN levels of a batch of two
1333x800 images, 256 channels, 512-1000 RoIs, DCN and CARAFE on those feature maps, Deformable
DETR's attention …). For each case and extension: its inputs are built, the process's peak
resident memory is reset (``/proc/self/clear_refs``), the op runs once, and the peak above the
resident memory just before it is what the op used (its outputs, its temporaries). Printed in
MiB for each extension beside the size of the case's inputs (compiled mmcv's kernels mostly
write into outputs the caller allocated, so theirs is often 0), and mmfix's peak as a multiple
of the inputs: the bound that matters is that it grows with the inputs, not with RoIs x
channels x sampling points.

So that freed memory goes back to the system at once (and the peak is the op's, not what glibc
kept from earlier cases), the script runs itself with ``MALLOC_MMAP_THRESHOLD_`` set: every
allocation over 128 KiB is a mapping of its own. Linux only.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
MIB = 1 << 20


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _rss() -> int:
    return _status_kib("VmRSS") * 1024


def _peak_of(run: Callable[[], Any]) -> int:
    """Bytes of resident memory ``run`` adds at its peak."""
    gc.collect()
    before = _rss()
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets VmHWM to the current VmRSS
    result = run()
    peak = _status_kib("VmHWM") * 1024
    del result
    return max(peak - before, 0)


def _measure(make: Callable[[Any], Callable[[], Any]], ext: Any) -> tuple[int, int]:
    """(inputs, peak of one call) in bytes; RuntimeError where ``ext`` has no kernel for the case."""
    gc.collect()
    before = _rss()
    run = make(ext)
    inputs = max(_rss() - before, 0)
    run()  # warm-up: one-time allocations (thread pools, kernels' caches) are not the op's
    return inputs, _peak_of(run)


def main() -> None:
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") is None:
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(128 * 1024))
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", help="only these op families (module names)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import op_cases

    from mmfix._ops import _ext
    from ops_support import compiled_ext_or_none

    mmfix_ext = _ext.build()
    compiled = compiled_ext_or_none("peaks")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; peak resident memory of one call, MiB")
    print(f"{'case':60} {'inputs':>8} {'compiled':>9} {'mmfix':>8} {'mmfix/inputs':>13}")
    for family, module in op_cases.families(args.family):
        for label, make in module.cases():
            theirs = "(none)"
            if compiled is not None:
                try:
                    theirs = f"{_measure(make, compiled)[1] / MIB:.1f}"
                except RuntimeError:  # compiled mmcv has no CPU kernel for some ops
                    pass
            inputs, mine = _measure(make, mmfix_ext)
            ratio = f"{mine / inputs:13.2f}" if inputs >= MIB else f"{'-':>13}"
            print(f"{family + ': ' + label:60} {inputs / MIB:8.1f} {theirs:>9} {mine / MIB:8.1f} {ratio}", flush=True)
    print("(none): compiled mmcv has no CPU kernel for the op; mmfix/inputs: '-' for inputs under 1 MiB")


if __name__ == "__main__":
    main()
