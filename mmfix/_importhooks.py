"""Post-import hooks: run a callable right after a module finishes importing.

wrapt has the same feature (``wrapt.register_post_import_hook``), and mmfix's
wrappers are wrapt objects, but ``import wrapt`` costs 70-90 ms on wrapt 2.x
(it pulls in importlib.metadata, asyncio, ssl ...). ``import mmfix`` runs at
every interpreter start once the ``.pth`` hook is installed, so it must stay in
the low milliseconds; this module gives the same semantics with ``sys`` alone,
and wrapt is imported only when a hooked module (torch, mmengine) is imported,
next to which its cost disappears.

Semantics, matching wrapt: a hook for a module that is already imported runs at
once; otherwise it runs right after the module's code has executed; each hook
runs once; reloads are not tracked. Unlike wrapt, an exception raised by a hook
never propagates into the import: callers pass hooks that already guard
themselves, and this module guards once more as a last line.
"""

from __future__ import annotations

import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType
    from typing import Any, Callable, Sequence

    Hook = Callable[[ModuleType], None]

_lock = _thread.RLock()
_pending: dict[str, list[Hook]] = {}
# Names whose spec lookup is in progress in this thread of control; the finder
# steps aside for them so that it can ask the other finders without recursing.
_in_lookup: set[str] = set()


def _run_hooks(module: ModuleType, hooks: list[Hook]) -> None:
    for hook in hooks:
        try:
            hook(module)
        except Exception as exc:  # pragma: no cover - hooks guard themselves
            sys.stderr.write(f"mmfix: a post-import hook for {module.__name__} failed: {exc!r}\n")


def when_imported(name: str, hook: Hook) -> None:
    """Call ``hook(module)`` once ``name`` is imported (now, if it already is)."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _pending.setdefault(name, []).append(hook)
            _install_finder()
            return
    _run_hooks(module, [hook])


def cancel(hook: Hook) -> None:
    """Forget a hook that has not run yet."""
    with _lock:
        for name, hooks in list(_pending.items()):
            hooks[:] = [h for h in hooks if h is not hook]
            if not hooks:
                del _pending[name]


class _HookingLoader:
    """Delegates to the real loader and fires the hooks after ``exec_module``."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        # Put the real loader back before the module runs: code that inspects
        # __loader__ / __spec__.loader (importlib.resources, pkgutil) must not
        # see this shim.
        module.__loader__ = self._loader
        spec = getattr(module, "__spec__", None)
        if spec is not None:
            spec.loader = self._loader
        self._loader.exec_module(module)
        with _lock:
            hooks = _pending.pop(self._name, [])
        # The import system may have replaced the module object in sys.modules
        # while executing it (some packages do); hooks must see the final one.
        _run_hooks(sys.modules.get(self._name, module), hooks)

    def __getattr__(self, item: str) -> Any:
        return getattr(self._loader, item)


class _PostImportFinder:
    """A meta-path finder that only wraps the loader of watched module names."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> Any:
        if fullname not in _pending or fullname in _in_lookup:
            return None
        _in_lookup.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or isinstance(finder, _PostImportFinder):
                    continue
                find_spec = getattr(finder, "find_spec", None)
                if find_spec is None:
                    continue
                spec = find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            _in_lookup.discard(fullname)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HookingLoader(spec.loader, fullname)
        return spec

    # importlib.invalidate_caches() calls this on every meta-path entry.
    def invalidate_caches(self) -> None:
        pass


_finder = _PostImportFinder()


def _install_finder() -> None:
    if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _finder)
