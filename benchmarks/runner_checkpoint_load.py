"""Loading an MMEngine Runner checkpoint (numpy arrays, HistoryBuffers) with mmfix vs stock.

    python benchmarks/runner_checkpoint_load.py [--model-mb 200] [--buffers 200] [--repeat 15]

A checkpoint shaped like ``Runner.save_checkpoint``'s (a state dict, SGD momentum state
of the same size, a message hub of HistoryBuffers holding numpy arrays, numpy scalars
in runtime_info) is loaded, page cache warm, interleaved, through:

* mmfix: ``torch.load(path)`` (weights_only=True, numpy through validating stand-ins);
* stock, unsafe: ``torch.load(path, weights_only=False)`` (what MMEngine's main branch does);
* stock, allowlisted: weights_only=True with numpy's real dtype/ndarray and HistoryBuffer
  allowlisted (the commonly advised way, which exposes dtype.__setstate__).

It prints each median and the median of the paired ratios mmfix / stock (goal <= 1.02).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def make_checkpoint(path: str, model_mb: int, buffers: int) -> None:
    import numpy as np
    import torch
    from mmengine.logging.history_buffer import HistoryBuffer

    n = model_mb * 1024 * 1024 // 4 // 100
    state = {f"layer{i}.weight": torch.randn(n) for i in range(100)}
    hub = {}
    for i in range(buffers):
        hb = HistoryBuffer()
        for v in np.random.rand(1000):
            hb.update(float(v))
        hub[f"train/loss{i}"] = hb
    torch.save(
        {
            "meta": {"epoch": 3, "iter": 3000, "seed": 0},
            "state_dict": state,
            "optimizer": {
                "state": {i: {"momentum_buffer": t.clone()} for i, t in enumerate(state.values())},
                "param_groups": [{"lr": 0.02, "momentum": 0.9, "params": list(range(len(state)))}],
            },
            "message_hub": {
                "log_scalars": hub,
                "runtime_info": {"eta": np.float64(12.5), "iter": np.int64(3000)},
                "resumed_keys": {},
            },
        },
        path,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-mb", type=int, default=200)
    parser.add_argument("--buffers", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    os.environ.pop("MMFIX_DISABLE", None)
    import numpy as np
    import torch
    import torch.serialization as ts
    from mmengine.logging.history_buffer import HistoryBuffer

    import mmfix  # noqa: F401  (patches torch.load in this process)

    patched = torch.load
    stock = patched.__wrapped__
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1
        from numpy.core import multiarray  # type: ignore[no-redef]
    real_numpy = [np.dtype, np.ndarray, multiarray._reconstruct, multiarray.scalar, HistoryBuffer, getattr] + [
        type(np.dtype(c)) for c in "?bBhHiIlLqQefdgFDG"
    ]

    def allowlisted(path: str) -> object:
        with ts.safe_globals(real_numpy):
            return stock(path, map_location="cpu", weights_only=True)

    runs = {
        "mmfix": lambda p: patched(p),
        "stock weights_only=False": lambda p: stock(p, map_location="cpu", weights_only=False),
        "stock, real numpy allowlisted": allowlisted,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "runner.pth")
        make_checkpoint(path, args.model_mb, args.buffers)
        size_mb = os.path.getsize(path) / 2**20
        times: dict[str, list[float]] = {name: [] for name in runs}
        for load in runs.values():
            load(path)  # warm the page cache and lazy imports
        for _ in range(args.repeat):
            for name, load in runs.items():
                start = time.perf_counter()
                load(path)
                times[name].append(time.perf_counter() - start)
        print(f"MMEngine-style checkpoint, {size_mb:.0f} MB, {args.buffers} HistoryBuffers:")
        for name, values in times.items():
            print(f"  {name:32} median {statistics.median(values) * 1000:8.1f} ms")
        for name in list(runs)[1:]:
            ratio = statistics.median(a / b for a, b in zip(times["mmfix"], times[name]))
            print(f"  paired ratio mmfix / {name}: {ratio:.3f} (goal <= 1.02)")


if __name__ == "__main__":
    main()
