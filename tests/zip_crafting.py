"""Hand-assembled torch zip checkpoints: every byte of the directory and the pickle chosen by the test.

``checkpoint(path, tensors, records, ...)`` writes what torch.save writes (data.pkl, byteorder,
data/<key>, version, .data/serialization_id), with the pickle's storage declarations, each
record's compression and alignment, extra directory entries and holes chosen freely.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_END = struct.Struct("<4sHHHHIIH")


@dataclass
class Tensor:
    """One tensor of the pickle: its storage's key, the numel the pickle declares, the storage
    class, and the tensor's own length."""

    key: Any
    numel: int
    storage: Any = torch.FloatStorage
    length: int | None = None


class _Rebuild:
    def __init__(self, spec: Tensor) -> None:
        self.spec = spec

    def __reduce__(self) -> tuple[Any, ...]:
        length = self.spec.numel if self.spec.length is None else self.spec.length
        return (
            torch._utils._rebuild_tensor_v2,
            (_Pid(self.spec), 0, (length,), (1,), False, collections.OrderedDict()),
        )


class _Pid:
    def __init__(self, spec: Tensor) -> None:
        self.spec = spec


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, _Pid):
            s = obj.spec
            return ("storage", s.storage, s.key, "cpu", s.numel)
        return None


def pickle_of(tensors: dict[str, Tensor]) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump({name: _Rebuild(spec) for name, spec in tensors.items()})
    return buf.getvalue()


def checkpoint(
    path: Path,
    tensors: dict[str, Tensor],
    records: dict[str, bytes],
    *,
    deflate: tuple[str, ...] = (),
    align: int = 64,
    holes: tuple[str, ...] = (),
    aliases: dict[str, str] | None = None,
    gap: int = 0,
    zip64: bool = False,
) -> None:
    """Write a checkpoint whose storage records are ``records`` (key -> bytes). ``deflate``: keys
    whose records are compressed; ``align``: data offsets of stored records (0: not aligned);
    ``holes``: keys whose (all-zero) bytes are left as a hole in the file; ``aliases``: extra
    directory entries (key -> key) that point at another record's bytes; ``gap``: bytes of hole
    between the last record and the directory; ``zip64``: sizes, offsets and counts in zip64 fields
    (as torch.save writes them past 4 GiB)."""
    entries = [("archive/data.pkl", pickle_of(tensors), ""), ("archive/byteorder", b"little", "")]
    entries += [(f"archive/data/{key}", data, key) for key, data in records.items()]
    entries += [("archive/version", b"3\n", ""), ("archive/.data/serialization_id", b"0" * 40, "")]
    central = {}
    with open(path, "wb") as fh:
        for name, data, key in entries:
            method = 8 if key and key in deflate else 0
            payload = zlib.compress(data)[2:-4] if method else data
            raw_name = name.encode()
            at = fh.tell()
            extra = b""
            if align and not method:
                pad = -(at + _LOCAL.size + len(raw_name) + 4) % align
                extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            crc = zlib.crc32(data)
            fh.write(
                _LOCAL.pack(
                    b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(payload), len(data), len(raw_name), len(extra)
                )
            )
            fh.write(raw_name + extra)
            if key in holes:
                assert not any(data), "a hole reads as zeros"
                fh.seek(len(payload), io.SEEK_CUR)
            else:
                fh.write(payload)
            central[name] = (method, crc, len(payload), len(data), at)
        for alias, target in (aliases or {}).items():
            central[f"archive/data/{alias}"] = central[f"archive/data/{target}"]
        fh.seek(gap, io.SEEK_CUR)
        directory_at = fh.tell()
        directory = b""
        for name, (method, crc, csize, size, at) in central.items():
            raw_name = name.encode()
            extra = b""
            if zip64:
                extra = struct.pack("<HHQQQ", 1, 24, size, csize, at)
                size = csize = at = 0xFFFFFFFF
            directory += _CENTRAL.pack(
                b"PK\x01\x02", 45, 45, 0, method, 0, 0x21, crc, csize, size, len(raw_name), len(extra), 0, 0, 0, 0, at
            )
            directory += raw_name + extra
        fh.write(directory)
        count, length, start = len(central), len(directory), directory_at
        if zip64:
            end64 = fh.tell()
            fh.write(struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, length, start))
            fh.write(struct.pack("<4sIQI", b"PK\x06\x07", 0, end64, 1))
            count, length, start = 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF
        fh.write(_END.pack(b"PK\x05\x06", 0, 0, count, count, length, start, 0))


# --- containers torch's reader reads otherwise than the check (issue 28, zip-level findings) -------

_STANDARD = (
    ("byteorder", b"little"),
    ("data/0", b"\0" * 4),
    ("version", b"3\n"),
    (".data/serialization_id", b"0" * 40),
)


def _write_records(path: Path, records: list[tuple[str, bytes]], *, deflate: tuple[str, ...] = ()) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in records:
            method = zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED
            archive.writestr(name, data, compress_type=method)
    return path


def case_twins(path: Path, checked: bytes, loaded: bytes) -> Path:
    """archive/data.pkl (``checked``) and archive/DATA.PKL (``loaded``): torch's zip reader (miniz)
    finds records ignoring case and takes the later one, zipfile tells them apart."""
    records = [("archive/data.pkl", checked)] + [(f"archive/{n}", d) for n, d in _STANDARD]
    return _write_records(path, records + [("archive/DATA.PKL", loaded)])


def _local(out: bytearray, name: str, data: bytes, method: int = 0, raw: bytes | None = None) -> tuple:
    payload = data if raw is None else raw
    at, crc, encoded = len(out), zlib.crc32(data), name.encode()
    out += _LOCAL.pack(b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(payload), len(data), len(encoded), 0)
    out += encoded + payload
    return at, method, crc, len(payload), len(data)


def _central(name: str, entry: tuple, shift: int = 0) -> bytes:
    at, method, crc, csize, size = entry
    encoded = name.encode()
    fields = (b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc, csize, size, len(encoded), 0, 0, 0, 0, 0, at - shift)
    return _CENTRAL.pack(*fields) + encoded


def two_directories(path: Path, checked: bytes, loaded: bytes) -> Path:
    """Two whole archives and two central directories: the end record's offset points at the first
    directory (``loaded``'s, which miniz reads), the second ends right at the end record and lists
    ``checked``'s records shifted by the first's length, which zipfile reads as prepended bytes."""
    out = bytearray()
    names = ["archive/data.pkl"] + [f"archive/{n}" for n, _ in _STANDARD]
    loaded_entries = [_local(out, n, d) for n, d in zip(names, [loaded] + [d for _, d in _STANDARD])]
    checked_entries = [_local(out, n, d) for n, d in zip(names, [checked] + [d for _, d in _STANDARD])]
    first = b"".join(_central(n, e) for n, e in zip(names, loaded_entries))
    second = b"".join(_central(n, e, len(first)) for n, e in zip(names, checked_entries))
    at = len(out)
    out += first + second
    out += _END.pack(b"PK\x05\x06", 0, 0, len(names), len(names), len(second), at, 0)
    path.write_bytes(bytes(out))
    return path


def _deflated_zeros(nbytes: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(min(nbytes, 1 << 20))
    parts = [packer.compress(chunk[: min(len(chunk), nbytes - done)]) for done in range(0, nbytes, len(chunk) or 1)]
    return b"".join(parts) + packer.flush()


def shared_deflated_record(path: Path, pickle_of_entries: Any, nbytes: int, entries: int) -> Path:
    """One deflated record of ``nbytes`` zeros listed ``entries`` times (data/0 .. data/k-1):
    torch inflates it once per storage. ``pickle_of_entries(numel, entries)`` is the pickle."""
    out = bytearray()
    records = [("archive/data.pkl", _local(out, "archive/data.pkl", pickle_of_entries(nbytes // 4, entries)))]
    records.append(("archive/byteorder", _local(out, "archive/byteorder", b"little")))
    raw = _deflated_zeros(nbytes)
    at, crc = len(out), zlib.crc32(bytes(nbytes))
    encoded = b"archive/data/0"
    out += _LOCAL.pack(b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, len(raw), nbytes, len(encoded), 0) + encoded + raw
    records += [(f"archive/data/{k}", (at, 8, crc, len(raw), nbytes)) for k in range(entries)]
    records.append(("archive/version", _local(out, "archive/version", b"3\n")))
    directory = b"".join(_central(n, e) for n, e in records)
    start = len(out)
    out += directory + _END.pack(b"PK\x05\x06", 0, 0, len(records), len(records), len(directory), start, 0)
    path.write_bytes(bytes(out))
    return path


def deflated_pickle(path: Path, pickle_bytes: bytes) -> Path:
    """torch.save's records with data.pkl deflated (torch.save writes every record stored)."""
    records = [("archive/data.pkl", pickle_bytes)] + [(f"archive/{n}", d) for n, d in _STANDARD]
    return _write_records(path, records, deflate=("archive/data.pkl",))


def rezipped(source: Path, path: Path) -> Path:
    """An honest checkpoint whose records were compressed by re-zipping it (``zip -9``)."""
    import zipfile

    with zipfile.ZipFile(source) as src:
        records = [(info.filename, src.read(info)) for info in src.infolist()]
    return _write_records(path, records, deflate=tuple(n for n, _ in records))
