"""MMFIX_MEMORY_REPORT=1: one table of every rank's peak memory at the end of training.

What users now do by watching nvidia-smi: find the rank that holds more than
the others (the classic: every rank loading a checkpoint onto GPU 0).
"""

from __future__ import annotations

import resource
import socket
import statistics
import sys
from typing import Any, Callable

from .. import _log, _settings, _wrapping

_swaps = _wrapping.SwapSet()
OUTLIER = 1.10  # a rank more than 10 % above the median is flagged


def apply() -> str | None:
    if not _settings.current().memory_report:
        return "MMFIX_MEMORY_REPORT is off"
    from mmengine.runner import runner

    _swaps.wrap(runner.Runner, "train", _train)
    return None


def remove() -> None:
    _swaps.undo_all()


def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


def local_stats() -> dict[str, Any]:
    import torch

    from .. import _ranks

    stats: dict[str, Any] = {
        "rank": _ranks.process_rank(),
        "host": socket.gethostname(),
        "peak_rss": _peak_rss_bytes(),
        "device": "cpu",
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        device = torch.cuda.current_device()
        stats.update(
            device=f"cuda:{device}",
            peak_allocated=torch.cuda.max_memory_allocated(device),
            peak_reserved=torch.cuda.max_memory_reserved(device),
        )
    return stats


def _fmt(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def format_table(rows: list[dict[str, Any]]) -> str:
    key = "peak_reserved" if all("peak_reserved" in r for r in rows) else "peak_rss"
    median = statistics.median(r[key] for r in rows) or 1
    lines = [
        f"memory report: peak memory per rank (outliers: > {int((OUTLIER - 1) * 100)}% above the median "
        f"{key.replace('_', ' ')})",
        f"{'rank':>5}  {'host':<16} {'device':<8} {'peak allocated':>15} {'peak reserved':>14} {'peak RSS':>10}",
    ]
    for r in sorted(rows, key=lambda r: r["rank"]):
        flag = ""
        if r[key] > OUTLIER * median:
            flag = f"  <-- {100 * (r[key] / median - 1):.0f}% above the median"
        lines.append(
            f"{r['rank']:>5}  {r['host'][:16]:<16} {r['device']:<8} {_fmt(r.get('peak_allocated')):>15} "
            f"{_fmt(r.get('peak_reserved')):>14} {_fmt(r['peak_rss']):>10}{flag}"
        )
    return "\n".join(lines)


def _train(wrapped: Callable[..., Any], runner: Any, args: tuple, kwargs: dict) -> Any:
    result = wrapped(*args, **kwargs)
    try:
        from mmengine.dist import all_gather_object, is_distributed

        mine = local_stats()
        rows = all_gather_object(mine) if is_distributed() else [mine]
        _log.info(format_table(rows), key="memory-report")
    except Exception as exc:  # a report must never fail a finished run
        _log.warning(f"memory report skipped: {exc!r}", key="memory-report-failed")
    return result
