"""Nothing of mmfix reaches the caller of a load: only real classes, or a refusal.

mmfix's stand-ins (the HistoryBuffer guard, the restricted getattr, the numpy
names) exist only inside a load. Two ways a file could hand one to the caller:

* a HistoryBuffer created without its state (``NEWOBJ`` with no ``BUILD``) is still
  of the guard class, which turns into MMEngine's class only when its state is set;
  the run would fail later, far from the file, when it logs or saves. Every guard
  instance a load creates is recorded, and the load is refused if one is left.
* a stand-in used as a plain value (``{"cls": HistoryBuffer}``). A reference from
  the result raises the stand-in's reference count, so the result is walked (in
  time linear in its size) only when a count rose or another load ran meanwhile,
  and the load is refused if the walk meets one.
"""

from __future__ import annotations

import gc
import pickle
import sys
import threading
from typing import Any

_lock = threading.Lock()
_started = 0  # loads begun in this process
_running = 0  # loads in progress, on any thread


class _Thread(threading.local):
    def __init__(self) -> None:
        self.made: list[tuple[Any, type]] = []  # (guard instance, the real class it must become)


_thread = _Thread()


class Mark:
    __slots__ = ("first", "started", "alone", "counts")

    def __init__(self, first: int, started: int, alone: bool, counts: list[int]) -> None:
        self.first = first
        self.started = started
        self.alone = alone
        self.counts = counts


def made(instance: Any, real: type) -> None:
    """A guard created ``instance``; by the end of the load it must be of class ``real``."""
    _thread.made.append((instance, real))


def begin(standins: dict[str, Any]) -> Mark:
    global _started, _running
    with _lock:
        _started += 1
        alone = _running == 0
        _running += 1
        started = _started
    return Mark(len(_thread.made), started, alone, _counts(standins))


def _counts(standins: dict[str, Any]) -> list[int]:
    # Measured the same way before and after: any reference this makes itself is in both.
    return [sys.getrefcount(s) for s in standins.values()]


def end(mark: Mark) -> None:
    """Always, after ``begin`` (a failed load's records must not linger on this thread)."""
    global _running
    del _thread.made[mark.first :]
    with _lock:
        _running -= 1


def check(root: Any, mark: Mark, standins: dict[str, Any]) -> None:
    """Refuse (``pickle.UnpicklingError``) if a guard instance or a stand-in reaches the caller."""
    for instance, real in _thread.made[mark.first :]:
        if type(instance) is not real:
            raise pickle.UnpicklingError(
                f"mmfix: the checkpoint creates a {real.__name__} without its state; MMEngine always writes "
                "a buffer together with its state, and an empty one would fail later when the run logs or saves"
            )
    with _lock:
        concurrent = not mark.alone or _started != mark.started
    risen = any(now > before for now, before in zip(_counts(standins), mark.counts))
    if not (risen or concurrent):
        return
    found = _find(root, {id(s): s for s in standins.values()})
    if found is not None:
        name = next(n for n, s in standins.items() if s is found)
        raise pickle.UnpicklingError(
            f"mmfix: the checkpoint holds the global {name} itself as a value; mmfix stands in for it only while "
            "loading, and nothing MMEngine, numpy or torch writes holds it as a value"
        )
    if concurrent:
        return  # another load's own references: only the walk can tell, and it found none
    gc.collect()  # garbage cycles the load left are not references
    if any(now > before for now, before in zip(_counts(standins), mark.counts)):
        raise pickle.UnpicklingError(
            "mmfix: the checkpoint keeps one of mmfix's stand-ins (HistoryBuffer, getattr or a numpy name) where "
            "the caller would get it (an object's internal state); nothing MMEngine, numpy or torch writes does"
        )


def _find(root: Any, standins: dict[int, Any]) -> Any:
    """A stand-in reachable from ``root`` (containers, dict keys, objects' attributes and slots)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        key = id(obj)
        if key in seen:
            continue
        seen.add(key)
        if key in standins and standins[key] is obj:
            return obj
        stack.extend(_children(obj))
    return None


_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None))


def _children(obj: Any) -> Any:
    if isinstance(obj, _ATOMS):
        return ()
    # The base types' own iteration: a subclass's methods are never called.
    if isinstance(obj, dict):
        return [*dict.keys(obj), *dict.values(obj), *_attributes(obj)]
    for base in _SEQUENCES:
        if isinstance(obj, base):
            iterate: Any = base.__iter__
            return [*iterate(obj), *_attributes(obj)]
    return _attributes(obj)


_SEQUENCES: tuple[Any, ...] = (list, tuple, set, frozenset)


def _attributes(obj: Any) -> list[Any]:
    if isinstance(obj, type):
        return []  # a class's own namespace is not the file's data
    out: list[Any] = []
    try:
        own = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        own = None
    if isinstance(own, dict):
        out.append(own)
    for klass in type(obj).__mro__:
        for slot in _slots(klass):
            try:
                out.append(object.__getattribute__(obj, slot))
            except (AttributeError, TypeError):
                pass
    return out


def _slots(klass: type) -> tuple[str, ...]:
    slots = vars(klass).get("__slots__", ())
    if isinstance(slots, str):
        slots = (slots,)
    return tuple(s for s in slots if isinstance(s, str) and s not in ("__dict__", "__weakref__"))
