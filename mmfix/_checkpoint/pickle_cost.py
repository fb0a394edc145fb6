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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Work units: one element hashed, compared or iterated (tens of nanoseconds each).
WORK_BASE = 1 << 25  # about a second and a half of such steps, whatever the file
WORK_PER_PICKLE_BYTE = 32  # a pickle's opcodes each cost the unpickler about a microsecond
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

    def insert(self, target: Any, key: Any, what: str) -> None:
        """``target[key] = ...`` (or ``target.add(key)``): the hash, then a probe past every
        earlier key of the same hash, each compared with the new key."""
        cost = self.hash_cost(key)
        table = self._tables.get(id(target))
        if table is None:
            table = self._tables[id(target)] = {}
            self._keep.append(target)
        h = self.hash_of(key)
        same = table.setdefault(h, set())
        # Equal plain values are one entry; tuples and other tokens by identity.
        ident = key if isinstance(key, (str, bytes, int, float, bool, type(None))) else id(key)
        if ident in same:
            self.charge(cost + len(same), what=what)
            return
        self.charge(cost + len(same) * cost, what=what)
        same.add(ident)
        if not isinstance(ident, (str, bytes, int, float, bool, type(None))):
            self._keep.append(key)

    # -- iteration ----------------------------------------------------------------------------
    @staticmethod
    def length(token: Any, items: Any) -> int:
        """How many elements iterating ``token`` yields (``items``: the reader's own list of
        a container token's members, or None)."""
        if items is not None:
            return len(items)
        if isinstance(token, (str, bytes, tuple)) or hasattr(token, "__len__"):
            try:
                return len(token)
            except TypeError:
                return 0
        if isinstance(token, TensorToken):
            return token.rows * ROW_WORK
        rows = getattr(token, "rows", None)
        return rows * ROW_WORK if type(rows) is int else 0


def numel(size: Any) -> int | None:
    """Elements of a size given as ints, or None."""
    items = size if isinstance(size, tuple) else getattr(size, "items", None)
    if not isinstance(items, (tuple, list)) or not all(type(n) is int for n in items):
        return None
    total = 1
    for n in items:
        if n < 0:
            return None
        total = min(_CAP, total * n)
    return total
