"""The numpy stand-ins' validators and the post-load swap, in process (no torch needed)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from mmfix._checkpoint import numpy_guard as guard

NUMPY_WRITES = [
    "?",
    "i1",
    "u1",
    "<i2",
    ">i2",
    "<u4",
    "<i8",
    ">u8",
    "f2",
    "<f4",
    ">f8",
    "g",
    "c8",
    ">c16",
    "G",
    "S1",
    "S7",
    "<U1",
    ">U5",
]


def _build(dtype: np.dtype) -> guard.DtypeBuilder:
    _, args, state = dtype.__reduce__()
    builder = guard.standin_dtype(*args)
    builder.__setstate__(state)
    return builder


@pytest.mark.parametrize("spec", NUMPY_WRITES)
def test_every_plain_dtype_numpy_writes_is_rebuilt_exactly(spec: str) -> None:
    dtype = np.dtype(spec)
    assert _build(dtype).built() == dtype
    array = np.arange(6).astype(dtype).reshape(2, 3)
    for a in (array, np.asfortranarray(array), array[:0]):
        _, rargs, state = a.__reduce__()
        builder = guard.standin_reconstruct(guard.NdarrayName, *rargs[1:])
        builder.__setstate__((state[0], state[1], _build(state[2]), state[3], state[4]))
        rebuilt, stock = builder.built(), pickle.loads(pickle.dumps(a, protocol=2))
        assert type(rebuilt) is np.ndarray and rebuilt.dtype == stock.dtype and np.array_equal(rebuilt, a)
        assert rebuilt.flags.writeable and rebuilt.flags.f_contiguous == stock.flags.f_contiguous
    scalar = array.flat[1]
    _, sargs = scalar.__reduce__()
    assert guard.standin_scalar(_build(sargs[0]), sargs[1]) == scalar


@pytest.mark.parametrize("spec", ["O", "V8", "M8[s]", "m8[ns]", [("a", "f4")], [("o", "O")], ("f4", (2,))])
def test_other_dtypes_are_refused(spec) -> None:
    dtype = np.dtype(spec)
    _, args, state = dtype.__reduce__()
    with pytest.raises(pickle.UnpicklingError, match="refused numpy data"):
        builder = guard.standin_dtype(*args)
        builder.__setstate__(state)


@pytest.mark.parametrize(
    "state",
    [
        (3, "|", None, None, None, -1, -1, 63),  # object flags on a float
        (3, "<", None, None, None, 1 << 30, -1, 0),  # elsize
        (3, "<", None, ("a",), {"a": 1}, -1, -1, 0),  # fields
        (3, "<", (np.dtype("O"), (1,)), None, None, -1, -1, 0),  # sub-array
        (3, "|", None, None, None, -1, -1, 0),  # wrong byte order for f8
        (4, "<", None, None, None, -1, -1, 0),  # version
        (3, "<", None, None, None, -1, -1),  # short
    ],
)
def test_dtype_states_numpy_never_writes_are_refused(state) -> None:
    with pytest.raises(pickle.UnpicklingError):
        guard.standin_dtype("f8", False, True).__setstate__(state)


def test_array_states_must_match_their_data() -> None:
    f8 = _build(np.dtype("f8"))
    for state in [
        (1, (1 << 62,), f8, False, b""),
        (1, (2,), f8, False, b"x" * 8),
        (1, (-1,), f8, False, b""),
        (1, (1,) * 40, f8, False, b"x" * 8),
        (1, (1,), f8, 0, b"x" * 8),
        (1, (1,), 7, False, b"x" * 8),
        (1, (1,), f8, False, [object()]),
    ]:
        with pytest.raises(pickle.UnpicklingError):
            guard.standin_reconstruct(guard.NdarrayName, (0,), b"b").__setstate__(state)
    with pytest.raises(pickle.UnpicklingError):
        guard.NdarrayName((1 << 62,), f8)  # numpy.ndarray(...) itself is never callable
    with pytest.raises(pickle.UnpicklingError):
        guard.standin_reconstruct(guard.NdarrayName, (1 << 62,), b"b")
    with pytest.raises(pickle.UnpicklingError):
        guard.standin_scalar(f8, b"abc")


def _array(values: list[float]) -> guard.ArrayBuilder:
    a = np.array(values)
    builder = guard.standin_reconstruct(guard.NdarrayName, (0,), b"b")
    builder.__setstate__((1, a.shape, _build(a.dtype), False, a.tobytes()))
    return builder


def _root() -> dict:
    shared = _array([1.0, 2.0])
    cyclic: list = [shared]
    cyclic.append(cyclic)
    return {"a": shared, "b": (shared, 3), "c": cyclic, "d": {1, 2}, "e": [[[_array([4.0])]]]}


def test_resolve_swaps_builders_keeping_identity_cycles_and_tuples() -> None:
    mark = guard.begin()
    root = _root()
    out = guard.resolve(root, mark)
    assert out is root and type(root["a"]) is np.ndarray
    assert root["b"][0] is root["a"] and root["c"][0] is root["a"] and root["c"][1] is root["c"]
    assert root["e"][0][0][0][0] == 4.0


def test_a_builder_left_anywhere_else_is_refused() -> None:
    class Holder:  # e.g. a tensor's or an OrderedDict's attributes, which resolve does not walk
        pass

    mark = guard.begin()
    holder = Holder()
    holder.leak = _array([1.0])
    with pytest.raises(pickle.UnpicklingError, match="where numpy never writes it"):
        guard.resolve({"h": holder, "ok": _array([2.0])}, mark)


def test_resolve_is_iterative_and_a_no_op_when_nothing_was_built() -> None:
    mark = guard.begin()
    root: list = []
    node = root
    for _ in range(100_000):
        node.append([])
        node = node[0]
    assert guard.resolve(root, mark) is root  # nothing built: not even walked
    mark = guard.begin()
    node.append(_array([5.0]))
    guard.resolve(root, mark)  # 100,000 deep: no RecursionError
    assert type(node[0]) is np.ndarray


def test_builders_refuse_to_be_hashed_like_arrays() -> None:
    with pytest.raises(pickle.UnpicklingError):
        {_array([1.0])}
    assert sorted(set(_array([2.0, 1.0]))) == [1.0, 2.0]  # iterating gives the vetted values
