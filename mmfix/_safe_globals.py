"""The minimal weights_only allowlist for checkpoints written by MMEngine's Runner.

Why each entry is safe:

* ``HistoryBuffer``: a plain data class; its ``__setstate__`` only updates
  ``__dict__`` and a dict of statistics functions.
* ``builtins.getattr`` is **not** the real getattr. ``HistoryBuffer.__getstate__``
  pickles ``HistoryBuffer.min`` & co., which protocol 2 spells
  ``getattr(HistoryBuffer, "min")``. The real getattr would hand an attacker
  ``getattr(getattr, "__self__")`` (the builtins module) and, through
  ``torch._tensor._rebuild_from_type_v2`` (allowed by torch), a call of ``exec``.
  The stand-in resolves exactly ``HistoryBuffer.{min,max,current,mean}``.
* numpy's ``ndarray``, ``dtype``, the numeric dtype classes, ``_reconstruct`` and
  ``scalar``: they build arrays and scalars from bytes, under both spellings
  (``numpy.core`` in files written by numpy 1, ``numpy._core`` by numpy 2).
  The object dtype class is left out: nothing MMEngine writes needs it.
"""
from __future__ import annotations

import builtins
import importlib
import pickle
import sys
import threading
from typing import Any, Iterable

from . import _log, _settings

HISTORY_BUFFER = "mmengine.logging.history_buffer.HistoryBuffer"
_STATISTICS = frozenset(("min", "max", "current", "mean"))
# Globals whose only use in a checkpoint is running commands or code. mmfix
# never trusts them, not even when a user lists them: no real checkpoint needs
# them, and builtins.getattr in particular would replace the restricted stand-in.
_HOSTILE_MODULES = frozenset(("os", "posix", "nt", "subprocess", "sys", "runpy", "shutil", "socket", "importlib",
                              "pty", "code", "codeop", "timeit", "pickle", "_pickle", "marshal", "ctypes",
                              "multiprocessing", "webbrowser", "pdb", "bdb", "platform"))
_HOSTILE_BUILTINS = frozenset(("eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr",
                               "breakpoint", "input", "globals", "locals", "vars", "__build_class__"))
_lock = threading.Lock()
_registered: list[Any] = []
_registered_names: set[str] = set()
_trusted_by_user: set[str] = set()


def restricted_getattr(obj: Any, name: str) -> Any:
    """``getattr`` as MMEngine checkpoints need it, and nothing more."""
    history_buffer = sys.modules.get("mmengine.logging.history_buffer")
    if (
        history_buffer is not None
        and obj is getattr(history_buffer, "HistoryBuffer", None)
        and isinstance(name, str)
        and name in _STATISTICS
    ):
        return builtins.getattr(obj, name)
    raise pickle.UnpicklingError(
        f"mmfix: the checkpoint asks for getattr({getattr(obj, '__qualname__', type(obj).__name__)}, {name!r}); "
        "only HistoryBuffer.min/max/current/mean are allowed"
    )


restricted_getattr.__module__ = "builtins"
restricted_getattr.__qualname__ = restricted_getattr.__name__ = "getattr"


def qualify(name: str) -> str:
    """torch names builtins without their module ("eval"); spell them out."""
    return name if "." in name else f"builtins.{name}"


def is_hostile(name: str) -> bool:
    module, _, attr = qualify(name).rpartition(".")
    if module.split(".")[0] in _HOSTILE_MODULES:
        return True
    return module in ("builtins", "__builtin__") and attr in _HOSTILE_BUILTINS


def _numpy_entries() -> list[Any]:
    try:
        import numpy as np
    except ImportError:
        return []
    try:
        from numpy._core import multiarray  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core import multiarray  # type: ignore[no-redef]
    entries: list[Any] = [np.ndarray, np.dtype]
    codes = "?bBhHiIlLqQefdgFDG"
    entries += sorted({type(np.dtype(c)) for c in codes}, key=lambda t: t.__name__)
    for func in ("_reconstruct", "scalar"):
        obj = getattr(multiarray, func)
        for spelling in ("numpy.core.multiarray", "numpy._core.multiarray"):
            entries.append((obj, f"{spelling}.{func}"))
    return entries


def _history_buffer_entries() -> list[Any]:
    module = sys.modules.get("mmengine.logging.history_buffer")
    if module is None:
        return []
    return [module.HistoryBuffer, (restricted_getattr, "builtins.getattr")]


def _name_of(entry: Any) -> str:
    if isinstance(entry, tuple):
        return entry[1]
    return f"{entry.__module__}.{entry.__qualname__}"


def _add(entries: list[Any]) -> None:
    import torch.serialization

    fresh = [e for e in entries if _name_of(e) not in _registered_names]
    if fresh:
        torch.serialization.add_safe_globals(fresh)
        _registered.extend(fresh)
        _registered_names.update(_name_of(e) for e in fresh)


def register_builtin() -> None:
    """Register what mmfix vets itself: numpy now, HistoryBuffer once MMEngine is loaded."""
    with _lock:
        _add(_numpy_entries() + _history_buffer_entries())
        names = _settings.current().trusted_globals
    if names:
        trust(names, source="MMFIX_TRUSTED_GLOBALS")


def ensure_history_buffer() -> bool:
    """Import MMEngine's HistoryBuffer (if installed) and allow it; True if newly added."""
    if HISTORY_BUFFER in _registered_names:
        return False
    try:
        importlib.import_module("mmengine.logging.history_buffer")
    except Exception:
        return False
    with _lock:
        _add(_history_buffer_entries())
    return HISTORY_BUFFER in _registered_names


_vetted: frozenset[str] | None = None


def vetted_names() -> frozenset[str]:
    """Names mmfix allows by itself (whether or not they are registered yet)."""
    global _vetted
    if _vetted is None:
        _vetted = frozenset({_name_of(e) for e in _numpy_entries()} | {HISTORY_BUFFER, "builtins.getattr"})
    return _vetted


def user_trusted_names() -> set[str]:
    return set(_trusted_by_user)


def resolve(name: str) -> Any:
    """``"pkg.mod.Class.attr"`` -> the object, importing the longest module prefix."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            continue
        return obj
    raise LookupError(name)


def trust(names: Iterable[Any], source: str = "mmfix.trust_globals()") -> None:
    """Allow user-named globals for weights_only loads (process-wide, as torch's list is)."""
    entries: list[Any] = []
    for item in names:
        label = item if isinstance(item, str) else _name_of(item)
        if is_hostile(label):
            _log.error(
                f"{source} names {label!r}; mmfix never trusts it: it lets a checkpoint run commands or "
                "arbitrary code, and no real checkpoint needs it. If a file asks for it, do not load that file.",
                key=f"hostile:{label}",
            )
            continue
        if isinstance(item, str):
            try:
                obj = resolve(item)
            except LookupError:
                _log.warning(
                    f"{source} names {item!r}, which cannot be imported; write it as "
                    "module.Name (e.g. mypkg.metrics.MyMetric). It was not trusted.",
                    key=f"untrusted:{item}",
                )
                continue
            entries.append((obj, item))
            _trusted_by_user.add(item)
        else:
            entries.append(item)
            _trusted_by_user.add(_name_of(item))
    with _lock:
        _add(entries)


def unregister() -> None:
    """Take mmfix's entries (and user-trusted ones) back out of torch's allowlist."""
    import torch.serialization

    with _lock:
        ours = {id(e) for e in _registered}
        keep = [e for e in torch.serialization.get_safe_globals() if id(e) not in ours]
        torch.serialization.clear_safe_globals()
        if keep:
            torch.serialization.add_safe_globals(keep)
        _registered.clear()
        _registered_names.clear()
        _trusted_by_user.clear()
