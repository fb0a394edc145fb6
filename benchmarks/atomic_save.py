"""Save time of a 100 MB checkpoint with and without mmfix's atomic writes, same run.

    python benchmarks/atomic_save.py [--mb 100] [--repeat 9] [--dir PATH]

Both go through MMEngine's own save_checkpoint (serialise to memory, then
LocalBackend.put): stock writes the final name in place; mmfix writes a
temporary file, fsyncs it, renames it and fsyncs the folder. Runs alternate;
the median ratio is printed (target <= 1.10 on local disk, fsync included).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--dir", default=None, help="folder on the disk to measure (default: a temp folder)")
    args = parser.parse_args()
    os.environ.pop("MMFIX_DISABLE", None)
    import torch
    from mmengine.runner import checkpoint as mm_checkpoint

    import mmfix
    from mmfix._patches import atomic_save

    checkpoint = {"state_dict": {"w": torch.randn(args.mb * 2**20 // 4)}}
    stock_t, atomic_t = [], []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for i in range(args.repeat):
            mmfix.disable(["atomic_save"])
            # Neither side may pay for the other's dirty pages: an fsync on ext4 commits
            # the journal, which in data=ordered mode writes out other files' data too.
            os.sync()
            start = time.perf_counter()
            # looked up each time: disable()/enable() install a new wrapper object
            mm_checkpoint.save_checkpoint(checkpoint, os.path.join(tmp, f"stock_{i}.pth"))
            stock_t.append(time.perf_counter() - start)
            mmfix.enable(["atomic_save"])
            assert atomic_save._swaps, "atomic_save is not active"
            os.sync()
            start = time.perf_counter()
            mm_checkpoint.save_checkpoint(checkpoint, os.path.join(tmp, f"atomic_{i}.pth"))
            atomic_t.append(time.perf_counter() - start)
            for name in (f"stock_{i}.pth", f"atomic_{i}.pth"):
                os.remove(os.path.join(tmp, name))
    s, a = statistics.median(stock_t), statistics.median(atomic_t)
    print(
        f"save {args.mb} MB: stock {s * 1000:.0f} ms, atomic (fsync + rename) {a * 1000:.0f} ms, "
        f"median ratio {a / s:.3f} (target <= 1.10)"
    )


if __name__ == "__main__":
    main()
