"""``mmcv._ext`` from mmfix's PyTorch ops when no compiled extension can be imported.

A meta-path finder answers for ``mmcv._ext`` only. It first asks the other finders:
a compiled extension that exists is imported as usual (it always wins); if that
import fails (an mmcv built for another torch: ``undefined symbol …``), the
stand-in is used instead, with one warning naming the failure. When no compiled
extension exists (mmcv-lite, or mmcv built without ops), the stand-in is the
module. ``importlib.util.find_spec('mmcv._ext')`` (mmcv's ``check_ops_exist``)
then answers yes, as it would with compiled ops.

mmcv 1.x (mmcv-full) has a different set of extension functions; it is left alone.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

from .. import _log, _wrapping

_swaps = _wrapping.SwapSet()
_lookup = threading.local()

#: What ``mmcv._ext`` is in this process: None (not imported yet), "compiled", or "mmfix".
_provider: str | None = None
_compiled_failure: str | None = None


def provider() -> tuple[str | None, str | None]:
    """("compiled" | "mmfix" | None, why the compiled extension was not used, if it failed)."""
    module = sys.modules.get("mmcv._ext")
    if module is None:
        return None, _compiled_failure
    return ("mmfix" if getattr(module, "__mmfix__", False) else "compiled"), _compiled_failure


def _stand_in() -> ModuleType:
    global _provider
    from .._ops import _ext
    from .._ops._torchvision import describe

    module = _ext.build()
    _provider = "mmfix"
    _log.info(
        "mmcv has no compiled ops here (mmcv._ext); mmfix supplies them in PyTorch"
        f"{describe()}. `mmfix doctor` lists them per op family.",
        key="mmcv-ops-supplied",
    )
    return module


class _StandInLoader:
    def create_module(self, spec: Any) -> ModuleType:
        return _stand_in()

    def exec_module(self, module: ModuleType) -> None:
        pass


class _CompiledOrStandInLoader:
    """The compiled extension's own loader; the stand-in if loading it fails."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self._failed = False

    def create_module(self, spec: Any) -> Any:
        global _compiled_failure
        try:
            return self._loader.create_module(spec)
        except (ImportError, OSError) as exc:
            self._failed = True
            _compiled_failure = f"{type(exc).__name__}: {exc}"
            _log.warning(
                f"mmcv's compiled ops ({spec.origin}) failed to load ({_compiled_failure}): that mmcv was "
                "built for another torch, CUDA or Python. mmfix's PyTorch ops are used instead; rebuild "
                "or reinstall mmcv for this torch to use the compiled kernels.",
                key="mmcv-ops-compiled-failed",
            )
            return _stand_in()

    def exec_module(self, module: ModuleType) -> None:
        if self._failed:
            return
        global _provider
        self._loader.exec_module(module)
        _provider = "compiled"

    def __getattr__(self, item: str) -> Any:
        return getattr(self._loader, item)


class _ExtFinder:
    name = "mmcv._ext"

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or getattr(_lookup, "busy", False):
            return None
        _lookup.busy = True
        try:
            real = None
            for finder in sys.meta_path:
                find_spec = getattr(finder, "find_spec", None)
                if finder is self or find_spec is None:
                    continue
                real = find_spec(fullname, path, target)
                if real is not None:
                    break
        finally:
            _lookup.busy = False
        if real is not None and real.loader is not None:
            real.loader = _CompiledOrStandInLoader(real.loader)
            return real
        loader: Any = _StandInLoader()
        return importlib.util.spec_from_loader(fullname, loader, origin="mmfix._ops (PyTorch)")

    def invalidate_caches(self) -> None:
        pass


def _mmcv_major(mmcv: Any) -> int | None:
    try:
        return int(str(getattr(mmcv, "__version__", "")).split(".")[0])
    except ValueError:
        return None


def apply() -> str | None:
    mmcv = sys.modules["mmcv"]
    major = _mmcv_major(mmcv)
    if major is not None and major < 2:
        return f"mmcv {mmcv.__version__} is 1.x; mmfix supplies the ops of mmcv 2.x only"
    finder = _ExtFinder()
    sys.meta_path.insert(0, finder)

    def undo() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        # A stand-in already imported stays where mmcv.ops holds it; a later
        # `import mmcv._ext` sees the stock state again.
        module = sys.modules.get("mmcv._ext")
        if module is not None and getattr(module, "__mmfix__", False):
            del sys.modules["mmcv._ext"]

    _swaps.on_undo(undo)
    return None


def remove() -> None:
    _swaps.undo_all()
