"""Peak GPU memory of resuming a large checkpoint that was saved from cuda:0, stock vs mmfix.

    python benchmarks/gpu_resume_memory.py [--gib 2]

A "resume" here is what MMEngine does: load the checkpoint, then load_state_dict
into a model that already lives on the GPU. Stock torch restores every storage
onto cuda:0 first (model + a second copy); mmfix maps to CPU, so the GPU only
ever holds the model. A third variant runs mmfix as one rank of a two-rank node
(LOCAL_WORLD_SIZE=2 with no peer coming), so the load goes through the sealed
shared host copy that distributed workers use by default. Each variant runs in a
fresh process; the ratios are printed. Needs a CUDA device (exits with a message
otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

WORKER = r"""
import json, sys, torch
if sys.argv[2] == "mmfix":
    import mmfix
n, path = int(sys.argv[3]), sys.argv[1]
model = torch.nn.ParameterList([torch.nn.Parameter(torch.empty(n, device="cuda")) for _ in range(8)])
torch.cuda.reset_peak_memory_stats()
base = torch.cuda.memory_allocated()
state = torch.load(path)
model.load_state_dict(state)
del state
torch.cuda.synchronize()
print(json.dumps({"peak_extra": torch.cuda.max_memory_allocated() - base, "model": base}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs a GPU (run it where one is available)")
        return
    n = int(args.gib * 2**30 / 4 / 8)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.pth")
        torch.save({str(i): torch.randn(n, device="cuda:0") for i in range(8)}, path)
        torch.cuda.empty_cache()
        results = {}
        for variant in ("stock", "mmfix", "mmfix-rank"):
            env = {k: v for k, v in os.environ.items() if not k.startswith("MMFIX_")}
            if variant == "stock":
                env["MMFIX_DISABLE"] = "1"
            if variant == "mmfix-rank":  # a lone rank of a 2-rank node: leads the shared load
                env.update(LOCAL_RANK="0", RANK="0", LOCAL_WORLD_SIZE="2", WORLD_SIZE="2", MMFIX_SHARED_LOAD_WAIT="1")
            out = subprocess.run(
                [sys.executable, "-c", WORKER, path, variant.split("-")[0], str(n)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            results[variant] = json.loads(out.strip().splitlines()[-1])
    stock, fixed = results["stock"], results["mmfix"]
    model = stock["model"]
    print(f"checkpoint {args.gib:.1f} GiB saved on cuda:0; model {model / 2**30:.2f} GiB on the GPU")
    print(
        f"peak extra GPU memory while resuming: stock {stock['peak_extra'] / 2**30:.2f} GiB, "
        f"mmfix {fixed['peak_extra'] / 2**30:.2f} GiB"
    )
    total_stock = model + stock["peak_extra"]
    total_fixed = model + fixed["peak_extra"]
    print(f"peak GPU memory (model + extra), mmfix / stock: {total_fixed / total_stock:.3f}")
    shared = results["mmfix-rank"]
    print(
        f"as a rank loading through the shared host copy: extra {shared['peak_extra'] / 2**30:.2f} GiB, "
        f"mmfix / stock {(model + shared['peak_extra']) / total_stock:.3f}"
    )


if __name__ == "__main__":
    main()
