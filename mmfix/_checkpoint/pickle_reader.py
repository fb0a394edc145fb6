"""Reading a checkpoint's pickle without building anything it describes.

Used where a file was refused or looks damaged, by auto-resume's checks and by
``mmfix inspect``: all places that must never run, hash, print or allocate what
an attacker wrote. The opcodes are parsed by ``pickletools.genops`` and executed
on a symbolic stack of tokens: plain values stay plain (bytes and str, already
read from the file), containers are lists of tokens (never hashed, so a tuple DAG
used as a dict key costs nothing), globals and calls are records. Work and memory
are linear in the number of opcodes, which is capped, as are the bytes read and
the time spent; the memo is a dict, so a huge memo index allocates nothing. A
reading that stops short of the pickle's end for any reason but a break in its
structure is ``CheckIncomplete``, which the loader refuses (see ``read``).

Besides the globals and storages, it checks statically what mmfix's stand-ins
check at load time (numpy dtypes and arrays, getattr, HistoryBuffer statistics),
with the same validators, so ``mmfix inspect`` gives the loader's verdict.
"""

from __future__ import annotations

import _compat_pickle
import io
import pickle
import pickletools
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from . import numpy_guard
from .pickle_cost import (
    ROW_BYTES,
    ROW_WORK,
    CheckIncomplete,
    Cost,
    PickleDamaged,
    PickleTooCostly,
    PickleUnreadable,
    TensorToken,
    numel,
)

__all__ = ["CheckIncomplete", "Cost", "PickleDamaged", "PickleTooCostly", "PickleUnreadable", "Reading", "read"]

MAX_OPS = 1_000_000  # ~50x the opcodes of a large MMEngine checkpoint's pickle
MAX_BYTES = 64 << 20
MAX_SECONDS = 20.0
_MAX_PROBLEMS = 5
_STATISTICS = ("min", "max", "current", "mean")
_HISTORY_BUFFER = "mmengine.logging.history_buffer.HistoryBuffer"
_RECONSTRUCT = {f"{m}._reconstruct" for m in ("numpy.core.multiarray", "numpy._core.multiarray")}
_SCALAR = {f"{m}.scalar" for m in ("numpy.core.multiarray", "numpy._core.multiarray")}


@dataclass(eq=False)
class Global:
    name: str


@dataclass(eq=False)
class Call:
    func: Any
    args: Any
    built: bool = False
    state: Any = None  # what BUILD gave it (torch keeps it in the object)
    items: list[Any] | None = None  # what SETITEM(S) put in it (an OrderedDict keeps it)
    #: set(x), frozenset(x), Counter(x), OrderedDict(x): the container x whose members it holds
    #: (x itself never such a call: set(set(L)) holds L's), so that iterating it is priced
    base: Any = None


@dataclass(eq=False)
class Dict:
    items: list[tuple[Any, Any]] = field(default_factory=list)


@dataclass(eq=False)
class List:
    items: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class Storage:
    pid: Any


@dataclass(eq=False)
class Dtype:
    spec: str
    itemsize: int = 0
    built: bool = False


@dataclass(eq=False)
class Array:
    built: bool = False
    rows: int = 0  # what iterating it yields (its leading dimension), once built


@dataclass(eq=False)
class Opaque:
    what: str


class _Mark:
    pass


_MARK = _Mark()


@dataclass
class Reading:
    globals: Counter = field(default_factory=Counter)
    storages: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    root: Any = None
    ops: int = 0
    #: persistent ids not in the one form torch.save writes, ("storage", <a global>, <str key>,
    #: <str location>, <int numel>): how mmfix knows ``storages`` holds every storage exactly
    unusual_storages: int = 0
    # ('storage', type, key, location, numel), plus view metadata in the legacy (pre-1.6) format
    pid_items: int = 5
    #: what loading it would cost torch's unpickler (see pickle_cost); shared by the pickles of one file
    cost: Cost | None = None
    #: bounds on the reader itself; None: the defaults, or proportional to the pickle where ``cost``
    #: is given (the loader's check must read any pickle torch would, in time proportional to it)
    max_ops: int | None = None
    max_seconds: float | None = None


def read(stream: io.BytesIO, reading: Reading | None = None) -> Reading:
    """Read one pickle from ``stream`` (in memory, at most MAX_BYTES: callers read it in one
    go), leaving it just after the pickle's STOP.

    Fails closed: ``PickleDamaged`` only where the pickle's structure breaks (see
    ``structure_break``) at or before the opcode where the reading stopped, so that torch's
    unpickler stops there too, with everything before charged; any other end of the reading
    (its bounds, its clock, a MemoryError, a structure it cannot follow) is ``CheckIncomplete``."""
    reading = reading or Reading()
    start = stream.tell()
    with stream.getbuffer() as view:
        size = len(view)
    if reading.cost is None:
        reading.cost = Cost(pickle_bytes=size, file_bytes=size)
    max_ops = reading.max_ops or MAX_OPS
    seconds = reading.max_seconds or MAX_SECONDS
    machine = _Machine(reading)
    # This thread's CPU time: a busy machine slows the check without refusing a good file.
    deadline = time.thread_time() + seconds
    reading.cost.deadline = deadline
    next_check = 0
    index = -1  # the opcode being followed
    stepping = False
    # The garbage collector stays on (switching it off is process-wide: other threads run
    # meanwhile). CPython collects the oldest generation only once it has grown by a quarter,
    # so hundreds of thousands of live tokens cost a constant factor (about 2.5x here), not a
    # square; the opcode and time bounds above hold either way.
    try:
        for opcode, arg, _pos in pickletools.genops(stream):
            index += 1
            reading.ops += 1
            if reading.ops > max_ops:
                raise CheckIncomplete(
                    f"its pickle has more than {max_ops:,} opcodes, more than the check follows, so the check "
                    "could not bound it"
                )
            if reading.ops >= next_check:
                next_check = reading.ops + 1024
                if time.thread_time() > deadline:
                    raise CheckIncomplete(
                        f"reading its pickle took more than {seconds:.0f} s of CPU time, so the check could not "
                        "bound it"
                    )
            stepping = True
            machine.step(opcode.name, arg)
            stepping = False
            if opcode.name == "STOP":
                break
        else:
            index += 1
            raise ValueError("its pickle ends without a STOP opcode (it is truncated)")
    except (PickleTooCostly, PickleDamaged):  # CheckIncomplete included
        raise
    except (MemoryError, RecursionError) as exc:
        raise CheckIncomplete(
            f"the check ran out of {type(exc).__name__[:-5].lower()}, so it could not bound it"
        ) from None
    except Exception as exc:
        at = index if stepping else index + 1
        if not isinstance(exc, PickleUnreadable):
            exc = PickleUnreadable(f"its pickle is damaged ({type(exc).__name__}: {str(exc)[:200]})")
        with stream.getbuffer() as view:
            broken = structure_break(view[start:])
        if broken is not None and broken <= at:
            raise PickleDamaged(str(exc)) from None
        raise CheckIncomplete(
            f"the check cannot follow its pickle ({str(exc)[:200]}) though its structure is whole there, so it "
            "could not bound it"
        ) from None
    return reading


def structure_break(data: Any) -> int | None:
    """The index of the first opcode at which torch's unpickler must stop whatever the values
    (an opcode it does not read, a truncated argument, a memo entry never stored, a stack or
    MARK underflow, no STOP), or None: a scan of the opcodes and stack depths only, linear in
    the pickle, that builds nothing."""
    depth = 0
    marks: list[int] = []
    memo: set[Any] = set()
    index = -1
    try:
        for opcode, arg, _pos in pickletools.genops(io.BytesIO(data)):
            index += 1
            name = opcode.name
            if name not in TORCH_OPCODES:
                return index
            before = opcode.stack_before
            if name == "MARK":
                marks.append(depth)
                depth = 0
                continue
            if pickletools.markobject in before:
                if not marks:
                    return index
                depth = marks.pop() - before.index(pickletools.markobject)
            else:
                depth -= len(before)
            if depth < 0:
                return index
            depth += len(opcode.stack_after)
            if name in _PUT:
                if depth < 1:
                    return index
                memo.add(arg)
            elif name in _GET and arg not in memo:
                return index
            elif name == "STOP":
                return None
        return index + 1
    except MemoryError:
        raise  # the scan's own failure is no damage of the file's
    except Exception:
        return index + 1


_PUSH_ARG = frozenset(
    (
        "INT",
        "BININT",
        "BININT1",
        "BININT2",
        "LONG",
        "LONG1",
        "LONG4",
        "FLOAT",
        "BINFLOAT",
        "STRING",
        "BINSTRING",
        "SHORT_BINSTRING",
        "BINBYTES",
        "SHORT_BINBYTES",
        "BINBYTES8",
        "UNICODE",
        "BINUNICODE",
        "SHORT_BINUNICODE",
        "BINUNICODE8",
    )
)
# The opcodes torch's weights_only unpickler reads (torch.save writes protocol 2 with these);
# any other is refused by the loader ("Unsupported operand"), so the reader says so too.
# A unit test compares this with the installed torch.
TORCH_OPCODES = frozenset(
    (
        "APPEND",
        "APPENDS",
        "BINFLOAT",
        "BINGET",
        "BININT",
        "BININT1",
        "BININT2",
        "BINPERSID",
        "BINPUT",
        "BINUNICODE",
        "BUILD",
        "EMPTY_DICT",
        "EMPTY_LIST",
        "EMPTY_SET",
        "EMPTY_TUPLE",
        "GLOBAL",
        "LONG1",
        "LONG_BINGET",
        "LONG_BINPUT",
        "MARK",
        "NEWFALSE",
        "NEWOBJ",
        "NEWTRUE",
        "NONE",
        "PROTO",
        "REDUCE",
        "SETITEM",
        "SETITEMS",
        "SHORT_BINSTRING",
        "STOP",
        "TUPLE",
        "TUPLE1",
        "TUPLE2",
        "TUPLE3",
    )
)
_PUT = frozenset(("PUT", "BINPUT", "LONG_BINPUT"))
# Calls that iterate their argument and hash its members.
_HASHING_CALLS = frozenset(("builtins.set", "builtins.frozenset", "collections.Counter", "collections.OrderedDict"))
# torch.Tensor and the legacy tensor classes (torch.FloatTensor(n) allocates n elements).
_TENSOR_CLASS = re.compile(r"torch(\.cuda|\.sparse)?\.[A-Za-z0-9]*Tensor")
_STORAGE_CLASSES = frozenset(("torch.storage.UntypedStorage", "torch.storage.TypedStorage"))
_REBUILD_VIEW = frozenset(f"torch._utils._rebuild_tensor{v}" for v in ("", "_v2", "_v3"))
_GET = frozenset(("GET", "BINGET", "LONG_BINGET"))


class _Machine:
    def __init__(self, reading: Reading) -> None:
        self.r = reading
        self.stack: list[Any] = []
        self.metastack: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.buffers: list[Call] = []
        self.foreign: set[str] = set()
        assert reading.cost is not None
        self.cost: Cost = reading.cost
        # id(call) -> (call, what it rebuilds): the tensors the unpickler would make
        self.tensors: dict[int, tuple[Any, TensorToken]] = {}
        # Memos of what the checker worked out once, each entry holding its token (ids stay
        # unique). Tree sizes are recomputed after any list grows (a shared sub-list may have).
        self._tree_sizes: dict[int, tuple[Any, int]] = {}
        self._tree_epoch = 0
        self._mutations = 0
        self._tuple_arrays: dict[tuple[int, bool], tuple[tuple[Any, ...], bool]] = {}
        # id(state) -> (state, the mutation count then, whether it holds numpy data)
        self._state_arrays: dict[int, tuple[Any, int, bool]] = {}
        # id(members) -> (members, how many, work hashing them cost): set(L) of one memoised L
        # reused many times is charged in full each time but worked out once.
        self._hashed: dict[int, tuple[Any, int, int]] = {}
        # id(text) -> (text, whether latin-1 holds it): one memoised string encoded many times is
        # scanned once (each scan of a megabyte string is ~10 ms; a 1 MB file that encodes its
        # one string 3,000 times took the check 3.7 s before the memory budget refused it).
        self._latin1: dict[int, tuple[str, bool]] = {}

    def _latin1_holds(self, text: str) -> bool:
        known = self._latin1.get(id(text))
        if known is None:
            known = self._latin1[id(text)] = (text, text.isascii() or max(text) <= "\xff")
        return known[1]

    def finish(self) -> None:
        """What mmfix checks once a load has ended (see ``escapes``): every HistoryBuffer got its
        state, and no stand-in is held as a value where the caller would get it."""
        if any(not buffer.built for buffer in self.buffers):
            self.problem(
                "it creates a HistoryBuffer without its state; MMEngine always writes a buffer together with its state"
            )
        for name in _standins_held(self.r.root):
            self.problem(f"it holds the global {name} itself as a value, where the caller would get mmfix's stand-in")

    def problem(self, text: str) -> None:
        if len(self.r.problems) < _MAX_PROBLEMS:
            self.r.problems.append(text)

    def pop_mark(self) -> list[Any]:
        items = self.stack
        if not self.metastack:
            raise ValueError("MARK missing")
        self.stack = self.metastack.pop()
        return items

    def step(self, name: str, arg: Any) -> None:
        stack = self.stack
        if name not in TORCH_OPCODES and name not in self.foreign:
            self.foreign.add(name)
            self.problem(f"it uses the pickle opcode {name}, which torch's safe loader does not read")
        if name in _PUSH_ARG:
            stack.append(arg)
        elif name in _PUT:
            self.memo[arg] = stack[-1]
        elif name in _GET:
            stack.append(self.memo[arg])
        elif name == "MARK":
            self.metastack.append(stack)
            self.stack = []
        elif name in ("PROTO", "FRAME"):
            return
        elif name == "STOP":
            self.r.root = stack.pop()
            self.finish()
        elif name == "BYTEARRAY8":
            stack.append(numpy_guard.ByteCount(len(arg)))  # bytes all the same to numpy's checks
        elif name == "NONE":
            stack.append(None)
        elif name in ("NEWTRUE", "NEWFALSE"):
            stack.append(name == "NEWTRUE")
        elif name == "EMPTY_TUPLE":
            stack.append(())
        elif name == "EMPTY_LIST":
            stack.append(List())
        elif name == "EMPTY_DICT":
            stack.append(Dict())
        elif name == "EMPTY_SET":
            stack.append(List())
        elif name in ("TUPLE", "LIST", "DICT", "FROZENSET"):
            items = self.pop_mark()
            if name == "TUPLE":
                value: Any = tuple(items)
            elif name == "DICT":
                value = Dict(list(zip(items[::2], items[1::2])))
            else:
                value = List(items)
            self.stack.append(value)
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            if len(stack) < n:
                raise IndexError("stack underflow")
            items = stack[-n:]
            del stack[-n:]
            stack.append(tuple(items))
        elif name == "APPEND":
            item = stack.pop()
            self._append(stack[-1], [item])
        elif name in ("APPENDS", "ADDITEMS"):
            items = self.pop_mark()
            self._append(self.stack[-1], items)
        elif name == "SETITEM":
            value, key = stack.pop(), stack.pop()
            self._setitems(stack[-1], [key, value])
        elif name == "SETITEMS":
            items = self.pop_mark()
            self._setitems(self.stack[-1], items)
        elif name == "POP":
            stack.pop()
        elif name == "POP_MARK":
            self.pop_mark()
        elif name == "DUP":
            stack.append(stack[-1])
        elif name == "MEMOIZE":
            self.memo[len(self.memo)] = stack[-1]
        elif name == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            stack.append(self._global(module, attr))
        elif name == "STACK_GLOBAL":
            attr, module = stack.pop(), stack.pop()
            if not isinstance(module, str) or not isinstance(attr, str):
                raise TypeError("STACK_GLOBAL needs two strings")
            stack.append(self._global(module, attr))
        elif name == "INST":
            module, _, attr = str(arg).partition(" ")
            args = tuple(self.pop_mark())
            self.stack.append(self._call(self._global(module, attr), args))
        elif name == "OBJ":
            items = self.pop_mark()
            if not items:
                raise IndexError("OBJ without a class")
            self.stack.append(self._call(items[0], tuple(items[1:])))
        elif name == "REDUCE":
            args = stack.pop()
            stack[-1] = self._call(stack[-1], args)
        elif name in ("NEWOBJ", "NEWOBJ_EX"):
            if name == "NEWOBJ_EX":
                stack.pop()
            args = self._unpacked(stack.pop(), stack[-1])
            cls = stack.pop()
            if isinstance(cls, Global) and cls.name in numpy_guard.NAMES:
                self.problem(f"it creates {cls.name} with NEWOBJ; numpy never writes that")
            tensor = self._charge_call(cls, args)  # cls.__new__(cls, *args): a tensor class allocates
            made = Call(cls, args)
            if tensor is not None:
                self.tensors[id(made)] = (made, tensor)
            if isinstance(cls, Global) and cls.name == _HISTORY_BUFFER:
                self.buffers.append(made)  # each must get its state (see finish)
            stack.append(made)
        elif name == "BUILD":
            state = stack.pop()
            self._build(stack[-1], state)
        elif name in ("PERSID", "BINPERSID"):
            pid = arg if name == "PERSID" else stack.pop()
            self._storage(pid)
            stack.append(Storage(pid))
        elif name in ("EXT1", "EXT2", "EXT4"):
            self.problem("it uses the copyreg extension registry (EXT opcodes), which torch's loader refuses")
            stack.append(Opaque("extension"))
        elif name in ("NEXT_BUFFER", "READONLY_BUFFER"):
            raise ValueError(f"{name} needs out-of-band buffers, which a checkpoint cannot have")
        else:
            raise ValueError(f"unknown opcode {name}")

    def _global(self, module: str, attr: str) -> Global:
        if len(module) + len(attr) > 1024:
            raise PickleUnreadable("it names a global longer than 1 KiB; no module or class has such a name")
        if (module, attr) in _compat_pickle.NAME_MAPPING:
            module, attr = _compat_pickle.NAME_MAPPING[(module, attr)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        name = f"{module}.{attr}"
        self.r.globals[name] += 1
        return Global(name)

    def _append(self, target: Any, items: list[Any]) -> None:
        if isinstance(target, List):
            self._mutations += 1
            target.items.extend(items)
        elif not isinstance(target, (Call, Opaque)):
            raise TypeError(f"APPEND to a {type(target).__name__}")

    def _setitems(self, target: Any, items: list[Any]) -> None:
        if len(items) % 2:
            raise IndexError("odd number of items for SETITEMS")
        if any(isinstance(key, (Array, Dtype)) for key in items[::2]):
            # The loader's stand-ins refuse to be hashed, as numpy's arrays do.
            self.problem("a numpy array or dtype is used as a dict key")
        if isinstance(target, (Dict, Call)):
            table = self.cost.table_for(target)
            for key in items[::2]:
                self.cost.insert(table, self._tensor(key) or key, "hashing dict keys")
        self._mutations += 1
        if isinstance(target, Dict):
            target.items.extend(zip(items[::2], items[1::2]))
        elif isinstance(target, Call):
            if target.items is None:
                target.items = []
            target.items.extend(items)
        elif not isinstance(target, Opaque):
            raise TypeError(f"SETITEM on a {type(target).__name__}")

    def _storage(self, pid: Any) -> None:
        if not (isinstance(pid, tuple) and len(pid) == self.r.pid_items and pid[0] == "storage"):
            # torch reads ('storage', storage type, key, location, numel[, view]) and nothing else.
            self.problem(f"it references a storage by an id torch cannot read ({label(pid)})")
            self.r.unusual_storages += 1
            return
        if not (
            len(pid) == 5
            and isinstance(pid[1], Global)
            and all(isinstance(part, str) for part in pid[2:4])
            and type(pid[4]) is int
        ):
            self.r.unusual_storages += 1
        if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage":
            _, storage_type, key, location, numel = pid[:5]
            type_name = storage_type.name if isinstance(storage_type, Global) else type(storage_type).__name__
            self.r.storages.append(
                {
                    "key": label(key),
                    "location": label(location),
                    "type": type_name.rsplit(".", 1)[-1],
                    "numel": numel if type(numel) is int else None,
                }
            )

    def _unpacked(self, args: Any, func: Any) -> tuple[Any, ...]:
        """What ``func(*args)`` passes: the unpickler unpacks any iterable (pickle writes a tuple;
        a list or a dict's keys work as well). Anything else is an iterable the check cannot price
        unpacking (a tensor view yields its rows), or none at all: refused (fail closed)."""
        if isinstance(args, tuple):
            return args
        if isinstance(args, (List, Dict)):
            members = self._members(args)
            self.cost.charge(work=len(members), what="unpacking call arguments")
            return tuple(members)
        name = func.name if isinstance(func, Global) else "a callable"
        raise CheckIncomplete(
            f"it calls {name} with arguments given as a {type(args).__name__.lower()}, not a tuple or list, so the "
            "check could not bound it"
        )

    def _call(self, func: Any, args: Any) -> Any:
        args = self._unpacked(args, func)
        tensor = self._charge_call(func, args)  # before any of the checks below loops over args
        made = self._checked_call(func, args)
        if isinstance(made, Call) and isinstance(func, Global) and func.name in _HASHING_CALLS and args:
            inner = args[0]
            made.base = inner.base if isinstance(inner, Call) and inner.base is not None else inner
        if tensor is not None:
            self.tensors[id(made)] = (made, tensor)
        return made

    def _holds_array(self, state: Any) -> bool:
        """Whether numpy data sits in a BUILD's state: an entry, or in a tuple among its entries
        (or one level further). Charged per entry; each tuple is looked through once (memoised),
        so one big tuple shared by many states costs its length once, not at every state."""
        items = state.items if isinstance(state, Dict) else state if isinstance(state, tuple) else ()
        self.cost.charge(work=len(items), what="looking for numpy data in object states")
        # Charged in full each time (the loader does that work each time), looked through once while
        # nothing changed: one 50,000-key state BUILT again and again took the check seconds of
        # Python before its budget refused the file.
        hit = self._state_arrays.get(id(state))
        if hit is not None and hit[0] is state and hit[1] == self._mutations:
            return hit[2]
        found = any(
            isinstance(kv, Array) or (isinstance(kv, tuple) and self._tuple_holds_array(kv, True)) for kv in items
        )
        self._state_arrays[id(state)] = (state, self._mutations, found)
        return found

    def _tuple_holds_array(self, tup: tuple[Any, ...], deep: bool) -> bool:
        hit = self._tuple_arrays.get((id(tup), deep))
        if hit is not None and hit[0] is tup:
            return hit[1]
        self.cost.charge(work=len(tup), what="looking for numpy data in object states")
        found = any(
            isinstance(x, Array) or (deep and isinstance(x, tuple) and self._tuple_holds_array(x, False)) for x in tup
        )
        self._tuple_arrays[(id(tup), deep)] = (tup, found)
        return found

    @staticmethod
    def _priced_numel(size: Any, short: str) -> int:
        """The elements of a tensor ``short`` rebuilds with ``size``; a size the check cannot read
        as ints (whatever torch may make of it) is refused, never priced as nothing (fail closed)."""
        elements = numel(dims(size))
        if elements is None:
            raise CheckIncomplete(
                f"it calls {short}() with a size that is not a tuple of non-negative ints (a "
                f"{type(size).__name__.lower()}), so the check could not bound it"
            )
        return elements

    def _tensor(self, token: Any) -> TensorToken | None:
        hit = self.tensors.get(id(token))
        return hit[1] if hit is not None and hit[0] is token else None

    @staticmethod
    def _members(token: Any) -> Any:
        """What iterating a container token yields (a dict: its keys), or None."""
        if isinstance(token, List):
            return token.items
        if isinstance(token, tuple):
            return token
        if isinstance(token, Dict):
            return [k for k, _ in token.items]
        if isinstance(token, Call) and token.base is not None:
            inner = _Machine._members(token.base) or ()
            return list(inner) + token.items[::2] if token.items else inner
        if isinstance(token, Call) and token.items is not None:
            return token.items[::2]
        if _is_size(token):
            return dims(token)  # torch.Size(t) iterates as t's ints
        return None

    def _length(self, token: Any) -> int:
        if isinstance(token, Dict):
            return len(token.items)
        members = self._members(token)
        if members is not None:
            return len(members)
        tensor = self._tensor(token)
        if tensor is not None:
            return tensor.rows * ROW_WORK
        if isinstance(token, Array):
            return token.rows * ROW_WORK
        if isinstance(token, (str, bytes, numpy_guard.ByteCount)):
            return len(token)
        if isinstance(token, Storage):
            return _storage_elements(token) * STORAGE_ELEMENT_WORK
        return 0

    def _row_memory(self, token: Any) -> int:
        """Iterating a tensor or an array makes a Python object per row, all held at once
        (torch.Size and set() list them first)."""
        tensor = self._tensor(token)
        if isinstance(token, Storage):
            return _storage_elements(token) * STORAGE_ELEMENT_BYTES
        rows = tensor.rows if tensor is not None else token.rows if isinstance(token, Array) else 0
        return rows * ROW_BYTES

    def _tree_size(self, token: Any) -> int:
        """Elements of nested lists and tuples counted as a tree (what torch.Tensor(data) walks):
        memoised per token, so a shared sub-list costs its size at each use but is walked once."""
        if self._tree_epoch != self._mutations:
            self._tree_sizes.clear()
            self._tree_epoch = self._mutations
        stack: list[tuple[Any, bool]] = [(token, False)]
        sizes = self._tree_sizes
        while stack:
            node, children_done = stack.pop()
            members = self._members(node) if isinstance(node, (List, tuple)) or _is_size(node) else None
            if members is None or id(node) in sizes:
                continue
            if not children_done:
                stack.append((node, True))
                stack.extend(
                    (m, False) for m in members if (isinstance(m, (List, tuple)) or _is_size(m)) and id(m) not in sizes
                )
                continue
            total = 1
            for m in members:
                total += sizes[id(m)][1] if id(m) in sizes and sizes[id(m)][0] is m else 1
            sizes[id(node)] = (node, min(total, 1 << 62))
            self.cost.charge(work=len(members), what="walking nested lists")
        hit = sizes.get(id(token))
        return hit[1] if hit is not None else 1

    def _charge_call(self, func: Any, args: Any) -> TensorToken | None:
        """Charge what calling ``func(*args)`` makes the unpickler do; the tensor it rebuilds, if any."""
        name = func.name if isinstance(func, Global) else None
        if name is None or not isinstance(args, tuple):
            return None
        cost = self.cost
        first = args[0] if args else None
        short = name.rsplit(".", 1)[-1]
        if name in _HASHING_CALLS:
            # n elements iterated: charged before anything here loops over them.
            n = self._length(first)
            cost.charge(work=n, memory=self._row_memory(first), what=f"{short}() of {n:,} elements")
            done = self._hashed.get(id(first))
            if done is not None and done[0] is first and done[1] == n:
                cost.charge(work=done[2], what=f"hashing the members of {short}()")
                return None
            keys: Any
            if name == "collections.OrderedDict" and not isinstance(first, Dict):
                pairs = self._members(first) or ()
                keys = [p[0] for p in pairs if isinstance(p, tuple) and len(p) == 2]
            else:
                keys = self._members(first) or ()
            before = cost.work
            table: dict[Any, set[Any]] = {}  # dropped on return: the unpickler's set is its own
            for key in keys:
                cost.insert(table, self._tensor(key) or key, f"hashing the members of {short}()", kept=False)
            if isinstance(first, (List, tuple, Dict)):
                self._hashed[id(first)] = (first, n, cost.work - before)
            return None
        if name == "torch.Size":
            n = self._length(first)
            cost.charge(work=n, memory=self._row_memory(first), what=f"torch.Size() of {n:,} elements")
            return None
        if name == "builtins.bytearray":
            if type(first) is int:
                cost.charge(memory=max(first, 0), what=f"bytearray({first:,})")
            elif first is not None:
                n = self._length(first)
                cost.charge(work=n, memory=n + self._row_memory(first), what=f"bytearray() of {n:,} elements")
            return None
        if name == "_codecs.encode":
            if len(args) == 2 and isinstance(first, str) and args[1] in ("latin1", "latin-1"):
                # scanned, then copied into a bytes object the unpickler keeps (it has no POP)
                cost.charge(work=1 + len(first) // 64, memory=len(first), what="_codecs.encode(..., 'latin1')")
            else:
                codec = args[1] if len(args) > 1 and isinstance(args[1], str) else "?"
                raise PickleTooCostly(
                    f"it encodes with _codecs.encode(..., {label(codec)!r}); torch.save only ever encodes text as "
                    "latin1, and other codecs double their input or take time quadratic in it"
                )
            return None
        if name == "builtins.complex":
            cost.charge(work=self._length(first) // 64)
            return None
        if _TENSOR_CLASS.fullmatch(name) or name in _STORAGE_CLASSES:
            # torch.FloatTensor(n, m) and FloatTensor(torch.Size(...)) allocate n*m elements (a
            # bool is an int there); FloatTensor(data) one per element of nested data.
            shape = dims(args) if args and all(type(a) in (int, bool) for a in args) else None
            if shape is None and len(args) == 1 and _is_size(first):
                shape = dims(first)
            if shape is not None:
                elements = numel(shape)
                if elements is None:
                    raise CheckIncomplete(f"it calls {short}() with a negative size, so the check could not bound it")
                cost.charge(work=len(shape), memory=elements * 8, what=f"{short}({', '.join(map(str, shape[:4]))})")
                return TensorToken(elements, shape[0] if len(shape) > 1 else elements, elements)
            n = sum(
                self._tree_size(a) if isinstance(a, (List, tuple)) or _is_size(a) else self._length(a) for a in args
            )
            cost.charge(work=n, memory=n * 8, what=f"{short}() of {n:,} nested elements")
            return TensorToken(n, self._length(first) if args else 0, n)
        if name in _REBUILD_VIEW:
            size = args[2] if len(args) > 2 else None
            elements = self._priced_numel(size, short)
            storage = first
            pid = storage.pid if isinstance(storage, Storage) else None
            stored = pid[4] if isinstance(pid, tuple) and len(pid) >= 5 and type(pid[4]) is int else 0
            token = TensorToken(elements, _rows(size), min(elements, max(stored, 0)))
            # A view with more elements than its storage holds overlaps itself (zero strides): free
            # to make, but whatever iterates or copies it pays for every element.
            cost.charge(
                work=(elements - token.backed) // 16,
                what=f"a tensor view of {elements:,} elements over {stored:,} stored",
            )
            return token
        if name in ("torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state"):
            return self._tensor(first)
        if name == "torch.nn.parameter.Parameter":
            return self._tensor(first)
        if name == "torch._tensor._rebuild_from_type_v2" and len(args) >= 3:
            return self._charge_call(first, args[2])  # it calls func(*args)
        if name == "torch._utils._rebuild_device_tensor_from_cpu_tensor":
            tensor = self._tensor(first)
            if tensor is None:
                return None
            excess = tensor.numel - tensor.backed  # .to(dtype, device) materialises every element
            cost.charge(
                work=excess // 16, memory=excess * 8, what=f"copying a tensor view of {tensor.numel:,} elements"
            )
            return TensorToken(tensor.numel, tensor.rows, tensor.numel)
        if name == "torch._utils._rebuild_qtensor":
            quantized = self._priced_numel(args[2] if len(args) > 2 else None, short)
            cost.charge(memory=quantized * 4, what=f"a quantized tensor of {quantized:,} elements")
            return TensorToken(quantized, _rows(args[2]), quantized)
        if name in ("torch._utils._rebuild_sparse_tensor", "torch._utils._rebuild_nested_tensor"):
            parts = [a for arg in args for a in (arg if isinstance(arg, tuple) else (arg,))]
            for part in parts:
                tensor = self._tensor(part)
                if tensor is not None:  # checked (and, nested, iterated) element by element
                    excess = tensor.numel - tensor.backed
                    cost.charge(work=excess // 16, memory=excess * 8, what=f"validating a {short[9:]}")
            return None
        if name in ("torch._utils._rebuild_meta_tensor_no_storage", "torch._utils._rebuild_wrapper_subclass"):
            size = args[1] if name.endswith("no_storage") and len(args) > 1 else args[2] if len(args) > 2 else None
            meta = self._priced_numel(size, short)
            return TensorToken(meta, _rows(size), meta)  # nothing allocated; rows iterate
        return None

    # What mmfix's stand-ins would say at load time, said without building anything.
    def _checked_call(self, func: Any, args: Any) -> Any:
        name = func.name if isinstance(func, Global) else None
        try:
            if name == "_codecs.encode":
                if isinstance(args, tuple) and len(args) == 2 and isinstance(args[0], str) and args[1] == "latin1":
                    if args[0] and not self._latin1_holds(args[0]):
                        self.problem("it encodes text as latin-1 that latin-1 cannot hold")
                        return Opaque("bytes")
                    # Small ones (type codes, scalars) are checked exactly; large ones only by length.
                    return args[0].encode("latin-1") if len(args[0]) <= 64 else numpy_guard.ByteCount(len(args[0]))
            elif name == "numpy.dtype":
                spec = numpy_guard.check_dtype_args(args)
                size = int(re.sub(r"\D", "", spec))
                return Dtype(spec, size * 4 if spec[0] == "U" else size)
            elif name in _RECONSTRUCT:
                if not (
                    isinstance(args, tuple)
                    and len(args) == 3
                    and isinstance(args[0], Global)
                    and args[0].name == "numpy.ndarray"
                ):
                    raise numpy_guard._refuse("_reconstruct is not called as numpy writes it")
                numpy_guard.check_reconstruct_args(args, args[0])
                return Array()
            elif name == _HISTORY_BUFFER:
                self.problem(
                    "it calls HistoryBuffer(...) with arguments; MMEngine writes it as an empty object plus its state"
                )
            elif name in _SCALAR:
                if not (
                    isinstance(args, tuple)
                    and len(args) == 2
                    and isinstance(args[0], Dtype)
                    and isinstance(args[1], (bytes, numpy_guard.ByteCount))
                ):
                    raise numpy_guard._refuse("a numpy scalar is not written as (dtype, bytes)")
                if not args[0].built:
                    raise numpy_guard._refuse("a scalar's dtype is used before its state was given")
                if len(args[1]) != args[0].itemsize:
                    raise numpy_guard._refuse(f"a {args[0].spec} scalar has {len(args[1])} bytes")
            elif name == "torch._utils._rebuild_tensor_v2":
                if not _tensor_v2_args(args):
                    self.problem(
                        "a tensor is rebuilt from arguments of types torch.save never writes (storage, offset, "
                        "size, stride, requires_grad, hooks); torch's own rebuild refuses them"
                    )
            elif name == "torch._tensor._rebuild_from_type_v2":
                if isinstance(args, tuple) and len(args) == 4 and self._holds_array(args[3]):
                    raise numpy_guard._refuse(
                        "it puts numpy data in a tensor's attributes, where numpy never writes it"
                    )
            elif name == "builtins.bytearray":
                requested = args[0] if isinstance(args, tuple) and len(args) == 1 else None
                if type(requested) is int and requested > MAX_BYTES:
                    self.problem(
                        f"it asks bytearray() for {requested:,} bytes, which no checkpoint holds; loading "
                        "it may exhaust this machine's memory"
                    )
                # What the loader's bytearray() makes of plain arguments: bytes of a known length.
                if args == ():
                    return numpy_guard.ByteCount(0)
                if type(requested) is int and requested >= 0:
                    return numpy_guard.ByteCount(requested)
                if isinstance(requested, (bytes, numpy_guard.ByteCount)):
                    return numpy_guard.ByteCount(len(requested))
            elif name == "builtins.set":
                members = args[0] if isinstance(args, tuple) and len(args) == 1 else None
                items = members.items if isinstance(members, List) else members if isinstance(members, tuple) else ()
                if any(isinstance(item, Array) for item in items):
                    raise numpy_guard._refuse("a numpy array is used as a set member")
            elif name == "numpy.ndarray":
                raise numpy_guard._refuse("the file calls numpy.ndarray(...) directly")
            elif name == "builtins.getattr":
                if not (
                    isinstance(args, tuple)
                    and len(args) == 2
                    and isinstance(args[0], Global)
                    and args[0].name == _HISTORY_BUFFER
                    and args[1] in _STATISTICS
                ):
                    self.problem(
                        "it calls getattr on something other than HistoryBuffer.min/max/current/mean, "
                        "which mmfix's restricted getattr refuses"
                    )
                    return Opaque("getattr")
                return Call(func, args)
        except pickle.UnpicklingError as exc:
            self.problem(str(exc).removeprefix("mmfix: "))
            return Opaque("refused")
        return Call(func, args)

    def _build(self, inst: Any, state: Any) -> None:
        # The unpickler sets each of the state's entries (a dict, or a (dict, slots) pair).
        parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
        self.cost.charge(work=sum(len(p.items) for p in parts if isinstance(p, Dict)), what="setting object states")
        if isinstance(inst, Call):
            inst.state = state if inst.state is None else (inst.state, state)
        try:
            if isinstance(inst, Dtype):
                if inst.built:
                    raise numpy_guard._refuse("a dtype is built twice")
                numpy_guard.check_dtype_state(inst.spec, state)
                inst.built = True
            elif isinstance(inst, Array):
                if inst.built:
                    raise numpy_guard._refuse("an array is built twice")
                if not (isinstance(state, tuple) and len(state) == 5 and isinstance(state[2], Dtype)):
                    raise numpy_guard._refuse("an array's state has no numpy dtype")
                if not state[2].built:
                    raise numpy_guard._refuse("an array's dtype is used before its state was given")
                numpy_guard.check_array_state(state, state[2].itemsize)
                inst.built = True
                inst.rows = state[1][0] if state[1] else 0
            elif isinstance(inst, Call) and isinstance(inst.func, Global) and inst.func.name == _HISTORY_BUFFER:
                if inst.built:
                    raise numpy_guard._refuse("a HistoryBuffer's state is set twice")
                inst.built = True
                self._history_buffer_state(state)
            elif isinstance(inst, (Dict, List, tuple, str, bytes, int, float, bool, type(None), Storage)):
                # torch BUILDs only tensors, OrderedDicts and allowlisted types
                self.problem(f"it sets the state of a {type(inst).__name__.lower()}, which torch's loader refuses")
            elif (
                isinstance(inst, Call)
                and isinstance(inst.func, Global)
                and inst.func.name in ("collections.OrderedDict", "collections.Counter")
                and self._holds_array(state)
            ):
                self.problem("it puts numpy data in an OrderedDict's attributes, where numpy never writes it")
        except pickle.UnpicklingError as exc:
            self.problem(str(exc).removeprefix("mmfix: "))

    def _history_buffer_state(self, state: Any) -> None:
        if not isinstance(state, Dict):
            self.problem("a HistoryBuffer's state is not a dict")
            return
        self.cost.charge(work=len(state.items), what="checking HistoryBuffer states")
        methods = None
        for key, value in state.items:
            if key == "statistics_methods":
                methods = value
            elif key in ("_log_history", "_count_history"):
                if not isinstance(value, Array):
                    self.problem(f"a HistoryBuffer's {key} is not a numpy array")
            elif key != "max_length" or type(value) is not int:
                self.problem(f"a HistoryBuffer's state holds {label(key)!r}, which MMEngine never writes")
        if methods is None:
            return
        if isinstance(methods, Dict):
            self.cost.charge(work=len(methods.items), what="checking HistoryBuffer states")
        entries = methods.items if isinstance(methods, Dict) else [(None, methods)]
        for key, value in entries:
            ok = (
                isinstance(value, Call)
                and isinstance(value.func, Global)
                and value.func.name == "builtins.getattr"
                and isinstance(value.args, tuple)
                and len(value.args) == 2
                and isinstance(key, str)
                and value.args[1] == key
            )
            if not ok:
                self.problem(
                    f"it maps the HistoryBuffer statistic {key!r} to something other than the method of "
                    "that name; a load must not change what other buffers compute"
                )


_STANDINS = numpy_guard.NAMES | {_HISTORY_BUFFER, "builtins.getattr"}


def _standins_held(root: Any) -> list[str]:
    """Stand-in globals reachable from ``root`` as values: through containers, and BUILD states
    and call arguments torch keeps as data (not the arguments of the stand-ins themselves)."""
    found: list[str] = []
    seen: set[int] = set()
    stack = [root]
    while stack and len(found) < _MAX_PROBLEMS:
        token = stack.pop()
        if id(token) in seen:
            continue
        seen.add(id(token))
        if isinstance(token, Global):
            if token.name in _STANDINS:
                found.append(token.name)
        elif isinstance(token, tuple):
            stack.extend(token)
        elif isinstance(token, List):
            stack.extend(token.items)
        elif isinstance(token, Dict):
            stack.extend(x for kv in token.items for x in kv)
        elif isinstance(token, Call) and not (isinstance(token.func, Global) and token.func.name in _STANDINS):
            stack.append(token.args)
            stack.append(token.state)
            stack.extend(token.items or ())
    return found


#: Iterating a TypedStorage (set(storage), bytearray(storage) ...) runs Python code per element:
#: about 11 us each under torch 2.x, some 250 of the cost model's units; each yields a number.
STORAGE_ELEMENT_WORK = 256
STORAGE_ELEMENT_BYTES = 64


def _storage_elements(token: Storage) -> int:
    """Elements a storage reference holds, as its persistent id claims (what torch reads); a
    claim the check cannot read is refused, not priced as nothing."""
    pid = token.pid
    claimed = pid[4] if isinstance(pid, tuple) and len(pid) >= 5 else None
    if isinstance(claimed, int) and claimed >= 0:  # bool included: an int to torch
        return int(claimed)
    raise CheckIncomplete(
        "it iterates a storage whose size it does not give as an int, so the check could not bound it"
    )


def _rows(size: Any) -> int:
    items = dims(size) or ()
    return items[0] if items and items[0] > 0 else 0


def _is_size(token: Any) -> bool:
    """A ``torch.Size(t)`` call (how torch.Size pickles itself)."""
    return (
        isinstance(token, Call)
        and isinstance(token.func, Global)
        and token.func.name == "torch.Size"
        and isinstance(token.args, tuple)
        and len(token.args) == 1
        and token.items is None
        and token.state is None
    )


def dims(size: Any) -> tuple[int, ...] | None:
    """A size as torch reads it: a tuple or list of ints, or ``torch.Size`` of one; a bool is
    an int to torch (``(n, True)`` is ``(n, 1)``). None where it is anything else: the caller
    refuses that rather than price it as nothing."""
    if _is_size(size):
        size = size.args[0]
    items = size.items if isinstance(size, List) else size if isinstance(size, tuple) else None
    if items is None or not all(type(n) in (int, bool) for n in items):
        return None
    return tuple(int(n) for n in items)


def _ints(value: Any) -> bool:
    return dims(value) is not None  # torch's rebuild takes lists, torch.Size and bools too


def _tensor_v2_args(args: Any) -> bool:
    """(storage, offset, size, stride, requires_grad, backward_hooks[, metadata]) of the types
    torch's _rebuild_tensor_v2 works with."""
    return (
        isinstance(args, tuple)
        and len(args) in (6, 7)
        and isinstance(args[0], Storage)
        and type(args[1]) is int
        and _ints(args[2])
        and _ints(args[3])
        and type(args[4]) is bool
    )


def label(value: Any) -> str:
    """A short text for a token, without ever printing attacker structures."""
    if isinstance(value, str):
        return value[:200]
    if (type(value) is int and value.bit_length() < 64) or isinstance(value, (bool, float, type(None))):
        return str(value)
    return f"<{type(value).__name__.lower()}>"


def top_level_keys(root: Any) -> list[str] | None:
    if isinstance(root, Dict):
        return [label(k) for k, _ in root.items[:10_000]]
    return None
