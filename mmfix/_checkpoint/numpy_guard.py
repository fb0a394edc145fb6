"""numpy arrays and scalars for weights_only loads, through stand-ins that validate.

Allowlisting numpy's real ``dtype``, ``ndarray`` and dtype classes, as is commonly
advised for weights_only loads, hands a pickle numpy's C ``dtype.__setstate__``
with any state (an object dtype whose flags deny holding objects; iterating an
array of it dereferences attacker bytes as ``PyObject*``) and the ``ndarray``
constructor (a zero-stride array of 2**62 elements over one byte, which ``set()``
never finishes). So no real numpy callable is reachable from a pickle. Under the
names numpy writes, the pickle gets:

* ``numpy.dtype(spec, align, copy)`` -> a ``DtypeBuilder``: BUILD checks the
  state against the spec and the builder then holds ``numpy.dtype(spec)`` made by
  us. Only numeric, bool and fixed-length byte/str dtypes are accepted.
* ``_reconstruct(numpy.ndarray, (0,), b'b')`` -> an ``ArrayBuilder``: BUILD checks
  shape, dtype and buffer length and hands numpy's own ``__setstate__`` a vetted
  state.
* ``scalar(dtype, bytes)`` -> the numpy scalar, its length checked.
* ``numpy.ndarray`` -> a name that can only be passed to ``_reconstruct``.

torch's unpickler leaves the object it BUILDs in place, so builders that end up
in containers are swapped for their arrays after the load (``resolve``). The
builder types are registered under dot-less names: a pickle's GLOBAL always
spells ``module.name``, so it can never name them.

The validators are pure functions of plain values, shared with the static
reader of ``mmfix inspect``.
"""

from __future__ import annotations

import pickle
import re
import sys
import threading
from typing import Any, Callable

_FIXED = {
    "b1": 1,
    **{f"{k}{n}": n for k in "iu" for n in (1, 2, 4, 8)},
    **{f"f{n}": n for n in (2, 4, 8, 16)},
    **{f"c{n}": n for n in (8, 16, 32)},
}
# fullmatch only: "$" would also match before a trailing newline ("S8\n"), which numpy refuses.
_FLEXIBLE = re.compile(r"([SU])([1-9][0-9]{0,8})")
_MAX_NDIM = 32  # numpy's limit is 64; nothing MMEngine writes comes close
_MAX_ITEMSIZE = 1 << 20
_MAX_DIM = 1 << 62  # numpy's own limit is below 2**63
# An array without elements needs no bytes, whatever its other dimensions say; but iterating it
# (torch.Size(array) lists its rows) costs its leading dimension. Nothing numpy writes for
# MMEngine has an empty array with more rows than this.
_MAX_EMPTY_ROWS = 1 << 16


def _refuse(message: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(f"mmfix: refused numpy data in the checkpoint: {message}")


def check_dtype_args(args: Any) -> str:
    """``numpy.dtype(spec, align, copy)`` as numpy writes it; returns the spec."""
    if not (isinstance(args, tuple) and len(args) == 3):
        raise _refuse(f"numpy.dtype called with {_short(args)}; numpy writes (spec, False, True)")
    spec, align, copy = args
    flexible = _FLEXIBLE.fullmatch(spec) if type(spec) is str else None
    if type(spec) is not str or (spec not in _FIXED and not flexible):
        raise _refuse(
            f"dtype {_short(spec)} is not a plain numeric, bool, bytes or str dtype "
            "(object, structured, void and datetime dtypes are refused)"
        )
    if flexible and int(flexible.group(2)) * (4 if flexible.group(1) == "U" else 1) > _MAX_ITEMSIZE:
        raise _refuse(f"dtype {spec!r} has items larger than {_MAX_ITEMSIZE >> 20} MiB")
    if align is not False or copy is not True:
        raise _refuse(f"numpy.dtype({spec!r}, {_short(align)}, {_short(copy)}): numpy writes align=False, copy=True")
    return spec


def check_dtype_state(spec: str, state: Any) -> str:
    """The BUILD state of a dtype; returns its byte order."""
    flexible = _FLEXIBLE.fullmatch(spec)
    if flexible and flexible.group(1) == "S":
        expected: tuple[Any, ...] = (int(flexible.group(2)), 1, 0)
        orders: tuple[str, ...] = ("|",)
    elif flexible:
        expected = (4 * int(flexible.group(2)), 4, 8)
        orders = ("<", ">", "=")
    else:
        expected = (-1, -1, 0)
        orders = ("|",) if _FIXED[spec] == 1 else ("<", ">", "=")
    if not (isinstance(state, tuple) and len(state) == 8 and state[0] == 3 and type(state[0]) is int):
        raise _refuse(f"dtype {spec!r} has state {_short(state)}; numpy writes an 8-item version-3 state")
    _, order, subarray, names, fields, elsize, alignment, flags = state
    if subarray is not None or names is not None or fields is not None:
        raise _refuse(f"dtype {spec!r} claims sub-arrays or fields; only plain dtypes are accepted")
    if order not in orders:
        raise _refuse(f"dtype {spec!r} has byte order {_short(order)}")
    if (elsize, alignment, flags) != expected or not all(type(v) is int for v in (elsize, alignment, flags)):
        raise _refuse(
            f"dtype {spec!r} has size/alignment/flags {_short((elsize, alignment, flags))}; numpy writes {expected}"
        )
    return str(order)


def check_array_state(state: Any, itemsize: int) -> None:
    """The BUILD state of an array (its dtype already vetted)."""
    if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1):
        raise _refuse(f"an array has state {_short(state)}; numpy writes (1, shape, dtype, fortran, bytes)")
    _, shape, _dtype, fortran, data = state
    if not (
        isinstance(shape, tuple)
        and len(shape) <= _MAX_NDIM
        and all(type(n) is int and 0 <= n < _MAX_DIM for n in shape)
    ):
        raise _refuse(f"an array has shape {_short(shape)}")
    if type(fortran) is not bool:
        raise _refuse(f"an array has order flag {_short(fortran)}")
    if not isinstance(data, (bytes, bytearray, ByteCount)):
        raise _refuse(f"an array's data is a {type(data).__name__}, not bytes")
    count = 1
    for n in shape:
        count *= n
    if count * itemsize != len(data):
        raise _refuse(
            f"an array of shape {shape} and item size {itemsize} needs {count * itemsize} bytes, "
            f"the file gives {len(data)}"
        )
    if count == 0 and shape and shape[0] > _MAX_EMPTY_ROWS:
        raise _refuse(
            f"an empty array claims {shape[0]:,} rows (shape {_short(shape)}); iterating it would cost that "
            "many steps for no data"
        )


class ByteCount:
    """Bytes the static reader knows only the length of (it never materialises them)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def check_reconstruct_args(args: Any, ndarray_name: Any) -> None:
    if not (
        isinstance(args, tuple) and len(args) == 3 and args[0] is ndarray_name and args[1] == (0,) and args[2] == b"b"
    ):
        raise _refuse(f"_reconstruct called with {_short(args)}; numpy writes (numpy.ndarray, (0,), b'b')")


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, (str, bytes, int, float, bool, type(None))) else type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


class _Load(threading.local):
    made = 0

    def __init__(self) -> None:
        self.builders: list[Any] = []  # every builder of the loads running on this thread


_load = _Load()


class NdarrayName:
    """What the name ``numpy.ndarray`` means inside a checkpoint: an argument of ``_reconstruct``."""

    def __new__(cls, *args: Any, **kwargs: Any) -> NdarrayName:
        raise _refuse("the file calls numpy.ndarray(...) directly; numpy writes arrays through _reconstruct")


class DtypeBuilder:
    __slots__ = ("spec", "dtype")
    __hash__ = None  # type: ignore[assignment]  # dtypes hash, but only the built one may be used as a key

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.dtype: Any = None
        _load.builders.append(self)

    def __setstate__(self, state: Any) -> None:
        import numpy as np

        if self.dtype is not None:
            raise _refuse("a dtype is built twice")
        order = check_dtype_state(self.spec, state)
        try:
            dtype = np.dtype(self.spec)
        except (TypeError, ValueError) as exc:
            raise _refuse(f"numpy does not know dtype {self.spec!r} ({exc})") from None
        if order in "<>" and dtype.byteorder not in ("|", order):
            dtype = dtype.newbyteorder(order)  # type: ignore[arg-type, unused-ignore]
        self.dtype = dtype
        _load.made += 1

    def built(self) -> Any:
        if self.dtype is None:
            raise _refuse(f"dtype {self.spec!r} is used before its state was given")
        return self.dtype


class ArrayBuilder:
    __slots__ = ("array",)

    def __init__(self) -> None:
        self.array: Any = None
        _load.builders.append(self)

    def __hash__(self) -> int:
        # Real arrays are unhashable: refuse as cleanly as torch refuses a global.
        raise _refuse("a numpy array is used as a dict key or set member")

    # What torch's allowed callables may do with an array (``set()`` iterates it): the
    # vetted array, whose size the file's own bytes bound.
    def __iter__(self) -> Any:
        return iter(self.built())

    def __len__(self) -> int:
        return len(self.built())

    def __setstate__(self, state: Any) -> None:
        import numpy as np

        if self.array is not None:
            raise _refuse("an array is built twice")
        dtype = state[2] if isinstance(state, tuple) and len(state) == 5 else None
        if not isinstance(dtype, DtypeBuilder):
            raise _refuse(f"an array's dtype is a {type(dtype).__name__}, not a numpy dtype")
        real = dtype.built()
        check_array_state(state, real.itemsize)
        array = np.ndarray.__new__(np.ndarray, (0,), "b")
        try:
            array.__setstate__((1, state[1], real, state[3], bytes(state[4])))
        except (ValueError, TypeError, MemoryError) as exc:
            raise _refuse(f"numpy cannot build the array ({type(exc).__name__}: {str(exc)[:120]})") from None
        self.array = array
        _load.made += 1

    def built(self) -> Any:
        if self.array is None:
            raise _refuse("an array is used before its state was given")
        return self.array


def standin_dtype(*args: Any) -> DtypeBuilder:
    return DtypeBuilder(check_dtype_args(args))


def standin_reconstruct(*args: Any) -> ArrayBuilder:
    check_reconstruct_args(args, NdarrayName)
    return ArrayBuilder()


def standin_scalar(*args: Any) -> Any:
    import numpy as np

    if not (len(args) == 2 and isinstance(args[0], DtypeBuilder) and isinstance(args[1], (bytes, bytearray))):
        raise _refuse(f"numpy scalar({', '.join(type(a).__name__ for a in args)}); numpy writes (dtype, bytes)")
    dtype = args[0].built()
    if len(args[1]) != dtype.itemsize:
        raise _refuse(f"a {dtype} scalar needs {dtype.itemsize} bytes, the file gives {len(args[1])}")
    return np.frombuffer(bytes(args[1]), dtype=dtype)[0]


for _f, _n in ((standin_dtype, "dtype"), (standin_reconstruct, "_reconstruct"), (standin_scalar, "scalar")):
    _f.__qualname__ = _f.__name__ = _n  # what torch's error messages print
NdarrayName.__qualname__ = NdarrayName.__name__ = "ndarray"


_STANDINS: list[tuple[Any, str]] = [(NdarrayName, "numpy.ndarray"), (standin_dtype, "numpy.dtype")] + [
    (func, f"{spelling}.{name}")
    for func, name in ((standin_reconstruct, "_reconstruct"), (standin_scalar, "scalar"))
    for spelling in ("numpy.core.multiarray", "numpy._core.multiarray")
]
# BUILD needs the type of what it builds on the list; no GLOBAL can spell a dot-less name.
_BUILDERS: list[tuple[Any, str]] = [
    (DtypeBuilder, "mmfix numpy dtype builder"),
    (ArrayBuilder, "mmfix numpy array builder"),
]
NAMES = frozenset(name for _, name in _STANDINS)


def standin_objects() -> dict[str, Any]:
    return {name: obj for obj, name in _STANDINS}


def entries() -> list[Any]:
    """(stand-in, name) pairs for torch's allowlist; empty without numpy."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return []
    return list(_STANDINS + _BUILDERS)


def begin() -> tuple[int, int]:
    return _load.made, len(_load.builders)


def unwrap(value: Any) -> Any:
    if isinstance(value, (ArrayBuilder, DtypeBuilder)):
        return value.built()
    return value


_CONTAINERS = (dict, list, tuple, set)


def resolve(root: Any, mark: tuple[int, int], instance_types: Callable[[], tuple[type, ...]] = tuple) -> Any:
    """Swap builders for their arrays and dtypes throughout ``root``; no-op if the load made none.

    Iterative (a pickle can nest lists 100,000 deep) and memoised (shared and
    cyclic references keep their identity). ``instance_types``: the classes whose
    ``__dict__`` may hold loaded values (user-trusted classes), asked only if needed.
    Then no builder may still be referenced from anywhere (a tensor's or an
    OrderedDict's attributes, a closure): numpy never writes arrays there, and a
    builder must never reach the caller.
    """
    made, first = mark
    try:
        if len(_load.builders) == first:
            return root
        if _load.made != made:
            root = _resolve(root, instance_types())
        _check_none_left(first)
        return root
    finally:
        del _load.builders[first:]


def discard(mark: tuple[int, int]) -> None:
    del _load.builders[mark[1] :]


def _referenced(first: int) -> list[str]:
    builders, left = _load.builders, []
    for i in range(first, len(builders)):
        # References: the list, getrefcount's argument and ``builder``.
        builder = builders[i]
        if sys.getrefcount(builder) > 3:
            left.append(type(builder).__name__)
    return left


def _check_none_left(first: int) -> None:
    import gc

    for attempt in range(2):
        left = _referenced(first)
        if not left:
            return
        if attempt == 0:
            gc.collect()  # garbage cycles (a replaced tuple in a cycle) are not references
    raise _refuse(
        f"numpy data ({left[0]}) ended up where numpy never writes it (an object's attributes or an unreachable cycle)"
    )


def _resolve(root: Any, instance_types: tuple[type, ...]) -> Any:
    done: dict[int, Any] = {}
    keep_alive: list[Any] = []
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        obj, children_done = stack.pop()
        key = id(obj)
        if not children_done:
            if key in done:
                continue
            # Once per object (not per reference: a list referenced n times would otherwise be
            # rebuilt n times below), and ids stay unique while the walk runs.
            keep_alive.append(obj)
            if isinstance(obj, (ArrayBuilder, DtypeBuilder)):
                done[key] = obj.built()
                continue
            kids = _children(obj, instance_types)
            if kids is None:
                done[key] = obj
                continue
            done[key] = obj  # provisional: a cycle back to a mutable container finds itself
            stack.append((obj, True))
            stack.extend((child, False) for child in kids if id(child) not in done)
            continue
        done[key] = _rebuilt(obj, done, instance_types)
    # A container in a cycle through a tuple was rebuilt while that tuple was still in
    # progress: one more pass hands it the tuple's final version.
    for obj in keep_alive:
        if isinstance(obj, (dict, list)) or (instance_types and isinstance(obj, instance_types)):
            _rebuilt(obj, done, instance_types)
    return done[id(root)]


def _children(obj: Any, instance_types: tuple[type, ...]) -> Any:
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple)):
        return obj
    if isinstance(obj, set):
        return ()  # builders cannot be members (they refuse to hash)
    if instance_types and isinstance(obj, instance_types) and isinstance(getattr(obj, "__dict__", None), dict):
        return list(obj.__dict__.values())
    return None


def _rebuilt(obj: Any, done: dict[int, Any], instance_types: tuple[type, ...]) -> Any:
    if isinstance(obj, dict):
        for k, v in obj.items():
            new = done.get(id(v), v)
            if new is not v:
                obj[k] = new
        return obj
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            new = done.get(id(v), v)
            if new is not v:
                obj[i] = new
        return obj
    if isinstance(obj, tuple):
        items = [done.get(id(v), v) for v in obj]
        if all(a is b for a, b in zip(items, obj)):
            return obj
        return tuple(items) if type(obj) is tuple else obj  # torch.Size holds ints only
    if isinstance(obj, instance_types):
        _rebuilt(obj.__dict__, done, ())
    return obj
