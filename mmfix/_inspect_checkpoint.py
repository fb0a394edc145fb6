"""``mmfix inspect CKPT``: what a checkpoint holds, read without executing its pickle.

The pickle is replayed by an unpickler whose ``find_class`` never imports
anything: every global becomes an inert stand-in that records its name, and
every call on a stand-in just makes another stand-in. So a malicious file can be
inspected safely, and its globals listed before anyone decides to trust them.
"""
from __future__ import annotations

import _compat_pickle
import io
import os
import pickle
import struct
import zipfile
from collections import Counter, defaultdict
from typing import Any

from . import _checkpoint_files

_ITEMSIZE = {
    "DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2, "LongStorage": 8,
    "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1, "ByteStorage": 1, "BoolStorage": 1,
    "ComplexDoubleStorage": 16, "ComplexFloatStorage": 8, "QInt8Storage": 1, "QUInt8Storage": 1,
    "QInt32Storage": 4, "UntypedStorage": 1,
}
_ALIGNMENT = 64  # torch >= 2.1 aligns every storage record; mmap needs it


class _Stub:
    """An inert stand-in for anything the pickle would have built."""

    __slots__ = ("_mmfix_name", "_mmfix_args", "_mmfix_state", "_mmfix_items", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._mmfix_args = args
        self._mmfix_items: list[Any] = []
        self._mmfix_state = None

    def __call__(self, *args: Any, **kwargs: Any) -> _Stub:
        stub = _Stub()
        stub._mmfix_name = f"{self._mmfix_name}(...)"
        return stub

    def __setstate__(self, state: Any) -> None:
        self._mmfix_state = state

    def __setitem__(self, key: Any, value: Any) -> None:
        self._mmfix_items.append((key, value))

    def append(self, value: Any) -> None:
        self._mmfix_items.append(value)

    def extend(self, values: Any) -> None:
        self._mmfix_items.extend(values)

    def __repr__(self) -> str:
        return f"<{self._mmfix_name}>"


class _StubUnpickler(pickle.Unpickler):
    def __init__(self, data: io.BufferedIOBase, report: dict[str, Any]) -> None:
        super().__init__(data)
        self._report = report
        self._types: dict[str, type] = {}

    def find_class(self, module: str, name: str) -> Any:
        # Protocol-2 pickles (torch's default) spell Python 2 names, which the
        # real unpickler maps (__builtin__ -> builtins); report what it resolves.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        qualified = f"{module}.{name}"
        self._report["globals"][qualified] += 1
        stub_type = self._types.get(qualified)
        if stub_type is None:
            # A real class per global: NEWOBJ demands a type, REDUCE a callable.
            stub_type = type(name.replace(".", "_") or "_", (_Stub,), {"__slots__": ()})
            stub_type._mmfix_name = qualified  # type: ignore[attr-defined]
            self._types[qualified] = stub_type
        return stub_type

    def persistent_load(self, pid: Any) -> Any:
        if isinstance(pid, tuple) and pid and pid[0] == "storage" and len(pid) >= 5:
            _, storage_type, key, location, numel = pid[:5]
            type_name = getattr(storage_type, "_mmfix_name", str(storage_type))
            self._report["storages"].append(
                {"key": str(key), "location": str(location), "type": type_name.rsplit(".", 1)[-1],
                 "numel": int(numel) if isinstance(numel, int) else None}
            )
        stub = _Stub()
        stub._mmfix_name = "storage"
        return stub


def _data_offset(raw: Any, header_offset: int) -> int:
    """Where a zip member's bytes start: after its *local* header, whose extra
    field (torch pads it for alignment) differs from the central directory's."""
    raw.seek(header_offset)
    header = raw.read(30)
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return header_offset + 30 + name_len + extra_len


def _allowed_names() -> set[str]:
    from . import _safe_globals

    names = _safe_globals.vetted_names() | _safe_globals.user_trusted_names()
    try:
        from torch import _weights_only_unpickler as wou

        names |= set(wou._get_allowed_globals())
        names |= set(wou._get_user_allowed_globals())
    except Exception:  # torch absent or changed: report only what mmfix itself vets
        pass
    return names


def _keys_of(root: Any) -> list[str] | None:
    if isinstance(root, dict):
        return [str(k) for k in root]
    if isinstance(root, _Stub) and root._mmfix_items and all(isinstance(i, tuple) for i in root._mmfix_items):
        return [str(k) for k, _ in root._mmfix_items]
    return None


def _replay(data: bytes | io.BufferedIOBase, report: dict[str, Any]) -> Any:
    stream = io.BytesIO(data) if isinstance(data, bytes) else data
    return _StubUnpickler(stream, report).load()  # type: ignore[arg-type]


def _replay_file(source: Any, report: dict[str, Any], record_sizes: dict[str, int]) -> Any:
    """Replay the pickle of ``source`` (a path or a seekable binary file) into ``report``."""
    if report["format"] == "zip":
        with zipfile.ZipFile(source) as archive:
            pkl = next(n for n in archive.namelist() if n.endswith("data.pkl"))
            prefix = pkl[: -len("data.pkl")]
            aligned = isinstance(source, (str, os.PathLike))
            raw = open(source, "rb") if aligned else None
            try:
                for info in archive.infolist():
                    if info.filename.startswith(prefix + "data/"):
                        record_sizes[info.filename[len(prefix + "data/"):]] = info.file_size
                        if raw is not None:
                            aligned &= info.compress_type == zipfile.ZIP_STORED and (
                                _data_offset(raw, info.header_offset) % _ALIGNMENT == 0
                            )
            finally:
                if raw is not None:
                    raw.close()
            report["mmap_possible"] = bool(aligned)
            return _replay(archive.read(pkl), report)
    fh = open(source, "rb") if isinstance(source, (str, os.PathLike)) else source
    try:
        for _ in range(3):  # magic number, protocol version, sys info
            _replay(fh, {"globals": Counter(), "storages": []})
        return _replay(fh, report)
    finally:
        if fh is not source:
            fh.close()


def _replay_source(source: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """Replay a path or a seekable file inertly: (report, storage record sizes);
    a file object is left rewound."""
    if not isinstance(source, (str, os.PathLike)):
        source.seek(0)
    head = _checkpoint_files.read_head(source)
    report: dict[str, Any] = {"format": _checkpoint_files.file_format(head or b""), "globals": Counter(),
                              "storages": []}
    sizes: dict[str, int] = {}
    _replay_file(source, report, sizes)
    if not isinstance(source, (str, os.PathLike)):
        source.seek(0)
    return report, sizes


def scan_globals(source: Any) -> list[tuple[str, bool]]:
    """(global, allowed) for every global ``source`` needs; nothing is executed."""
    report, _ = _replay_source(source)
    allowed = _allowed_names()
    return [(name, name in allowed) for name in sorted(report["globals"])]


def consistency_problem(source: Any) -> str | None:
    """Why the pickle and the storage records of ``source`` do not fit together, or None."""
    report, sizes = _replay_source(source)
    if report["format"] != "zip":
        return None
    problem = _metadata_problem(source)
    if problem:
        return problem
    for storage in report["storages"]:
        size = sizes.get(storage["key"])
        if size is None:
            return f"its pickle references storage record {storage['key']!r}, which the archive does not hold"
        numel = storage["numel"]
        itemsize = _ITEMSIZE.get(storage["type"])
        if numel is not None and itemsize is not None and numel * itemsize != size:
            return (f"storage record {storage['key']!r} holds {size} bytes but the pickle expects "
                    f"{numel * itemsize}")
    return None


def _metadata_problem(source: Any) -> str | None:
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


def inspect_checkpoint(path: str) -> dict[str, Any]:
    """A JSON-ready description of ``path``; raises CheckpointCorruptError for unreadable files."""
    from ._errors import CheckpointCorruptError

    if not os.path.exists(path):
        raise CheckpointCorruptError(f"no checkpoint at {path!r}: the path does not exist", path=path)
    if os.path.isdir(path):
        raise CheckpointCorruptError(f"{path!r} is a directory, not a checkpoint file", path=path)
    problem = _checkpoint_files.diagnose(path)
    if problem:
        raise CheckpointCorruptError(f"cannot inspect checkpoint {path!r}: {problem}", path=path)
    with open(path, "rb") as fh:
        head = fh.read(64)
    report: dict[str, Any] = {
        "path": os.path.abspath(path),
        "size_bytes": os.path.getsize(path),
        "format": _checkpoint_files.file_format(head),
        "globals": Counter(),
        "storages": [],
        "mmap_possible": False,
        "top_level_keys": None,
    }
    record_sizes: dict[str, int] = {}
    try:
        root = _replay_file(path, report, record_sizes)
    except Exception as exc:
        raise CheckpointCorruptError(
            f"cannot inspect checkpoint {path!r}: its pickle is damaged ({type(exc).__name__}: {exc})", path=path
        ) from None
    report["top_level_keys"] = _keys_of(root)

    by_device: dict[str, int] = defaultdict(int)
    counts: Counter[str] = Counter()
    for storage in report["storages"]:
        size = record_sizes.get(storage["key"])
        if size is None and storage["numel"] is not None:
            size = storage["numel"] * _ITEMSIZE.get(storage["type"], 1)
        storage["bytes"] = size or 0
        by_device[storage["location"]] += storage["bytes"]
        counts[storage["location"]] += 1
    allowed = _allowed_names()
    report["globals"] = [
        {"name": name, "uses": uses, "allowed": name in allowed} for name, uses in sorted(report["globals"].items())
    ]
    report["devices"] = {dev: {"storages": counts[dev], "bytes": by_device[dev]} for dev in sorted(counts)}
    report["summary"] = _device_summary(counts)
    report["loadable_with_weights_only"] = all(g["allowed"] for g in report["globals"])
    return report


def _device_summary(counts: Counter[str]) -> str:
    total = sum(counts.values())
    if not total:
        return "the checkpoint holds no tensor storages"
    if len(counts) == 1:
        (device,) = counts
        if device.startswith("cuda"):
            index = device.partition(":")[2] or "current"
            return (
                f"all {total} storages were saved on {device} — without CPU mapping every rank "
                f"allocates them on GPU {index}"
            )
        return f"all {total} storages were saved on {device}"
    parts = ", ".join(f"{n} on {dev}" for dev, n in sorted(counts.items()))
    return f"{total} storages: {parts}"


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"checkpoint: {report['path']}",
        f"format:     {report['format']} ({_human(report['size_bytes'])})",
        f"storages:   {report['summary']}",
    ]
    for device, info in report["devices"].items():
        lines.append(f"            {device}: {info['storages']} storages, {_human(info['bytes'])}")
    lines.append(f"mmap:       {'possible' if report['mmap_possible'] else 'not possible'}"
                 + ("" if report["format"] == "zip" else " (legacy format)"))
    keys = report["top_level_keys"]
    lines.append(f"top-level keys: {', '.join(keys) if keys is not None else '(not a dict)'}")
    lines.append("globals the file needs:")
    for g in report["globals"]:
        lines.append(f"  {'allowed ' if g['allowed'] else 'REFUSED '} {g['name']} (x{g['uses']})")
    if report["loadable_with_weights_only"]:
        lines.append("verdict: loads with weights_only=True under mmfix")
    else:
        refused = ",".join(g["name"] for g in report["globals"] if not g["allowed"])
        lines.append(
            "verdict: the safe loader will refuse it; only if you trust the file: "
            f"MMFIX_TRUSTED_GLOBALS={refused}"
        )
    return "\n".join(lines)
