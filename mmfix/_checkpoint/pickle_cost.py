"""What a pickle would make torch's weights_only unpickler do, known before it runs.

torch's safe loader runs no code a file names, but the callables it allows, and the
dict and set it fills, still do work and allocate memory that a few bytes of pickle
can multiply: a tuple reused through the memo is hashed again at every use (a chain of
tuples of two is hashed in 2**depth steps), integers chosen to share a hash turn each
dict insertion into a scan, ``set()`` of a list of memo references hashes the same
big tuple each time, a tensor whose strides overlap has as many rows as its size says
over one stored element (``set()`` and ``torch.Size()`` iterate them, moving it to
another dtype materialises them), ``torch.Tensor(n)``, ``bytearray(n)`` and
``_rebuild_qtensor`` allocate what an integer says.

``Cost`` follows the static reader (``pickle_reader``) through the pickle and charges
that work and memory as the unpickler would incur it, before it is incurred, against a
budget proportional to the file: ``PickleTooCostly`` as soon as either is exceeded. A
pickle torch.save writes stays far below both (its dicts are keyed by short strings
and its tensors are backed by their records). Everything here is linear in the tokens
the reader holds: costs of shared tuples are memoised, never recomputed.

**The check fails closed and costs less than the load it guards** (issue 28). A check
that cannot finish (its opcode bound, its clock, a MemoryError, a reading it cannot
follow) is a refusal (``CheckIncomplete``), never a file handed to torch unchecked; so is a
value it cannot price (a tensor size that is not ints as torch reads them -- a bool is an
int, ``torch.Size(t)`` is t --, call arguments that are not a tuple or list, a storage
whose size is not an int): unknown is never free. Only
a break in the pickle's *structure* that the reader reached with everything before it
charged (``PickleDamaged``: torch's unpickler stops at the same opcode) leaves the file
to torch's own "damaged" verdict. Every step of the checker is charged before it is
taken, at least one unit per element it touches (a ``set()`` of n members costs n up
front; the walk through a BUILD's state costs its entries), its clock is read per unit
of work charged as well as per opcode, and it keeps no per-call tables: so its own time
and memory are bounded by the same budget it enforces, a small multiple of the file.

**Why a static check rather than checked stand-ins at load time.** Bounding what a
pickle can *make* (stand-ins for ``set``, ``_codecs.encode``, ``bytearray`` and the
tensor rebuilders) was considered: it covers the allowlisted callables, but the costliest
classes involve no callable at all. torch's unpickler hashes a dict key inside SETITEM
(a tuple DAG of 60 levels, 2**60 steps; keys sharing one hash, a quadratic scan) and sets
states inside BUILD, in its own loop; bounding those at load time needs a work budget on
the unpickler's opcodes, i.e. a replacement for torch's unpickler, which is a second
pickle machine all the same and one whose disagreements with torch would *load* files.
Here a disagreement can only refuse: whatever the reader cannot follow is refused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

#: Work units: one element hashed, compared or iterated (tens of nanoseconds each for the
#: unpickler, about a microsecond for this checker, which follows each one it charges: so the
#: budget bounds the check's own time too, a few seconds at most). A real checkpoint's
#: pickle charges well under one unit per byte (its dict keys are short distinct strings).
WORK_BASE = 1 << 20
WORK_PER_PICKLE_BYTE = 4
CLOCK_EVERY = 1 << 12  # work units between two readings of the checker's clock
MEMORY_BASE = 256 << 20
MEMORY_PER_FILE_BYTE = 2  # what a load may make of the file's own bytes (tensor data, arrays)
ROW_WORK = 20  # iterating a tensor or an array makes one Python object per row ...
ROW_BYTES = 512  # ... of about this size (a tensor's is 400-500 bytes)
_CAP = 1 << 62  # saturating costs: a chain of tuples doubles at each level

# CPython's tuple hash (Objects/tupleobject.c, xxHash-based since 3.8), to tell which
# tuple keys collide without building them; checked against hash() at import.
_P1, _P2, _P5 = 11400714785074694791, 14029467366897019727, 2870177450012600261
_MASK = (1 << 64) - 1


def _tuple_hash(lanes: list[int]) -> int:
    acc = _P5
    for lane in lanes:
        acc = (acc + (lane & _MASK) * _P2) & _MASK
        acc = ((acc << 31) | (acc >> 33)) & _MASK
        acc = (acc * _P1) & _MASK
    acc = (acc + (len(lanes) ^ (_P5 ^ 3527539))) & _MASK
    if acc == _MASK:
        return 1546275796
    return acc - (1 << 64) if acc >> 63 else acc


_TUPLE_HASH_EXACT = all(
    _tuple_hash([hash(x) for x in t]) == hash(t) for t in ((), (1,), (1, "a", 2.5), (-1, -2, None, (3, 4)))
)


class PickleUnreadable(Exception):
    """The pickle is damaged, or too large or complex to read within the bounds."""


class PickleTooCostly(PickleUnreadable):
    """Loading the pickle would do work or use memory out of proportion to the file: the
    loader refuses it."""


class CheckIncomplete(PickleTooCostly):
    """The check could not finish (its opcode bound, its clock, a MemoryError, a structure it
    cannot follow): the loader refuses the file, as it would one over budget (fail closed)."""


class PickleDamaged(PickleUnreadable):
    """The pickle's structure breaks (truncated, an unknown opcode, a memo entry never stored,
    a stack underflow) at an opcode the check reached with everything before it charged:
    torch's unpickler stops there too, so the file is left to the loader's "damaged" verdict."""


class ContainerCrafted(PickleTooCostly):
    """The container is built so that what torch reads may differ from what was checked, or
    so that reading it costs out of proportion (a zip directory torch.save never writes):
    the loader reports it as damaged, unread."""


@dataclass(eq=False)
class TensorToken:
    """A tensor the unpickler would rebuild: its elements, its rows (what iterating it
    yields) and how many of its elements the file's records really hold."""

    numel: int
    rows: int
    backed: int


@dataclass
class Cost:
    pickle_bytes: int
    file_bytes: int
    work: int = 0
    memory: int = 0
    _hash_costs: dict[int, int] = field(default_factory=dict)
    _hashes: dict[int, int | None] = field(default_factory=dict)
    _hashed_once: set[int] = field(default_factory=set)
    _tables: dict[int, dict[Any, set[Any]]] = field(default_factory=dict)
    _keep: list[Any] = field(default_factory=list)  # ids stay unique while they are keys above
    #: the checker's own clock (this thread's CPU time, so that a busy machine refuses nothing)
    deadline: float | None = None
    _next_clock: int = CLOCK_EVERY

    def keep(self, token: Any) -> None:
        """Hold ``token`` while its id is a key of a table here."""
        self._keep.append(token)

    @property
    def work_budget(self) -> int:
        return WORK_BASE + WORK_PER_PICKLE_BYTE * self.pickle_bytes

    @property
    def memory_budget(self) -> int:
        return MEMORY_BASE + MEMORY_PER_FILE_BYTE * self.file_bytes

    def charge(self, work: int = 0, memory: int = 0, what: str = "") -> None:
        self.work = min(_CAP, self.work + work)
        self.memory = min(_CAP, self.memory + memory)
        if self.work >= self._next_clock:  # the clock per unit of work, not per opcode
            self._next_clock = self.work + CLOCK_EVERY
            self.check_clock()
        if self.work > self.work_budget:
            raise PickleTooCostly(
                f"loading its pickle would take more than {self.work_budget:,} elementary steps "
                f"({what or 'hashing, comparing and iterating what it builds'}) from {self.pickle_bytes:,} bytes "
                "of pickle; nothing torch.save writes does that, so the file is crafted to hang the loader"
            )
        if self.memory > self.memory_budget:
            raise PickleTooCostly(
                f"loading it would allocate more than {self.memory_budget >> 20:,} MiB "
                f"({what or 'what its pickle asks for'}) from a {self.file_bytes:,}-byte file; nothing torch.save "
                "writes does that, so the file is crafted to exhaust memory"
            )

    def check_clock(self) -> None:
        if self.deadline is not None and time.thread_time() > self.deadline:
            raise CheckIncomplete(
                "following its pickle took the check more CPU time than a file of its size may take, so the "
                "check could not bound it"
            )

    # -- hashing: dict keys, set and Counter members -----------------------------------------
    def hash_cost(self, token: Any) -> int:
        """Steps to hash ``token`` once (tuples do not cache their hash; str and bytes do)."""
        if isinstance(token, (str, bytes)):
            if id(token) in self._hashed_once:
                return 1
            self._hashed_once.add(id(token))
            self._keep.append(token)
            return 1 + len(token) // 64
        if type(token) is int:
            return 1 + token.bit_length() // 960
        if not isinstance(token, tuple):
            return 1
        known = self._hash_costs.get(id(token))
        if known is not None:
            return known
        # Iterative, memoised: a pickle can nest tuples 100,000 deep.
        stack: list[tuple[tuple[Any, ...], bool]] = [(token, False)]
        while stack:
            tup, children_done = stack.pop()
            if id(tup) in self._hash_costs:
                continue
            if not children_done:
                stack.append((tup, True))
                stack.extend((c, False) for c in tup if isinstance(c, tuple) and id(c) not in self._hash_costs)
                continue
            total = 1
            for child in tup:
                if isinstance(child, tuple):
                    total += self._hash_costs[id(child)]
                elif isinstance(child, (str, bytes)):
                    total += 1 + len(child) // 64
                else:
                    total += 1
            self._hash_costs[id(tup)] = min(total, _CAP)
            self._keep.append(tup)
        return self._hash_costs[id(token)]

    def hash_of(self, token: Any) -> int | None:
        """The hash the unpickler's dict would see, where it can be known without building
        anything; None where it cannot (those keys are then assumed to collide)."""
        if token is None or isinstance(token, (bool, float)) or type(token) is int:
            return hash(token)
        if isinstance(token, (str, bytes)):
            return hash(token) if len(token) <= 1 << 20 else None
        if isinstance(token, TensorToken):
            return id(token)  # tensors hash by identity: distinct ones never collide by design
        if not (isinstance(token, tuple) and _TUPLE_HASH_EXACT):
            return None
        if id(token) in self._hashes:
            return self._hashes[id(token)]
        stack: list[tuple[tuple[Any, ...], bool]] = [(token, False)]
        while stack:
            tup, children_done = stack.pop()
            if id(tup) in self._hashes:
                continue
            if not children_done:
                stack.append((tup, True))
                stack.extend((c, False) for c in tup if isinstance(c, tuple) and id(c) not in self._hashes)
                continue
            lanes: list[int] = []
            for child in tup:
                lane = self._hashes[id(child)] if isinstance(child, tuple) else self._leaf_hash(child)
                if lane is None:
                    break
                lanes.append(lane)
            self._hashes[id(tup)] = _tuple_hash(lanes) if len(lanes) == len(tup) else None
            self._keep.append(tup)
        return self._hashes[id(token)]

    def _leaf_hash(self, token: Any) -> int | None:
        return None if isinstance(token, tuple) else self.hash_of(token)

    def table_for(self, target: Any) -> dict[Any, set[Any]]:
        """The keys a container the unpickler keeps (a dict, an object filled by SETITEMS) holds,
        by hash: one entry per key the file put there, so in proportion to its opcodes."""
        table = self._tables.get(id(target))
        if table is None:
            table = self._tables[id(target)] = {}
            self._keep.append(target)
        return table

    def insert(self, table: dict[Any, set[Any]], key: Any, what: str, kept: bool = True) -> None:
        """``target[key] = ...`` (or ``target.add(key)``) into ``table`` (``table_for`` a kept
        container, or a fresh dict a call drops when it returns, ``kept=False``: its keys are
        held by the caller meanwhile): the hash, then a probe past every earlier key of the same
        hash, each compared with the new key."""
        cost = self.hash_cost(key)
        h = self.hash_of(key)
        same = table.setdefault(h, set())
        # Equal plain values are one entry; tuples and other tokens by identity.
        ident = key if isinstance(key, (str, bytes, int, float, bool, type(None))) else id(key)
        if ident in same:
            self.charge(cost + len(same), what=what)
            return
        self.charge(cost + len(same) * cost, what=what)
        same.add(ident)
        if kept and not isinstance(ident, (str, bytes, int, float, bool, type(None))):
            self._keep.append(key)


def numel(size: Any) -> int | None:
    """Elements of a size given as a tuple or list of ints, or None where it is not one (the
    reader's callers refuse those: see ``pickle_reader.dims``). bool is an int to torch (a
    size ``(n, True)`` has n elements), so it counts as one."""
    items = size if isinstance(size, (tuple, list)) else getattr(size, "items", None)
    if not isinstance(items, (tuple, list)) or not all(type(n) in (int, bool) for n in items):
        return None
    total = 1
    for n in items:
        if n < 0:
            return None
        total = min(_CAP, total * int(n))
    return total
