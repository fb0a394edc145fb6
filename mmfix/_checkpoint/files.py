"""Telling what is wrong with a checkpoint file, without unpickling it.

Used after a load has already failed (so its cost never lands on a good load)
and by ``mmfix inspect``.
"""

from __future__ import annotations

import io
import os
import stat
import struct
import zipfile
import zlib
from typing import Any

ZIP_MAGIC = b"PK\x03\x04"
# torch's legacy (pre-1.6) format starts with the pickled magic number
# 0x1950a86a20f9469cfc6c, protocol 2.
LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."


def describe_source(f: Any) -> str:
    if isinstance(f, (str, os.PathLike)):
        return repr(os.fspath(f))
    name = getattr(f, "name", None)
    if isinstance(name, str):
        return repr(name)
    return f"<{type(f).__name__} buffer>"


def path_of(f: Any) -> str | None:
    if isinstance(f, (str, os.PathLike)):
        return str(os.fspath(f))
    name = getattr(f, "name", None)
    return name if isinstance(name, str) else None


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def special_file_problem(f: Any) -> str | None:
    """Why the path ``f`` cannot be read as a checkpoint without blocking or reading forever (a FIFO
    waits for a writer, a device may never end), or None (a missing path or a directory keeps
    Python's own error; buffers and file objects are the caller's)."""
    if not isinstance(f, (str, os.PathLike)):
        return None
    try:
        mode = os.stat(f).st_mode
    except (OSError, ValueError):
        return None
    for test, kind in _SPECIAL_KINDS:
        if test(mode):
            return (
                f"it is a {kind}, not a regular file; a checkpoint is read from a file (a FIFO waits for a "
                "writer, a device may never end), so mmfix does not open it. Copy the checkpoint to a file and load that"
            )
    return None


def file_format(head: bytes) -> str:
    if head.startswith(ZIP_MAGIC):
        return "zip"
    if head.startswith(LEGACY_MAGIC):
        return "legacy"
    return "unknown"


def read_head(f: Any, n: int = 64) -> bytes | None:
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return fh.read(n)
    if hasattr(f, "seek") and hasattr(f, "read"):
        try:
            pos = f.tell()
            f.seek(0)
            head = f.read(n)
            f.seek(pos)
            return head
        except (OSError, ValueError, io.UnsupportedOperation):
            return None
    return None


def _eocd_problem(source: Any) -> str | None:
    """zipfile ignores the multi-disk fields of the end-of-directory record; torch's reader does not."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65557))
            tail = fh.read()
    else:
        source.seek(0, os.SEEK_END)
        size = source.tell()
        source.seek(max(0, size - 65557))
        tail = source.read()
        source.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return None  # zipfile reports a missing directory itself
    disk, cd_disk, entries_here, entries_total = struct.unpack("<HHHH", tail[at + 4 : at + 12])
    if disk != 0 or cd_disk != 0 or (entries_here != entries_total and entries_total != 0xFFFF):
        return "its zip directory record is damaged (it claims the archive spans several disks)"
    return None


MAX_ENTRIES = 200_000
MAX_EXTRA = 1024  # torch's writer puts at most a zip64 record (28 bytes) in a directory entry


def _read_at(source: Any, offset: int, n: int) -> bytes:
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            fh.seek(offset)
            return fh.read(n)
    pos = source.tell()
    try:
        source.seek(offset)
        return bytes(source.read(n))
    finally:
        source.seek(pos)


def raw_directory_problem(source: Any) -> str | None:
    """The zip directory's entries, read before zipfile parses them: CPython's zipfile takes
    time quadratic in an entry's extra field (it re-slices it per sub-record), so a directory of
    entries with 64 KiB extra fields costs hours per megabyte. Refuses extra fields torch's
    writer never makes, and a directory that is not where its end record (and zip64 end record)
    places it, which zipfile and torch's reader would read as two archives; anything it cannot
    make sense of is left to zipfile to report."""
    size = size_of(source)
    tail = _read_at(source, max(0, size - 65557), 65557)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return None
    eocd = size - len(tail) + at
    entries, cd_size, cd_offset = struct.unpack("<HII", tail[at + 10 : at + 20])
    directory_end = eocd
    locator = tail[at - 20 : at] if at >= 20 else b""
    if locator.startswith(b"PK\x06\x07"):
        (z64_offset,) = struct.unpack("<Q", locator[8:16])
        record = _read_at(source, z64_offset, 56)
        if z64_offset > eocd or len(record) < 56 or not record.startswith(b"PK\x06\x06"):
            return _TWO_ARCHIVES  # zipfile then reads the 32-bit fields; miniz may not
        wide = struct.unpack("<QQQ", record[32:56])
        # Both readers take the zip64 record's values, but from different places: zipfile from
        # right before the locator, miniz from where the locator points. They must be one record,
        # and the end record's own fields must agree with it (or be the "see zip64" marker).
        if z64_offset != eocd - 76 or any(
            short not in (long, marker) for short, long, marker in zip((entries, cd_size, cd_offset), wide, _MARKERS)
        ):
            return _TWO_ARCHIVES
        entries, cd_size, cd_offset = wide
        directory_end = z64_offset
    elif entries == 0xFFFF or 0xFFFFFFFF in (cd_size, cd_offset):
        return None
    start = directory_end - cd_size
    if start < 0 or cd_size > size:
        return None
    if cd_offset != start:
        # zipfile reads the directory that ends at the end record and shifts every offset by the
        # gap (its correction for bytes prepended to an archive); miniz, torch's reader, reads the
        # directory at the declared offset, unshifted. torch.save writes no prefix and no gap.
        return _TWO_ARCHIVES
    directory = _read_at(source, start, cd_size)
    pos, seen = 0, 0
    while pos + 46 <= len(directory) and directory[pos : pos + 4] == b"PK\x01\x02" and seen <= MAX_ENTRIES:
        name_len, extra_len, comment_len = struct.unpack("<HHH", directory[pos + 28 : pos + 34])
        if extra_len > MAX_EXTRA:
            return (
                f"a record of its zip directory carries a {extra_len:,}-byte extra field; torch.save writes at most "
                f"a few dozen bytes there (the file is damaged or crafted)"
            )
        pos += 46 + name_len + extra_len + comment_len
        seen += 1
    return None


_MARKERS = (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
_TWO_ARCHIVES = (
    "its zip directory is not where its end record places it, so Python's zip reader (which the check uses) "
    "and torch's would read different archives; torch.save writes the directory right before the end record "
    "(the file is damaged or crafted)"
)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(name: str) -> str:
    """A record name as torch's zip reader (miniz) compares it: ASCII letters without case."""
    return name.translate(_ASCII_LOWER)


def records_problem(infos: list[zipfile.ZipInfo], source: Any, starts: list[int | None] | None = None) -> str | None:
    """Why the records of a zip archive are not laid out as torch.save writes them, such that
    torch's reader could load other bytes, or far more, than the check read; or None.

    torch.save (PyTorchStreamWriter) writes every record stored, under a distinct name, one after
    another. torch's reader (miniz) finds records by name ignoring ASCII case, so two names that
    differ only in case are one name to torch and two to zipfile; it inflates a compressed record
    whole, once per directory entry that points at it. So: names distinct ignoring case, no
    compression, no two records sharing bytes. Then every byte torch reads is a byte of the file,
    read once, and the pickle is no larger than the file (the check's budget is in proportion to
    the file). A record whose local header is missing or that runs past the file is damage torch's
    reader stops at; it is left to the loader's diagnosis."""
    problem = names_problem(infos)
    if problem:
        return problem
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            return (
                f"its record {info.filename!r} is compressed (method {info.compress_type}); torch.save writes every "
                "record uncompressed, and mmfix does not let torch inflate records it cannot bound before loading. "
                "If the file was re-zipped, load it where you trust it and save it again with torch.save, or "
                "rebuild the archive uncompressed (`zip -0`)"
            )
    size = size_of(source)
    if starts is None:
        starts = data_starts(infos, source)
    # A record without its local header, or running past the file, is damage torch's reader
    # stops at: left to the loader's diagnosis.
    spans = [
        (info.header_offset, start + info.compress_size, info.filename)
        for info, start in zip(infos, starts)
        if start is not None and start + info.compress_size <= size
    ]
    return overlap_problem(spans)


def data_starts(infos: list[zipfile.ZipInfo], source: Any) -> list[int | None]:
    """Where each record's bytes start in the file: after its *local* header, whose extra field
    (torch pads it for alignment) differs from the directory's; None where no local header stands
    at the offset the directory gives. One 30-byte read per record; a file object is left where
    it was."""
    raw = open(source, "rb") if isinstance(source, (str, os.PathLike)) else source
    position = raw.tell()
    starts: list[int | None] = []
    try:
        for info in infos:
            raw.seek(info.header_offset)
            header = raw.read(30)
            if len(header) < 30 or header[:4] != b"PK\x03\x04":
                starts.append(None)
                continue
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            starts.append(info.header_offset + 30 + name_len + extra_len)
    finally:
        if raw is source:
            raw.seek(position)
        else:
            raw.close()
    return starts


def names_problem(infos: list[zipfile.ZipInfo]) -> str | None:
    """Two records one name to torch's zip reader (miniz compares names ignoring ASCII case), or a
    name zipfile reads otherwise than miniz (it cuts a name at a NUL byte)."""
    names: dict[bytes, str] = {}
    for info in infos:
        # the bytes miniz compares
        raw = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")
        if b"\0" in raw:
            return f"its zip directory names a record {info.orig_filename!r} with a NUL byte (the file is damaged or crafted)"
        other = names.get(raw.lower())
        if other is None:
            names[raw.lower()] = info.orig_filename
            continue
        what = f"the record {other!r} twice" if other == info.orig_filename else f"{other!r} and {info.orig_filename!r}"
        return (
            f"its zip directory lists {what}, one name to torch's zip reader (it ignores case), so which record "
            "is loaded depends on the reader (the file is damaged or crafted)"
        )
    return None


def overlap_problem(spans: list[tuple[int, int, str]]) -> str | None:
    """(start, end, name) of each record, local header included: two that share bytes."""
    spans = sorted(spans)
    for (_, end, name), (start, _, other) in zip(spans, spans[1:]):
        if start < end:
            return (
                f"its records {name!r} and {other!r} share bytes in the file, so torch's zip reader would read "
                "them once per name; torch.save writes each record apart (the file is damaged or crafted)"
            )
    return None


_CHUNK = 1 << 20


def _zip_problem(source: Any) -> str | None:
    problem = _eocd_problem(source) or raw_directory_problem(source)
    if problem:
        return problem
    try:
        with zipfile.ZipFile(source) as archive:
            return _directory_problem(archive, source) or _crc_problem(archive, source)
    except zipfile.BadZipFile as exc:
        return (
            f"it starts like a zip archive but its directory cannot be read ({exc}); "
            "the file is truncated — typically a save that was interrupted or a copy that did not finish"
        )
    except (EOFError, OSError, ValueError, struct.error, NotImplementedError, zlib.error, RuntimeError) as exc:
        # (zipfile raises RuntimeError for an encrypted record, which torch.save never writes)
        return f"the zip archive cannot be read ({exc}); the file is truncated or damaged"


def size_of(source: Any) -> int:
    if isinstance(source, (str, os.PathLike)):
        return os.path.getsize(source)
    pos = source.tell()
    source.seek(0, os.SEEK_END)
    size = source.tell()
    source.seek(pos)
    return int(size)


def _directory_problem(archive: zipfile.ZipFile, source: Any) -> str | None:
    """One record, one name, one place: torch.save writes nothing else. A record listed
    twice or overlapping another is how zip bombs multiply a little data into a lot."""
    infos = archive.infolist()
    if len(infos) > MAX_ENTRIES:
        return f"its zip directory lists {len(infos):,} records, more than any checkpoint (the file is damaged)"
    if not any(i.filename.endswith("data.pkl") for i in infos):
        return "it is a zip archive but holds no data.pkl record, so torch.save did not write it"
    problem = names_problem(infos)
    if problem:
        return problem
    size = size_of(source)
    spans = []
    for info, start in zip(infos, data_starts(infos, source)):
        if start is None:
            return f"the record {info.filename!r} has no local header where the directory says (the file is damaged)"
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            # torch's zip reader (miniz) refuses such a record; zipfile reads it.
            return (
                f"the stored record {info.filename!r} claims {info.file_size:,} bytes in "
                f"{info.compress_size:,} (the file is damaged)"
            )
        end = start + info.compress_size
        if end > size:
            return f"the record {info.filename!r} runs past the end of the file (the file is truncated)"
        spans.append((info.header_offset, end, info.filename))
    return overlap_problem(spans)


def _crc_problem(archive: zipfile.ZipFile, source: Any) -> str | None:
    """CRC of every record, reading each stored byte once; compressed records (torch writes
    none) get an inflation budget tied to the file's size instead of testzip's none."""
    budget = max(64 << 20, 16 * size_of(source))
    for info in archive.infolist():
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            # zipfile inflates bzip2 and lzma in one step whatever the budget; torch reads neither.
            return (
                f"the record {info.filename!r} is compressed with method {info.compress_type}, which torch's "
                "zip reader cannot read and torch.save never writes (the file is damaged or crafted)"
            )
        if info.compress_type != zipfile.ZIP_STORED:
            if info.file_size > budget:
                return (
                    f"the compressed record {info.filename!r} claims to inflate to {info.file_size:,} bytes "
                    f"from {info.compress_size:,}; torch.save never compresses records, and mmfix does not "
                    "inflate that much to check it (the file is damaged or crafted)"
                )
            budget -= info.file_size
        try:
            with archive.open(info) as member:
                while member.read(_CHUNK):
                    pass
        except zipfile.BadZipFile:
            return f"the record {info.filename!r} inside the archive fails its CRC check (the file is damaged)"
        except zlib.error as exc:
            return f"the compressed record {info.filename!r} does not inflate ({exc}; the file is damaged)"
    return None


def container_problem(f: Any) -> str | None:
    try:
        head = read_head(f)
    except OSError:
        return None  # missing files and directories keep their own OSError
    if head is None:
        return None
    if not head:
        return "the file is empty (0 bytes); the save that wrote it was probably interrupted"
    kind = file_format(head)
    if kind == "zip":
        if isinstance(f, (str, os.PathLike)):
            return _zip_problem(os.fspath(f))
        try:
            pos = f.tell()
            f.seek(0)
            try:
                return _zip_problem(f)
            finally:
                f.seek(pos)
        except (OSError, ValueError, io.UnsupportedOperation):
            return None
    if kind == "legacy":
        return None  # a damaged legacy file cannot be told from a good one without unpickling
    if head.startswith(b"\x80"):
        return "it is a plain pickle, not a file written by torch.save (no zip archive, no torch magic number)"
    preview = head[:8]
    return (
        f"it does not start like a PyTorch checkpoint (first bytes {preview!r}; "
        "expected a zip archive b'PK\\x03\\x04' or torch's legacy pickle header)"
    )


def is_mappable(f: Any) -> bool:
    """Whether torch.load(..., mmap=True) can take ``f``: a zip checkpoint given by path."""
    if not isinstance(f, (str, os.PathLike)):
        return False
    try:
        head = read_head(f, 4)
    except OSError:
        return False
    return head is not None and head.startswith(ZIP_MAGIC)
