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
import inspect
import pickle
import sys
import threading
import types
from typing import Any, Iterable

from .. import _log, _settings
from . import class_shapes, escapes, numpy_guard

HISTORY_BUFFER = "mmengine.logging.history_buffer.HistoryBuffer"
_STATISTICS = frozenset(("min", "max", "current", "mean"))
# Modules whose callables and classes serve to run code, reach the file system,
# processes or the network, or build arbitrary objects. mmfix never trusts anything
# that *is* (or wraps) one of theirs, whatever name a file spells it by, and no
# real checkpoint needs them. A prefix covers its submodules.
_HOSTILE_MODULES = frozenset(
    (
        "os",
        "posix",
        "nt",
        "posixpath",
        "ntpath",
        "subprocess",
        "_posixsubprocess",
        "_winapi",
        "sys",
        "runpy",
        "shutil",
        "socket",
        "_socket",
        "ssl",
        "select",
        "selectors",
        "importlib",
        "pkgutil",
        "zipimport",
        "imp",
        "pty",
        "tty",
        "code",
        "codeop",
        "timeit",
        "pickle",
        "_pickle",
        "pickletools",
        "copyreg",
        "copy",
        "marshal",
        "shelve",
        "dbm",
        "ctypes",
        "_ctypes",
        "cffi",
        "multiprocessing",
        "_multiprocessing",
        "concurrent",
        "threading",
        "_thread",
        "asyncio",
        "signal",
        "faulthandler",
        "resource",
        "webbrowser",
        "pdb",
        "bdb",
        "platform",
        "pydoc",
        "io",
        "_io",
        "tempfile",
        "pathlib",
        "glob",
        "fnmatch",
        "fileinput",
        "filecmp",
        "sqlite3",
        "_sqlite3",
        "zipfile",
        "tarfile",
        "gzip",
        "bz2",
        "lzma",
        "zlib",
        "urllib",
        "http",
        "ftplib",
        "smtplib",
        "imaplib",
        "poplib",
        "telnetlib",
        "xmlrpc",
        "wsgiref",
        "logging",
        "operator",
        "_operator",
        "functools",
        "_functools",
        "inspect",
        "types",
        "gc",
        "weakref",
        "_weakref",
        "trace",
        "cProfile",
        "profile",
        "ast",
        "builtins",
        "__builtin__",
        "site",
        "sysconfig",
        "distutils",
        "setuptools",
        "pip",
        "venv",
        "ensurepip",
        "atexit",
        "mmap",
        "fcntl",
        "posixshmem",
        "_posixshmem",
        "uuid",
        "antigravity",
        "this",
        "torch.hub",
        "torch.utils.cpp_extension",
        "torch.utils.data",
        "torch.jit",
        "torch.package",
        "torch._dynamo",
        "torch._inductor",
        "torch.compiler",
        "torch.library",
        "torch.ops",
        "torch._ops",
        "torch.serialization",
        "torch.multiprocessing",
        "torch.distributed",
        "torch.cuda",
        "torch._C",
        "wrapt",
        "mmfix",
    )
)
# Not hostile as such, but never trusted: their classes build whatever a config names through
# registries (a dotted type name is imported), open log files, allocate what they are told
# (torch.nn modules), or are numpy's (see numpy_guard). torch's own list already covers the
# torch objects a checkpoint holds.
_NEVER_TRUSTED = frozenset(
    (
        "numpy",
        "torch",
        "mmengine",
        "mmcv",
        "mmdet",
        "mmseg",
        "mmpretrain",
        "mmcls",
        "mmpose",
        "mmdet3d",
        "mmocr",
        "mmyolo",
        "mmrotate",
        "mmaction",
        "mmagic",
        "mmtrack",
    )
)
NEVER_TRUSTED_REASON = "mmfix never trusts"
_HOSTILE_BUILTINS = frozenset(
    (
        "eval",
        "exec",
        "compile",
        "open",
        "__import__",
        "getattr",
        "setattr",
        "delattr",
        "breakpoint",
        "input",
        "globals",
        "locals",
        "vars",
        "__build_class__",
    )
)
_lock = threading.Lock()
_registered: list[Any] = []
_registered_names: set[str] = set()
_trusted_by_user: set[str] = set()
_guarded_history_buffer: Any = None


def restricted_getattr(*args: Any) -> Any:
    """``getattr`` as MMEngine checkpoints need it, and nothing more."""
    obj, name = args if len(args) == 2 else (None, None)
    history_buffer = sys.modules.get("mmengine.logging.history_buffer")
    real = getattr(history_buffer, "HistoryBuffer", None) if history_buffer is not None else None
    if (
        real is not None
        and (obj is real or (obj is _guarded_history_buffer and obj is not None))
        and isinstance(name, str)
        and name in _STATISTICS
    ):
        return builtins.getattr(real, name)
    raise pickle.UnpicklingError(
        f"mmfix: the checkpoint asks for getattr({getattr(obj, '__qualname__', type(obj).__name__)}, {name!r}); "
        "only HistoryBuffer.min/max/current/mean are allowed"
    )


restricted_getattr.__module__ = "builtins"
restricted_getattr.__qualname__ = restricted_getattr.__name__ = "getattr"


def qualify(name: str) -> str:
    """torch names builtins without their module ("eval"); spell them out."""
    return name if "." in name else f"builtins.{name}"


def _module_is_hostile(module: str) -> bool:
    parts = module.split(".")
    return any(".".join(parts[:i]) in _HOSTILE_MODULES for i in range(1, len(parts) + 1))


def is_hostile(name: str) -> bool:
    """By spelling alone: the cheap first test (see ``object_problem`` for the real one)."""
    module, _, attr = qualify(name).rpartition(".")
    if module in ("builtins", "__builtin__"):
        return attr in _HOSTILE_BUILTINS
    return _module_is_hostile(module)


def _real_name(obj: Any) -> str | None:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    return f"{module}.{qualname}"


def _underlying(obj: Any) -> list[Any]:
    """``obj`` and whatever it wraps or is bound to (partials, decorators, bound methods)."""
    out: list[Any] = []
    todo = [obj]
    while todo and len(out) < 32:
        item = todo.pop()
        if any(item is seen for seen in out):
            continue
        out.append(item)
        for attr in ("__wrapped__", "func", "__func__", "__self__"):
            try:
                inner = inspect.getattr_static(item, attr)
            except AttributeError:
                continue
            if isinstance(inner, (property, types.MemberDescriptorType, types.GetSetDescriptorType)):
                try:
                    inner = builtins.getattr(item, attr)
                except Exception:
                    continue
            if inner is not None and not isinstance(inner, (str, int, float, bool)):
                todo.append(inner)
    return out


def object_problem(obj: Any, name: str) -> str | None:
    """Why ``obj``, named ``name`` by a file or a user, must not be trusted; None if it may be."""
    name = qualify(name)
    if is_hostile(name):
        return "it can only serve to run commands or arbitrary code"
    for item in _underlying(obj):
        if isinstance(item, types.ModuleType):
            if _module_is_hostile(item.__name__):
                return f"it is bound to the module {item.__name__}, which runs code or reaches files and processes"
            continue
        module = getattr(item, "__module__", None)
        if isinstance(item, type):
            if issubclass(item, type):
                return "it is a metaclass: it builds new types"
            if module in ("builtins", "__builtin__"):
                return (
                    f"it is builtins.{item.__name__}: torch already allows the builtins a checkpoint needs, and "
                    "others build unbounded data (range, bytes) or reach code"
                )
        elif module in ("builtins", "__builtin__") or module is None:
            return "it is a builtin function, none of which a checkpoint may call"
        if isinstance(module, str) and _module_is_hostile(module):
            real = _real_name(item) or module
            return f"it is {real}, which runs code or reaches files, processes or the network"
    real_name = _real_name(obj)
    if real_name is None or real_name != name:
        return (
            f"the name {name!r} does not name the object itself (that is {real_name or type(obj).__name__!r}); "
            "only an object's own module.qualname can be trusted"
        )
    root = real_name.split(".")[0]
    if root in _NEVER_TRUSTED:
        return (
            f"{NEVER_TRUSTED_REASON} {root}'s classes and functions: they build what a config names, touch "
            "files or allocate what they are told"
        )
    return None


def assess(name: str) -> tuple[str, str | None]:
    """How a refusal treats a name a file asked for: ("hostile", why), ("trustable", None)
    or ("unvetted", why). Only modules already imported are looked into."""
    name = qualify(name)
    if is_hostile(name):
        return "hostile", "it can only serve to run commands or arbitrary code"
    module_name, _, attr = name.rpartition(".")
    module = sys.modules.get(module_name)
    if module is None:
        return "unvetted", (
            f"its module {module_name} is not imported in this process, and mmfix never imports a module a file names"
        )
    obj = module.__dict__.get(attr)
    if obj is None:
        return "unvetted", f"{module_name} has no attribute {attr!r}"
    problem = object_problem(obj, name)
    if problem is not None:
        return ("unvetted" if problem.startswith(("the name", NEVER_TRUSTED_REASON)) else "hostile"), problem
    problem = trust_problem(obj, name)
    if problem is not None:
        return "unvetted", problem
    return "trustable", None


_FUNCTION_PROBLEM = (
    "it is a function: a file may call a trusted function with any arguments, so mmfix trusts data-only "
    "classes only (torch.serialization.add_safe_globals is torch's own way, at your own risk)"
)


def trust_problem(obj: Any, name: str) -> str | None:
    """Why ``obj`` (named ``name``) must not be trusted, or None: the one rule behind
    MMFIX_TRUSTED_GLOBALS, mmfix.trust_globals(), the refusal's trust line and inspect's."""
    problem = object_problem(obj, name)
    if problem is not None:
        return problem
    if not isinstance(obj, type):
        return _FUNCTION_PROBLEM
    shape = class_shapes.shape_problem(obj)
    if shape is not None:
        return (
            f"it is not a data-only class ({shape}); mmfix trusts only dataclasses and NamedTuples with "
            "generated methods and plain classes that inherit construction and state from object"
        )
    return None


def suggestion_for(name: str) -> str | None:
    """``name`` if a refusal may offer the copy-paste trust line for it: a data-only class
    that is already imported (a file's names are never imported to find out)."""
    name = qualify(name)
    module_name, _, attr = name.rpartition(".")
    module = sys.modules.get(module_name)
    if module is None or "." in attr:
        return None
    obj = module.__dict__.get(attr)
    if obj is None or trust_problem(obj, name) is not None:
        return None
    return name


def _numpy_entries() -> list[Any]:
    return numpy_guard.entries()


def _guard_history_buffer(real: type) -> type:
    """What the name HistoryBuffer means inside a checkpoint.

    MMEngine's own ``__setstate__`` merges the file's statistics methods into the
    *class-wide* registry, so one file could make every buffer of the running
    training report ``max`` as ``mean``. The guard accepts only entries identical
    to what the class already has, sets the instance's state, and then becomes
    the real class (same layout), so nothing of it outlives the load. The only class
    state it touches is what constructing any buffer does: MMEngine's own defaults.
    """

    class HistoryBuffer(real):  # type: ignore[misc, valid-type, unused-ignore]
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            if args or kwargs:
                raise pickle.UnpicklingError(
                    "mmfix: the checkpoint constructs a HistoryBuffer with arguments; "
                    "MMEngine writes it as an empty object plus its state"
                )
            instance = object.__new__(cls)
            escapes.made(instance, real)  # it must have become the real class by the end of the load
            return instance

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise pickle.UnpicklingError("mmfix: the checkpoint calls HistoryBuffer(...); MMEngine never does")

        def __setstate__(self, state: Any) -> None:
            if type(self) is not HistoryBuffer:
                raise pickle.UnpicklingError("mmfix: the checkpoint sets a HistoryBuffer's state twice")
            if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
                raise pickle.UnpicklingError("mmfix: a HistoryBuffer's state in the checkpoint is not a plain dict")
            state = dict(state)
            methods = state.pop("statistics_methods", {})
            if not isinstance(methods, dict):
                raise pickle.UnpicklingError("mmfix: a HistoryBuffer's statistics methods are not a dict")
            registry = real._statistics_methods  # type: ignore[attr-defined]
            for name, method in methods.items():
                expected = registry.get(name, builtins.getattr(real, name, None) if name in _STATISTICS else None)
                if not isinstance(name, str) or expected is None or method is not expected:
                    raise pickle.UnpicklingError(
                        f"mmfix: the checkpoint maps the HistoryBuffer statistic {name!r} to "
                        f"{getattr(method, '__qualname__', type(method).__name__)}; MMEngine maps each name to the "
                        "method registered under it, and a load must not change what other buffers compute"
                    )
            for key, value in state.items():
                if key in ("_log_history", "_count_history"):
                    if not isinstance(value, numpy_guard.ArrayBuilder):
                        raise pickle.UnpicklingError(f"mmfix: a HistoryBuffer's {key} is not a numpy array")
                    state[key] = value.built()
                elif key != "max_length" or type(value) is not int:
                    raise pickle.UnpicklingError(
                        f"mmfix: a HistoryBuffer's state holds {key!r}, which MMEngine never writes there"
                    )
            self.__dict__.update(state)
            self.__class__ = real
            # What constructing any buffer does (and MMEngine's own __setstate__): MMEngine's four
            # default statistics, the same objects whatever the file says, so statistics('mean')
            # works in a process whose buffers all came from a checkpoint.
            self._set_default_statistics()

    HistoryBuffer.__module__ = real.__module__
    HistoryBuffer.__qualname__ = real.__qualname__
    return HistoryBuffer


def standins() -> dict[str, Any]:
    """name -> every object mmfix puts on torch's list in place of the real one (none may reach a caller)."""
    guard = {HISTORY_BUFFER: _guarded_history_buffer} if _guarded_history_buffer is not None else {}
    return {**guard, "builtins.getattr": restricted_getattr, **numpy_guard.standin_objects()}


def _history_buffer_entries() -> list[Any]:
    global _guarded_history_buffer
    module = sys.modules.get("mmengine.logging.history_buffer")
    if module is None:
        return []
    if _guarded_history_buffer is None:
        _guarded_history_buffer = _guard_history_buffer(module.HistoryBuffer)
    return [(_guarded_history_buffer, HISTORY_BUFFER), (restricted_getattr, "builtins.getattr")]


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
        _vetted = numpy_guard.NAMES | {HISTORY_BUFFER, "builtins.getattr"}
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
    """Allow user-named globals for weights_only loads (process-wide, as torch's list is).

    The decision is made on the object a name resolves to, never on its spelling:
    ``torch.serialization.os.system`` is ``os.system``.
    """
    entries: list[Any] = []
    for item in names:
        label = item if isinstance(item, str) else _name_of(item)
        if qualify(label) in vetted_names() and not is_hostile(label):
            # Already allowed through mmfix's own validating stand-in; the real object must not replace it.
            if qualify(label) == HISTORY_BUFFER:
                ensure_history_buffer()
            _log.info(
                f"{source} names {label!r}, which mmfix already allows through its own checks; "
                "nothing more is trusted for it.",
                key=f"vetted:{label}",
            )
            continue
        if isinstance(item, str) and is_hostile(label):
            problem: str | None = "it can only serve to run commands or arbitrary code"
        else:
            try:
                obj = resolve(item) if isinstance(item, str) else (item[0] if isinstance(item, tuple) else item)
            except LookupError:
                _log.warning(
                    f"{source} names {item!r}, which cannot be imported; write it as "
                    "module.Name (e.g. mypkg.metrics.MyMetric). It was not trusted.",
                    key=f"untrusted:{item}",
                )
                continue
            problem = trust_problem(obj, label)
        if problem is not None:
            _log.error(
                f"{source} names {label!r}; mmfix never trusts it: {problem}. No real checkpoint needs it; "
                "if a file asks for it, do not load that file.",
                key=f"hostile:{label}",
            )
            continue
        entries.append((obj, label))
        _trusted_by_user.add(label)
    with _lock:
        _add(entries)


def trusted_types() -> tuple[type, ...]:
    """User-trusted classes: their instances' ``__dict__`` may hold loaded numpy values."""
    return tuple(
        e[0] for e in _registered if isinstance(e, tuple) and e[1] in _trusted_by_user and isinstance(e[0], type)
    )


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
