"""Benchmark cases for mmfix's PyTorch ops, one module per op family (``benchmarks/ops.py`` runs them).

Each module defines ``cases()``, yielding ``(label, run)`` where ``run(ext)`` makes one
realistic call (forward, or forward and backward) through ``ext`` — mmcv's compiled
extension or mmfix's — with inputs built once, outside the timed part: ``run`` is
called as ``run(ext)()``, and only the returned callable is timed.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def families(only: list[str] | None) -> list[tuple[str, ModuleType]]:
    """(name, module) of every case module, or of those named in ``only`` (``--family``)."""
    names = [m.name for m in pkgutil.iter_modules(__path__)]
    return [(name, importlib.import_module(f"{__name__}.{name}")) for name in names if not only or name in only]
