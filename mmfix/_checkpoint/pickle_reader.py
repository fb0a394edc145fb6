"""Reading a checkpoint's pickle without building anything it describes.

Used where a file was refused or looks damaged, by auto-resume's checks and by
``mmfix inspect``: all places that must never run, hash, print or allocate what
an attacker wrote. The opcodes are parsed by ``pickletools.genops`` and executed
on a symbolic stack of tokens: plain values stay plain (bytes and str, already
read from the file), containers are lists of tokens (never hashed, so a tuple DAG
used as a dict key costs nothing), globals and calls are records. Work and memory
are linear in the number of opcodes, which is capped, as are the bytes read and
the time spent; the memo is a dict, so a huge memo index allocates nothing.

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

MAX_OPS = 1_000_000  # ~50x the opcodes of a large MMEngine checkpoint's pickle
MAX_BYTES = 64 << 20
MAX_SECONDS = 20.0
_MAX_PROBLEMS = 5
_STATISTICS = ("min", "max", "current", "mean")
_HISTORY_BUFFER = "mmengine.logging.history_buffer.HistoryBuffer"
_RECONSTRUCT = {f"{m}._reconstruct" for m in ("numpy.core.multiarray", "numpy._core.multiarray")}
_SCALAR = {f"{m}.scalar" for m in ("numpy.core.multiarray", "numpy._core.multiarray")}


class PickleUnreadable(Exception):
    """The pickle is damaged, or too large or complex to read within the bounds."""


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


def read(stream: io.BytesIO, reading: Reading | None = None) -> Reading:
    """Read one pickle from ``stream`` (in memory, at most MAX_BYTES: callers read it in one
    go), leaving it just after the pickle's STOP."""
    reading = reading or Reading()
    machine = _Machine(reading)
    deadline = time.monotonic() + MAX_SECONDS
    # The garbage collector stays on (switching it off is process-wide: other threads run
    # meanwhile). CPython collects the oldest generation only once it has grown by a quarter,
    # so hundreds of thousands of live tokens cost a constant factor (about 2.5x here), not a
    # square; the opcode and time bounds above hold either way.
    try:
        for opcode, arg, _pos in pickletools.genops(stream):
            reading.ops += 1
            if reading.ops > MAX_OPS:  # ops counts work: heavy opcodes add what they cost
                raise PickleUnreadable(f"its pickle has more than {MAX_OPS:,} opcodes, more than mmfix reads")
            if not reading.ops & 0x3FF and time.monotonic() > deadline:
                raise PickleUnreadable(f"reading its pickle took more than {MAX_SECONDS:.0f} s")
            machine.step(opcode.name, arg)
            if opcode.name == "STOP":
                break
        else:
            raise PickleUnreadable("its pickle ends without a STOP opcode (it is truncated)")
    except PickleUnreadable:
        raise
    except (
        ValueError,
        IndexError,
        KeyError,
        TypeError,
        EOFError,
        UnicodeDecodeError,
        OverflowError,
        MemoryError,
        RecursionError,
    ) as exc:
        raise PickleUnreadable(f"its pickle is damaged ({type(exc).__name__}: {str(exc)[:200]})") from None
    return reading


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
_GET = frozenset(("GET", "BINGET", "LONG_BINGET"))


class _Machine:
    def __init__(self, reading: Reading) -> None:
        self.r = reading
        self.stack: list[Any] = []
        self.metastack: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.buffers: list[Call] = []
        self.foreign: set[str] = set()

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
            args = stack.pop()
            cls = stack.pop()
            if isinstance(cls, Global) and cls.name in numpy_guard.NAMES:
                self.problem(f"it creates {cls.name} with NEWOBJ; numpy never writes that")
            made = Call(cls, args)
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
            target.items.extend(items)
        elif not isinstance(target, (Call, Opaque)):
            raise TypeError(f"APPEND to a {type(target).__name__}")

    def _setitems(self, target: Any, items: list[Any]) -> None:
        if len(items) % 2:
            raise IndexError("odd number of items for SETITEMS")
        if any(isinstance(key, (Array, Dtype)) for key in items[::2]):
            # The loader's stand-ins refuse to be hashed, as numpy's arrays do.
            self.problem("a numpy array or dtype is used as a dict key")
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

    # What mmfix's stand-ins would say at load time, said without building anything.
    def _call(self, func: Any, args: Any) -> Any:
        name = func.name if isinstance(func, Global) else None
        try:
            if name == "_codecs.encode":
                if isinstance(args, tuple) and len(args) == 2 and isinstance(args[0], str) and args[1] == "latin1":
                    self.r.ops += len(args[0]) >> 8  # the scan below costs what the string is long
                    if args[0] and max(args[0]) > "\xff":
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
                if isinstance(args, tuple) and len(args) == 4 and _holds_array(args[3]):
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
                and _holds_array(state)
            ):
                self.problem("it puts numpy data in an OrderedDict's attributes, where numpy never writes it")
        except pickle.UnpicklingError as exc:
            self.problem(str(exc).removeprefix("mmfix: "))

    def _history_buffer_state(self, state: Any) -> None:
        if not isinstance(state, Dict):
            self.problem("a HistoryBuffer's state is not a dict")
            return
        self.r.ops += len(state.items)
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
            self.r.ops += len(methods.items)
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


def _ints(value: Any) -> bool:
    items = value.items if isinstance(value, List) else value if isinstance(value, tuple) else None
    return items is not None and all(type(n) is int for n in items)


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


def _holds_array(state: Any) -> bool:
    items = state.items if isinstance(state, Dict) else state if isinstance(state, tuple) else ()
    return any(
        isinstance(v, Array) or (isinstance(v, tuple) and any(isinstance(x, Array) for x in v))
        for kv in items
        for v in (kv if isinstance(kv, tuple) else (kv,))
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
