"""MMDetection 3.3.0, MMSegmentation 1.2.2 and MMDetection3D 1.4.0 accept mmcv 2.2.

mmcv 2.2.0 is the only official mmcv built for torch 2.2–2.4 (and the newest
mmcv-lite), but these toolboxes assert ``mmcv < 2.2.0`` at import, so users edit
files in site-packages to get past it. mmcv 2.2.0's Python code differs from
2.1.0's only in Ascend (NPU) branches, and the test suite runs these toolboxes
on it. This patch raises exactly that bound, in memory, when the toolbox's
``__init__`` is executed: the source is read, the one line of the table below
is replaced, and the result is compiled under the file's own name (tracebacks
stay right). Nothing installed is changed, and any other mmcv (2.3 if it ever
appears, or 1.x) still meets the toolbox's own assert.

The patch is armed at activation (its trigger is ``sys``): the toolbox must be
found through its finder before the toolbox's ``__init__`` runs.
"""

from __future__ import annotations

import _thread
import sys

from .. import _log, _wrapping

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType
    from typing import Any

# This module is applied at every interpreter start that activates mmfix (its trigger is
# ``sys``), so it imports nothing that costs: no typing (NamedTuple), threading or types.
_swaps = _wrapping.SwapSet()
_lookup = _thread._local()


class Bound:
    """One toolbox's bound: ``line`` exactly as it stands in its __init__.py, and its relaxed form."""

    __slots__ = ("package", "line", "relaxed")

    def __init__(self, package: str, line: str, relaxed: str) -> None:
        self.package = package
        self.line = line
        self.relaxed = relaxed

    def __repr__(self) -> str:
        return f"Bound({self.package!r}, {self.line!r}, {self.relaxed!r})"


#: One row per toolbox line; the same line in every release that has it (MMDetection 3.0–3.3 …).
BOUNDS = (
    Bound("mmdet", "mmcv_maximum_version = '2.2.0'", "mmcv_maximum_version = '2.3.0'"),
    Bound("mmseg", "MMCV_MAX = '2.2.0'", "MMCV_MAX = '2.3.0'"),
    Bound("mmdet3d", "mmcv_maximum_version = '2.2.0'", "mmcv_maximum_version = '2.3.0'"),
)
_BY_PACKAGE = {b.package: b for b in BOUNDS}
#: The mmcv releases accepted beyond the toolboxes' bound (the ones the test suite runs).
ACCEPTED_MMCV = ("2.2.",)

#: package -> the mmcv version it was relaxed for, in this process (for `mmfix doctor`).
relaxed: dict[str, str] = {}


def installed_mmcv_version() -> str | None:
    """mmcv's version from its metadata (mmcv, mmcv-lite or mmcv-full), without importing it."""
    from importlib import metadata

    for name in ("mmcv", "mmcv-lite", "mmcv-full"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def needs_relaxing(package: str, source: str, mmcv_version: str | None) -> Bound | None:
    """The table row that applies to this toolbox source with this mmcv, if any (pure)."""
    bound = _BY_PACKAGE.get(package)
    if bound is None or mmcv_version is None or not mmcv_version.startswith(ACCEPTED_MMCV):
        return None
    return bound if bound.line in source.splitlines() else None


class _RelaxingLoader:
    def __init__(self, loader: Any, bound: Bound, mmcv_version: str) -> None:
        self._loader = loader
        self._bound = bound
        self._mmcv_version = mmcv_version

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        name = module.__name__
        source = self._loader.get_source(name)
        bound = self._bound
        code = compile(source.replace(bound.line, bound.relaxed, 1), self._loader.get_filename(name), "exec")
        relaxed[bound.package] = self._mmcv_version
        version = _dist_version(bound.package)
        _log.info(
            f"{bound.package} {version} asserts mmcv < 2.2.0 at import; mmfix accepts mmcv "
            f"{self._mmcv_version} for it (mmcv 2.2's Python code differs from 2.1's only for Ascend NPUs, "
            "and mmfix's test suite runs this combination). The bound is raised in memory; no installed "
            "file is changed. MMFIX_DISABLED_PATCHES=mmcv_bound keeps the toolbox's own check.",
            key=f"mmcv-bound:{bound.package}",
        )
        exec(code, module.__dict__)

    def __getattr__(self, item: str) -> Any:
        return getattr(self._loader, item)


def _dist_version(package: str) -> str:
    from importlib import metadata

    names = {"mmdet": "mmdet", "mmseg": "mmsegmentation", "mmdet3d": "mmdet3d"}
    try:
        return metadata.version(names.get(package, package))
    except metadata.PackageNotFoundError:
        return "(version unknown)"


class _BoundFinder:
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _BY_PACKAGE or getattr(_lookup, "busy", False):
            return None
        _lookup.busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                find_spec = getattr(finder, "find_spec", None)
                if finder is self or find_spec is None:
                    continue
                spec = find_spec(fullname, path, target)
                if spec is not None:
                    break
            if spec is None or spec.loader is None or not hasattr(spec.loader, "get_source"):
                return spec
            try:
                source = spec.loader.get_source(fullname)
            except (ImportError, OSError):
                return spec
            bound = needs_relaxing(fullname, source or "", installed_mmcv_version())
            if bound is not None:
                spec.loader = _RelaxingLoader(spec.loader, bound, installed_mmcv_version() or "")
            return spec
        finally:
            _lookup.busy = False

    def invalidate_caches(self) -> None:
        pass


def apply() -> str | None:
    finder = _BoundFinder()
    sys.meta_path.insert(0, finder)

    def undo() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)

    _swaps.on_undo(undo)
    return None


def remove() -> None:
    _swaps.undo_all()
