"""Which classes a checkpoint may build: an allowlist of data-only *shapes*, never of modules.

Trusting a class for ``weights_only`` loads hands a file every way torch's unpickler
and the callables it allows reach into that class: ``cls(*args)`` (``__new__`` and
``__init__``), ``cls.__new__(cls, *args)``, ``__setstate__`` or ``__dict__.update``
and ``setattr`` for the state (data descriptors: property setters), ``hasattr`` of
``__setstate__`` (``__getattr__``), hashing and comparing as a dict key, iterating
(``set()``), formatting in an error message, and finalising (``__del__``). A class
with its own code in any of those runs it with values the file chose: a Fortran or
wave file writer given a path truncates it, a socket server binds. A module name
says nothing about that (scipy, the standard library and user packages all have
such classes), so the decision is made on the class itself:

* a plain class (metaclass ``type``) whose every base but ``object`` is data-only too;
* no special method of its own, except those ``dataclasses`` or
  ``collections.namedtuple`` / ``typing.NamedTuple`` generated (recognised by their
  code, not their names), and class metadata (``__module__``, ``__slots__`` ...);
* no data descriptor of its own (``setattr`` would run it) but slots, namedtuple
  fields and read-only properties;
* dataclass fields made by no factory other than the built-in containers.

Ordinary methods are allowed: nothing in a load calls them. Enums are not on the
list: their members are process-wide singletons, and ``BUILD`` on one would change it
for the whole process.
"""

from __future__ import annotations

import collections
import dataclasses
import reprlib
import sys
import types
from typing import Any

_METADATA = frozenset(
    (
        "__module__",
        "__qualname__",
        "__doc__",
        "__annotations__",
        "__slots__",
        "__dataclass_fields__",
        "__dataclass_params__",
        "__match_args__",
        "__orig_bases__",
        "__firstlineno__",
        "__static_attributes__",
        "__parameters__",
        "__type_params__",
        "__annotate__",
        "__annotate_func__",
        "__annotations_cache__",
        "_fields",
        "_field_defaults",
    )
)
# What each generator writes (any of them may be absent, depending on its options).
_DATACLASS_METHODS = frozenset(
    (
        "__init__",
        "__repr__",
        "__eq__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__hash__",
        "__setattr__",
        "__delattr__",
        "__getstate__",
        "__setstate__",
        "__replace__",
    )
)
_DATACLASS_FACTORIES = (list, dict, set, tuple, frozenset)
_REFERENCE_TUPLE = collections.namedtuple("_REFERENCE_TUPLE", "x")
# (__replace__, Python 3.13+, is the same function as _replace.)
_NAMEDTUPLE_METHODS = {
    name: vars(_REFERENCE_TUPLE)[name]
    for name in ("_make", "_replace", "__replace__", "__repr__", "_asdict", "__getnewargs__")
    if name in vars(_REFERENCE_TUPLE)
}
_TUPLE_FIELD = type(vars(_REFERENCE_TUPLE)["x"])


def shape_problem(cls: type) -> str | None:
    """Why a file could make ``cls`` act (a sentence), or None if it is a data-only shape."""
    if type(cls) is not type:
        return f"its metaclass is {type(cls).__qualname__}, not type: the metaclass decides what calling it does"
    for klass in cls.__mro__:
        if klass is object:
            continue
        if klass is tuple and _is_namedtuple(cls):
            continue
        problem = _own_problem(klass)
        if problem is not None:
            where = "" if klass is cls else f" (in its base {klass.__module__}.{klass.__qualname__})"
            return problem + where
    return None


def _is_namedtuple(cls: type) -> bool:
    return cls.__mro__[1:] == (tuple, object) and isinstance(vars(cls).get("_fields"), tuple)


def _own_problem(klass: type) -> str | None:
    if not klass.__flags__ & (1 << 9):  # Py_TPFLAGS_HEAPTYPE: a class written in Python
        return "it is implemented in C, so mmfix cannot see what constructing it does"
    own = vars(klass)
    dataclass = "__dataclass_fields__" in own
    namedtuple = _is_namedtuple(klass)
    for name, value in own.items():
        if name in _METADATA:
            continue
        if name in ("__dict__", "__weakref__"):
            if isinstance(value, types.GetSetDescriptorType):
                continue
            return f"it replaces {name}"
        if dataclass and name in _DATACLASS_METHODS and _dataclass_made(klass, name, value):
            continue
        if namedtuple and _namedtuple_made(name, value):
            continue
        if name.startswith("__") and name.endswith("__"):
            return (
                f"it has its own {name}: a load may call it with values the file chose (constructing, "
                "setting state, hashing, iterating or printing an object runs a class's own special methods)"
            )
        if _sets(value):
            return f"its attribute {name} runs code when set ({type(value).__name__}), as a load's state does"
    if dataclass:
        for field in dataclasses.fields(klass):
            factory = field.default_factory
            if factory is not dataclasses.MISSING and factory not in _DATACLASS_FACTORIES:
                return (
                    f"its field {field.name} is made by {getattr(factory, '__qualname__', type(factory).__name__)}, "
                    "which its generated __init__ calls"
                )
    return None


def _sets(value: Any) -> bool:
    """A data descriptor with behaviour of its own (slots and read-only properties have none)."""
    if isinstance(value, (types.MemberDescriptorType, _TUPLE_FIELD)):
        return False
    if isinstance(value, property):
        return value.fset is not None or value.fdel is not None
    kind = type(value)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")


def _generated_code(func: Any) -> bool:
    """Compiled by a generator from text (dataclasses and namedtuple do that), not written in a file."""
    code = getattr(func, "__code__", None)
    return code is not None and code.co_filename == "<string>"


def _dataclass_made(klass: type, name: str, value: Any) -> bool:
    if value is None:  # __hash__ = None: unhashable, as dataclasses makes eq=True classes
        return True
    if any(
        value is getattr(dataclasses, name, None) for name in ("_dataclass_getstate", "_dataclass_setstate", "_replace")
    ):
        return True  # slots=True, frozen=True, and __replace__ (3.13+): dataclasses' own module functions
    if not isinstance(value, types.FunctionType) or not _made_for(klass, name, value):
        return False
    if _generated_code(value):
        return True
    # __repr__ is wrapped by a recursion guard: dataclasses' own, reprlib's from Python 3.13 on.
    inner = getattr(value, "__wrapped__", None)
    return value.__code__.co_filename in (dataclasses.__file__, reprlib.__file__) and _generated_code(inner)


def _made_for(klass: type, name: str, func: types.FunctionType) -> bool:
    """dataclasses names what it generates for a class after the class (Python 3.10+); 3.9's
    keeps the generator's own name for the method, so there the name must be exactly that."""
    if func.__qualname__.startswith(klass.__qualname__ + "."):
        return True
    return sys.version_info < (3, 10) and func.__qualname__ == f"__create_fn__.<locals>.{name}"


def _namedtuple_made(name: str, value: Any) -> bool:
    if isinstance(value, _TUPLE_FIELD):
        return True
    if name == "__new__":
        func = value.__func__ if isinstance(value, staticmethod) else value
        return (
            _generated_code(func)
            and getattr(func, "__globals__", {}).get("_tuple_new") is tuple.__new__
            and set(func.__globals__) <= {"_tuple_new", "__builtins__", "__name__"}
        )
    reference = _NAMEDTUPLE_METHODS.get(name)
    if reference is None:
        return False
    code = getattr(getattr(value, "__func__", value), "__code__", None)
    return code is not None and code is getattr(getattr(reference, "__func__", reference), "__code__", None)
