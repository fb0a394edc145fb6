"""Whether ``torch.load(..., mmap=True)`` of a file gives exactly what a plain load gives.

A mapped load takes each storage's bytes raw from the file, at the offset torch's zip
reader (miniz) gives for its record, for the length the pickle declares. A plain load
inflates the record, and refuses one whose size differs from the declaration. So the two
agree exactly when every storage the pickle declares is a *stored* (uncompressed) record
of exactly the declared size, at an offset aligned as ``torch.save`` writes it, and no two
storages share bytes (in one mapping an in-place update of one would show in the other;
plain loads copy). This module checks that, reading only the zip directory and the pickle
(statically: nothing is built or imported), and returns where every storage's bytes lie.

The directory is read here with a small linear parser (CPython's ``zipfile`` parses extra
fields in quadratic time) and every fact used is cross-checked against torch's own reader:
the record list, each record's local-header offset, size and data offset. Where the two
readers disagree, the file is read the plain way.
"""

from __future__ import annotations

import io
import os
import re
import struct
from dataclasses import dataclass
from typing import Any

from . import files, pickle_reader

#: torch.save aligns every storage record to 64 bytes (torch.utils.serialization.config.save.
#: storage_alignment); a plain load's storages are 64-byte aligned allocations
ALIGNMENT = 64
MAX_DIRECTORY = 64 << 20
#: the file's bytes outside its storages (the pickle, headers, directory) that a mapping may
#: leave to be compared by the ranks: more means a crafted file (records padded with gaps)
MAX_STRUCTURE = pickle_reader.MAX_BYTES + (64 << 10)
_PER_RECORD = 4096  # headers, name, alignment padding and data descriptor of one record
#: the keys torch.save writes are short strings (decimal numbers); the static reader keeps the
#: first 200 characters of a key, so a longer one might name another record than torch reads
_KEY = re.compile(r"[0-9A-Za-z_.+-]{1,128}")
#: element size of each storage class torch.save writes, by the name the pickle uses
ITEMSIZE = {
    "torch.DoubleStorage": 8,
    "torch.FloatStorage": 4,
    "torch.HalfStorage": 2,
    "torch.BFloat16Storage": 2,
    "torch.LongStorage": 8,
    "torch.IntStorage": 4,
    "torch.ShortStorage": 2,
    "torch.CharStorage": 1,
    "torch.ByteStorage": 1,
    "torch.BoolStorage": 1,
    "torch.ComplexDoubleStorage": 16,
    "torch.ComplexFloatStorage": 8,
    "torch.QInt8Storage": 1,
    "torch.QUInt8Storage": 1,
    "torch.QInt32Storage": 4,
    "torch.UntypedStorage": 1,
    "torch.storage.UntypedStorage": 1,
}
_EOCD = struct.Struct("<4sHHHHIIH")
_LOCATOR = struct.Struct("<4sIQI")
_EOCD64 = struct.Struct("<4sQHHIIQQQQ")
_ENTRY = struct.Struct("<4sHHHHHHIIIHHHHHII")


@dataclass(frozen=True)
class Layout:
    """Where the storages of a mappable file lie: (offset, nbytes), sorted and disjoint."""

    size: int
    spans: tuple[tuple[int, int], ...]

    def structure(self) -> list[tuple[int, int]]:
        """(offset, length) of every byte outside the storages: pickle, headers, directory."""
        out, at = [], 0
        for start, length in self.spans:
            if start > at:
                out.append((at, start - at))
            at = max(at, start + length)
        if at < self.size:
            out.append((at, self.size - at))
        return out


@dataclass(frozen=True)
class _Entry:
    method: int
    compressed: int
    size: int
    header_offset: int


def check(path: str) -> Layout | str:
    """The layout of ``path`` if a mapped load reads exactly what a plain load reads, else why not."""
    try:
        import torch
        from torch.utils.serialization import config

        if getattr(config.load, "calculate_storage_offsets", False):
            # offsets are then computed from miniz's writing habits, not read from the file
            return "torch.utils.serialization.config.load.calculate_storage_offsets is set"
        if not reader_reports_placement():
            return (
                f"torch {torch.__version__}'s zip reader cannot say where it places records (newer torch can), "
                "so it cannot be checked that a mapped load reads what a plain load reads"
            )
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            directory = _directory(fh.fileno(), size)
            if isinstance(directory, str):
                return directory
            # torch reads the same open file (a path could be replaced in between)
            reader = torch._C.PyTorchFileReader(f"/proc/self/fd/{fh.fileno()}")
            return _layout(reader, *directory, size)
    except Exception as exc:  # a verdict, never a failed load: torch's reader raises RuntimeError, files OSError
        return f"its zip archive cannot be read ({type(exc).__name__}: {str(exc)[:200]})"


def reader_reports_placement() -> bool:
    """Whether torch's zip reader reports each record's size and header offset (not torch 2.7's):
    without them a mapped load is never checked, and the ranks read their own copies."""
    import torch

    reader = torch._C.PyTorchFileReader
    return all(hasattr(reader, m) for m in ("get_record_size", "get_record_header_offset", "get_record_offset"))


def _layout(reader: Any, entries: dict[str, _Entry], directory_at: int, size: int) -> Layout | str:
    first = next(iter(entries))
    prefix = first[: first.find("/") + 1]
    if not prefix or any(not name.startswith(prefix) for name in entries):
        return "its records are not all in one folder"
    records = {name[len(prefix) :]: entry for name, entry in entries.items()}
    theirs = reader.get_all_records()
    if len(theirs) != len(records) or set(theirs) != set(records):
        return "torch's zip reader lists other records than its directory holds"
    data_at = {}
    for name, entry in records.items():
        if not _agrees(reader, name, entry):
            return f"torch's zip reader places the record {name!r} elsewhere than its directory does"
        data_at[name] = reader.get_record_offset(name)
    # Every record (local header and bytes) apart from every other and before the directory: then
    # each byte torch reads besides the storages' (headers, pickle, byte order, directory) lies
    # outside every storage, so a copy whose bytes outside the storages equal a file's has the
    # file's layout too.
    regions = sorted((entry.header_offset, data_at[name] + entry.compressed) for name, entry in records.items())
    for (_, end), (later, _) in zip(regions, regions[1:]):
        if end > later:
            return "two of its records share bytes"
    if regions[-1][1] > directory_at:
        return "a record runs into its zip directory"
    pkl = records.get("data.pkl")
    if pkl is None or pkl.size > pickle_reader.MAX_BYTES:
        return "it has no data.pkl record of a size mmfix reads"
    try:
        reading = pickle_reader.read(io.BytesIO(reader.get_record("data.pkl")))
    except pickle_reader.PickleUnreadable as exc:
        return f"its pickle cannot be read statically ({exc})"
    if reading.unusual_storages:
        return "its pickle refers to storages in a form torch.save never writes"
    types = _storage_types(reading)
    spans: dict[str, tuple[int, int]] = {}
    for storage in reading.storages:
        key, numel, type_name = storage["key"], storage["numel"], types.get(storage["type"])
        if type(numel) is not int or numel < 0 or not _KEY.fullmatch(key) or type_name is None:
            return "its pickle declares a storage in a form torch.save never writes"
        name = f"data/{key}"
        nbytes = numel * ITEMSIZE[type_name]
        problem = _record_problem(name, records.get(name), nbytes, data_at.get(name, 0))
        if problem:
            return problem
        spans[name] = (data_at[name], nbytes)
    ordered = tuple(sorted(spans.values()))
    structure = size - sum(length for _, length in ordered)
    if structure > MAX_STRUCTURE + _PER_RECORD * len(records):
        return f"{structure:,} of its bytes are neither storages nor the records torch.save writes"
    return Layout(size, ordered)


def _storage_types(reading: pickle_reader.Reading) -> dict[str, str]:
    """Short storage class name -> the one full name the file uses for it, if that is torch's.
    (The static reader keeps only the last part of the name for each storage.)"""
    spellings: dict[str, set[str]] = {}
    for name in reading.globals:
        spellings.setdefault(name.rsplit(".", 1)[-1], set()).add(name)
    out = {}
    for short, names in spellings.items():
        if len(names) == 1 and next(iter(names)) in ITEMSIZE:
            out[short] = next(iter(names))
    return out


def _record_problem(name: str, entry: _Entry | None, nbytes: int, offset: int) -> str | None:
    if entry is None:
        return f"its pickle refers to a record {name!r} that the archive does not hold"
    if entry.method != 0 or entry.compressed != entry.size:
        return f"its record {name!r} is compressed (torch.save stores records as they are)"
    if entry.size != nbytes:
        return f"its record {name!r} holds {entry.size:,} bytes and the pickle declares {nbytes:,}"
    if nbytes and offset % ALIGNMENT:
        return f"its record {name!r} is not aligned to {ALIGNMENT} bytes as torch.save writes records"
    return None


def _agrees(reader: Any, name: str, entry: _Entry) -> bool:
    return bool(
        reader.get_record_size(name) == entry.size and reader.get_record_header_offset(name) == entry.header_offset
    )


def _directory(fd: int, size: int) -> tuple[dict[str, _Entry], int] | str:
    """The central directory (full record name -> entry) and where it starts, read in one pass
    (linear in its size)."""
    tail_start = max(0, size - (0xFFFF + _EOCD.size))
    tail = os.pread(fd, size - tail_start, tail_start)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        return "it has no zip directory record"
    _, disk, cd_disk, _, count, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
    eocd = tail_start + at
    directory_end = eocd
    if eocd >= _LOCATOR.size:
        locator = os.pread(fd, _LOCATOR.size, eocd - _LOCATOR.size)
        if locator[:4] == b"PK\x06\x07":
            record = os.pread(fd, _EOCD64.size, _LOCATOR.unpack(locator)[2])
            if len(record) < _EOCD64.size or record[:4] != b"PK\x06\x06":
                return "its zip64 directory record is missing"
            _, _, _, _, disk, cd_disk, _, count64, size64, offset64 = _EOCD64.unpack(record)
            directory_end = _LOCATOR.unpack(locator)[2]
            count = count64 if count == 0xFFFF else count
            cd_size = size64 if cd_size == 0xFFFFFFFF else cd_size
            cd_offset = offset64 if cd_offset == 0xFFFFFFFF else cd_offset
    if disk or cd_disk:
        return "its zip directory claims several disks"
    if count > files.MAX_ENTRIES or cd_size > MAX_DIRECTORY or cd_offset + cd_size > eocd:
        return "its zip directory is larger than any checkpoint's"
    if cd_offset + cd_size != directory_end:
        # zipfile would read another directory (the one ending here); torch.save leaves no gap
        return "its zip directory is not where its end record places it"
    raw = os.pread(fd, cd_size, cd_offset)
    entries: dict[str, _Entry] = {}
    pos = 0
    for _ in range(count):
        if pos + _ENTRY.size > len(raw):
            return "its zip directory is truncated"
        fields = _ENTRY.unpack_from(raw, pos)
        if fields[0] != b"PK\x01\x02":
            return "its zip directory is damaged"
        method, compressed, plain, name_len, extra_len, comment_len = (fields[i] for i in (4, 8, 9, 10, 11, 12))
        header_offset = fields[16]
        start = pos + _ENTRY.size
        end = start + name_len + extra_len + comment_len
        if end > len(raw):
            return "its zip directory is truncated"
        try:
            name = raw[start : start + name_len].decode("ascii")
        except UnicodeDecodeError:
            return "it names a record with other than ASCII characters, which torch.save never writes"
        wide = _zip64(raw, start + name_len, start + name_len + extra_len, plain, compressed, header_offset)
        if wide is None:
            return "its zip directory has a damaged zip64 field"
        if name in entries:
            return f"its zip directory lists the record {name!r} twice"
        entries[name] = _Entry(method, wide[1], wide[0], wide[2])
        pos = end
    if not entries:
        return "its zip archive holds no records"
    return entries, cd_offset


def _zip64(raw: bytes, at: int, end: int, plain: int, compressed: int, offset: int) -> tuple[int, int, int] | None:
    """(size, compressed size, header offset) with any zip64 extra field applied."""
    while at + 4 <= end:
        kind, length = struct.unpack_from("<HH", raw, at)
        if at + 4 + length > end:
            return None
        if kind == 1:
            values = [plain == 0xFFFFFFFF, compressed == 0xFFFFFFFF, offset == 0xFFFFFFFF]
            field = at + 4
            read = []
            for wanted in values:
                if wanted:
                    if field + 8 > at + 4 + length:
                        return None
                    read.append(struct.unpack_from("<Q", raw, field)[0])
                    field += 8
                else:
                    read.append(None)
            plain = plain if read[0] is None else read[0]
            compressed = compressed if read[1] is None else read[1]
            offset = offset if read[2] is None else read[2]
        at += 4 + length
    return plain, compressed, offset
