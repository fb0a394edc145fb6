"""The replay engine: a checkpoint's pickle read without executing it.

The pickle is read by ``pickle_reader``, which builds, imports and runs nothing
and is bounded in time and memory; so a malicious file can be read safely. The
runtime uses it to name the globals of a refused file (``scan_globals``) and to
check that a file's storages fit its records (``consistency_problem``); the
``mmfix inspect`` report (``report``) is built on it too.
"""

from __future__ import annotations

import io
import os
import zipfile
from typing import Any

from . import files, pickle_reader
from .pickle_cost import CheckIncomplete, ContainerCrafted, Cost, PickleDamaged, PickleTooCostly, PickleUnreadable

ITEMSIZE = {
    "DoubleStorage": 8,
    "FloatStorage": 4,
    "HalfStorage": 2,
    "BFloat16Storage": 2,
    "LongStorage": 8,
    "IntStorage": 4,
    "ShortStorage": 2,
    "CharStorage": 1,
    "ByteStorage": 1,
    "BoolStorage": 1,
    "ComplexDoubleStorage": 16,
    "ComplexFloatStorage": 8,
    "QInt8Storage": 1,
    "QUInt8Storage": 1,
    "QInt32Storage": 4,
    "UntypedStorage": 1,
}
_ALIGNMENT = 64  # torch >= 2.1 aligns every storage record; mmap needs it


# torch's default weights_only allowlist for what checkpoints commonly hold: known
# without importing torch (a second of start-up for `mmfix inspect` of a small file).
_TORCH_DEFAULTS = frozenset(
    {
        "collections.OrderedDict",
        "collections.Counter",
        "torch.Size",
        "torch.device",
        "torch.Tensor",
        "torch.nn.parameter.Parameter",
        "torch.serialization._get_layout",
        "_codecs.encode",
        "builtins.set",
        "builtins.bytearray",
        "builtins.complex",
        "torch._tensor._rebuild_from_type_v2",
        "torch.storage.UntypedStorage",
        "torch.storage.TypedStorage",
    }
    | {
        f"torch._utils._rebuild_{n}"
        for n in (
            "parameter",
            "parameter_with_state",
            "qtensor",
            "tensor",
            "tensor_v2",
            "tensor_v3",
            "sparse_tensor",
            "meta_tensor_no_storage",
            "nested_tensor",
            "wrapper_subclass",
            "device_tensor_from_numpy",
            "device_tensor_from_cpu_tensor",
        )
    }
    | {
        f"torch.{t}Storage"
        for t in (
            "Double",
            "Float",
            "Half",
            "BFloat16",
            "Long",
            "Int",
            "Short",
            "Char",
            "Byte",
            "Bool",
            "ComplexDouble",
            "ComplexFloat",
            "QInt8",
            "QUInt8",
            "QInt32",
            "QUInt4x2",
            "QUInt2x4",
        )
    }
)


def allowed_globals(names: Any) -> dict[str, bool]:
    """name -> whether the safe loader allows it; imports torch only for names it must ask about."""
    from . import safe_globals

    ours = safe_globals.vetted_names() | safe_globals.user_trusted_names() | _TORCH_DEFAULTS
    out = {name: name in ours for name in names}
    if all(out.values()):
        return out
    try:
        from torch import _weights_only_unpickler as wou

        torch_names = set(wou._get_allowed_globals()) | set(wou._get_user_allowed_globals())
    except Exception:  # torch absent or changed: report only what mmfix knows
        return out
    return {name: ok or name in torch_names for name, ok in out.items()}


def replay_file(source: Any, reading: pickle_reader.Reading, record_sizes: dict[str, int], fmt: str) -> dict[str, Any]:
    """Read the pickle of ``source`` (a path or a seekable binary file) into ``reading``;
    returns facts about the container (mmap alignment)."""
    facts: dict[str, Any] = {"mmap_possible": False}
    file_bytes = files.size_of(source)
    if fmt == "zip":
        problem = files.raw_directory_problem(source)  # before zipfile parses it (see there)
        if problem:
            # Refused, not merely unreadable: torch's own zip reader may take the file, unchecked.
            raise ContainerCrafted(problem)
        with zipfile.ZipFile(source) as archive:
            infos = archive.infolist()
            if len(infos) > files.MAX_ENTRIES:
                raise CheckIncomplete(
                    f"its zip directory lists {len(infos):,} records, more than the check reads, so the check could "
                    "not bound it"
                )
            starts = files.data_starts(infos, source)  # each local header read once, for both uses below
            crafted = files.records_problem(infos, source, starts)
            if crafted:
                raise ContainerCrafted(crafted)
            pkl = _data_pkl(infos)
            if pkl is None:
                raise PickleDamaged("the archive holds no data.pkl record")  # torch stops there, unpickling nothing
            prefix = files.fold(pkl.filename[: -len("data.pkl")])
            aligned = isinstance(source, (str, os.PathLike))
            for info, start in zip(infos, starts):
                # torch looks a storage up as <archive>/data/<key>, ignoring ASCII case; the
                # record names are distinct ignoring case (records_problem)
                if files.fold(info.filename).startswith(prefix + "data/"):
                    record_sizes[info.filename[len(prefix + "data/") :]] = info.file_size
                    aligned &= (
                        info.compress_type == zipfile.ZIP_STORED and start is not None and start % _ALIGNMENT == 0
                    )
            facts["mmap_possible"] = bool(aligned)
            limit = pickle_reader.MAX_BYTES if reading.cost is None else max(pickle_reader.MAX_BYTES, pkl.file_size)
            if pkl.file_size > limit:
                raise CheckIncomplete(
                    f"its pickle claims {pkl.file_size:,} bytes, more than the check reads, so the check could not "
                    "bound it"
                )
            with archive.open(pkl) as stream:  # one read: ZipExtFile costs microseconds per call
                data = stream.read(limit + 1)
            _bound(reading, len(data), file_bytes)
            pickle_reader.read(io.BytesIO(data), reading)
            return facts
    # The pickles come first, the storages' bytes after them: read a bounded head once (a
    # byte-at-a-time readline on the file costs a microsecond a byte). The loader's check reads
    # as far as torch would: if the pickles run past the head, the whole file.
    checking = reading.cost is not None
    head = _read_from_start(source, pickle_reader.MAX_BYTES)
    try:
        _legacy_pickles(head, reading, file_bytes)
    except PickleDamaged:
        # The head ends inside the pickles: read on, as torch would.
        if not (checking and len(head) == pickle_reader.MAX_BYTES < file_bytes):
            raise
        reading.__dict__.update(pickle_reader.Reading(cost=Cost(pickle_bytes=0, file_bytes=file_bytes)).__dict__)
        _legacy_pickles(_read_from_start(source, -1), reading, file_bytes)
    return facts


def _read_from_start(source: Any, n: int) -> bytes:
    fh = open(source, "rb") if isinstance(source, (str, os.PathLike)) else source
    try:
        if fh is source:
            fh.seek(0)
        return bytes(fh.read(n))
    finally:
        if fh is not source:
            fh.close()


def _legacy_pickles(data: bytes, reading: pickle_reader.Reading, file_bytes: int) -> None:
    """torch's legacy format: magic number, protocol version and sys info, then the object, then
    the storage keys, each a pickle torch unpickles with the same (weights_only) unpickler, so
    each is charged to the same cost; the storages' raw bytes follow the fifth. (A legacy *tar*
    file torch refuses under weights_only before unpickling anything.)"""
    head = io.BytesIO(data)
    _bound(reading, len(data), file_bytes)

    def side_pickle() -> None:
        pickle_reader.read(
            head, pickle_reader.Reading(cost=reading.cost, max_ops=reading.max_ops, max_seconds=reading.max_seconds)
        )

    for _ in range(3):
        side_pickle()
    reading.pid_items = 6
    pickle_reader.read(head, reading)
    side_pickle()  # deserialized_storage_keys: torch unpickles it after the object


def _bound(reading: pickle_reader.Reading, pickle_bytes: int, file_bytes: int) -> None:
    """What loading may cost, in proportion to this file (see pickle_cost); the reader may take as
    many opcodes as the pickle has bytes, and time in proportion."""
    if reading.cost is None:
        reading.cost = Cost(pickle_bytes=pickle_bytes, file_bytes=file_bytes)
    reading.cost.pickle_bytes = pickle_bytes
    reading.cost.file_bytes = file_bytes
    reading.max_ops = max(pickle_reader.MAX_OPS, pickle_bytes)
    reading.max_seconds = pickle_reader.MAX_SECONDS + 2.0 * pickle_bytes / (1 << 20)


def _data_pkl(infos: list[zipfile.ZipInfo]) -> zipfile.ZipInfo | None:
    """The record torch reads: ``<archive name>/data.pkl``, the archive name being the folder of
    the first record (PyTorchFileReader), found ignoring ASCII case (miniz); names that collide
    so are refused first (files.records_problem)."""
    if not infos:
        return None
    name = files.fold(infos[0].filename.split("/", 1)[0] + "/data.pkl")  # miniz ignores ASCII case
    return next((i for i in infos if files.fold(i.filename) == name), None)


_Replayed = tuple[pickle_reader.Reading, dict[str, int]]
#: the last path read: (its identity, the reading, or the refusal it ended in as (class, args))
_last: tuple[tuple[Any, ...], _Replayed | tuple[type[PickleUnreadable], tuple[Any, ...]]] | None = None


def _replay_source(source: Any) -> _Replayed:
    """Read a path or a seekable file statically: (reading, storage record sizes);
    a file object is left rewound. A refusal reads a file twice or three times (is it damaged?
    too costly? which globals?): the same unchanged path is read once, and the reading's verdict
    kept with it when that verdict is the file's own (its damage, its cost, its container), not
    the check's running out of time (``CheckIncomplete``: read again, it may finish)."""
    global _last
    if not isinstance(source, (str, os.PathLike)):
        return _replay_uncached(source)
    st = os.stat(source)
    key = (os.path.realpath(source), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if _last is not None and _last[0] == key:
        known = _last[1]
        if isinstance(known[0], type):
            raise known[0](*known[1])  # a fresh exception, not the first one with its traceback
        return known
    try:
        result = _replay_uncached(source)
    except (PickleDamaged, PickleTooCostly) as exc:
        if not isinstance(exc, CheckIncomplete):
            _last = (key, (type(exc), exc.args))
        raise
    _last = (key, result)
    return result


def _replay_uncached(source: Any) -> tuple[pickle_reader.Reading, dict[str, int]]:
    if not isinstance(source, (str, os.PathLike)):
        source.seek(0)
    head = files.read_head(source)
    size = files.size_of(source)
    # Bounded in proportion to the file (see _bound): the loader's check, scan_globals and
    # consistency_problem read what torch would, with the same verdict.
    reading = pickle_reader.Reading(cost=Cost(pickle_bytes=size, file_bytes=size))
    sizes: dict[str, int] = {}
    try:
        replay_file(source, reading, sizes, files.file_format(head or b""))
    finally:
        if not isinstance(source, (str, os.PathLike)):
            source.seek(0)
    return reading, sizes


def load_cost_problem(source: Any) -> tuple[str, bool] | None:
    """Why loading ``source`` would do work or use memory out of proportion to its size (and
    whether that is the container's damage rather than the pickle's cost), or None.

    Run before every weights_only load (torch_load): the static reader follows the pickle
    and charges what torch's unpickler would do (pickle_cost). It fails closed: a check that
    cannot finish (its bounds, its clock, a MemoryError, a reading it cannot follow) refuses
    the file. Only damage found in the file's structure is left to the loader, which then
    stops where the check stopped, having done only what the check charged: a pickle whose
    opcodes break at the point the reader reached (``PickleDamaged``), or a container the
    structural scan (``files.container_problem``) finds broken, so that torch's zip reader
    fails before any unpickling."""
    try:
        _replay_source(source)
        return None
    except PickleTooCostly as exc:  # CheckIncomplete included
        return str(exc), isinstance(exc, ContainerCrafted)
    except PickleDamaged:
        return None
    except OSError:
        raise
    except Exception as exc:  # anything else the reader could not follow: refused below
        failure = f"{type(exc).__name__}: {str(exc)[:200]}"
    try:
        if files.container_problem(source) is not None:
            return None
    except Exception:
        pass
    return (
        f"the check could not follow it ({failure}) though its container is whole, so the check could not bound it",
        False,
    )


def scan_globals(source: Any) -> list[tuple[str, bool]]:
    """(global, allowed) for every global ``source`` needs; nothing is built or imported."""
    reading, _ = _replay_source(source)
    return sorted(allowed_globals(reading.globals).items())


def consistency_problem(source: Any) -> str | None:
    """Why the pickle and the storage records of ``source`` do not fit together, or None."""
    if files.file_format(files.read_head(source) or b"") != "zip":
        return None
    reading, sizes = _replay_source(source)
    return metadata_problem(source) or storages_problem(reading, sizes)


def storages_problem(reading: pickle_reader.Reading, sizes: dict[str, int]) -> str | None:
    """Why the storages the pickle references do not fit the archive's records, or None."""
    for storage in reading.storages:
        size = sizes.get(storage["key"])
        if size is None:
            return f"its pickle references storage record {storage['key']!r}, which the archive does not hold"
        numel = storage["numel"]
        itemsize = ITEMSIZE.get(storage["type"])
        if numel is not None and itemsize is not None and numel * itemsize != size:
            return f"storage record {storage['key']!r} holds {size} bytes but the pickle expects {numel * itemsize}"
    return None


def metadata_problem(source: Any) -> str | None:
    """The small records torch reads besides the pickle: version and byte order."""
    with zipfile.ZipFile(source) as archive:
        names = archive.namelist()
        pkl = next(n for n in names if n.endswith("data.pkl"))
        prefix = pkl[: -len("data.pkl")]
        versions = [n for n in (prefix + "version", prefix + ".data/version") if n in names]
        if not versions:
            return "the archive has no version record, so torch.save did not write it whole"
        for version_name in versions:
            version = archive.read(version_name).strip()
            if not version.isdigit() or len(version) > 9:
                return f"its version record holds {version[:16]!r} instead of a small number"
        if prefix + "byteorder" in names and archive.read(prefix + "byteorder").strip() not in (b"little", b"big"):
            return "its byteorder record is neither 'little' nor 'big'"
        for record in (".format_version", ".storage_alignment"):
            if prefix + record in names and not archive.read(prefix + record).strip().isdigit():
                return f"its {record} record is not a number"
        if prefix + ".data/serialization_id" in names:
            try:
                archive.read(prefix + ".data/serialization_id").decode("ascii")
            except UnicodeDecodeError:
                return "its serialization_id record is not text"
    if not isinstance(source, (str, os.PathLike)):
        source.seek(0)
    return None
