"""The MMDetection 3.3.0 zoo on mmfix's ops against mmcv's compiled ops, config by config.

    python benchmarks/zoo_ops.py [--only faster_rcnn mask_rcnn ...] [--timeout 900] [--out results.json]

For every model config of the installed MMDetection (``configs/**``, not ``_base_``), a child
process builds the model (seeded random weights), and runs it twice from the same state and
seeds on a synthetic batch (tests/zoo_support.py): once with mmcv 2.1.0's compiled extension
(from the prebuilt wheel, tests/ops_support.py) and once with mmfix's. Each run predicts and
takes one training step; predictions, losses and gradients are compared. Prints one line per
config and a summary: how many run with equal results, how many differ (and where), and why
the others do not run (a missing package, an op mmfix does not implement, a config that needs
a dataset file at build time …), with the median time ratio mmfix / compiled.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]


def _one(relative: str, cache: str) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    from zoo_support import build_model, differences, mmdet_configs, run_model, synthetic_batch

    from mmfix._ops import _ext
    from ops_support import import_mmcv_ops, load_compiled_ext

    mmfix_ext = _ext.build()
    import_mmcv_ops(mmfix_ext)
    compiled = load_compiled_ext(Path(cache))
    result: dict[str, Any] = {"config": relative}
    try:
        model = build_model(mmdet_configs() / relative)
    except Exception as exc:
        result.update(status="does not build", reason=f"{type(exc).__name__}: {str(exc)[:300]}")
        return result
    state = {k: v.clone() for k, v in model.state_dict().items()}
    batch = synthetic_batch()
    times = {}
    runs = {}
    for label, ext in (("compiled", compiled), ("mmfix", mmfix_ext)):
        start = time.perf_counter()
        try:
            runs[label] = run_model(model, state, ext, batch)
        except Exception as exc:
            tb = traceback.extract_tb(exc.__traceback__)
            where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
            runs[label] = None
            result[f"{label}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]} ({where})"
        times[label] = time.perf_counter() - start
    result["seconds"] = times
    if runs["compiled"] is None and runs["mmfix"] is None:
        result.update(status="fails on both", reason=result["compiled_error"])
    elif runs["mmfix"] is None:
        result.update(status="fails on mmfix only", reason=result["mmfix_error"])
    elif runs["compiled"] is None:
        result.update(status="runs on mmfix only", reason=result["compiled_error"])
    else:
        problems = differences(runs["mmfix"], runs["compiled"])
        result.update(status="equal" if not problems else "differs", problems=problems[:8])
        result["ratio"] = times["mmfix"] / times["compiled"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="config folders (or relative paths) to run")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", help="write every result as JSON here")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    from zoo_support import mmdet_configs, zoo_configs

    root = mmdet_configs()
    configs = [str(p.relative_to(root)) for p in zoo_configs()]
    if args.only:
        configs = [c for c in configs if any(c == o or c.startswith(o.rstrip("/") + "/") for o in args.only)]
    cache = tempfile.mkdtemp(prefix="mmfix-zoo-")
    results = []
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
        pending = [(c, pool.apply_async(_one, (c, cache))) for c in configs]
        for relative, job in pending:
            try:
                result = job.get(timeout=args.timeout)
            except multiprocessing.TimeoutError:
                result = {"config": relative, "status": "timed out", "reason": f"over {args.timeout:.0f} s"}
            except Exception as exc:
                result = {"config": relative, "status": "crashed", "reason": f"{type(exc).__name__}: {exc}"}
            results.append(result)
            extra = result.get("reason") or "; ".join(result.get("problems", [])) or ""
            ratio = f" {result['ratio']:.2f}x" if "ratio" in result else ""
            print(f"{result['status']:>20}{ratio:>7}  {relative}  {extra[:160]}", flush=True)
    counts = collections.Counter(r["status"] for r in results)
    print("\nSummary:", ", ".join(f"{n} {s}" for s, n in counts.most_common()), f"(of {len(results)} configs)")
    reasons = collections.Counter(
        r.get("reason", "").split(" (")[0][:120] for r in results if r["status"] not in ("equal", "differs")
    )
    for reason, n in reasons.most_common(25):
        print(f"  {n:4d}  {reason}")
    ratios = [r["ratio"] for r in results if "ratio" in r]
    if ratios:
        print(f"time mmfix / compiled (predict + train step, small batch): median {statistics.median(ratios):.2f}x")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
