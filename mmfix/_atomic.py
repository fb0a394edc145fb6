"""Atomic file writes: a crash leaves the old file or the new one, never a torn one.

Write to a temporary file in the same folder, flush and fsync it, rename it over
the final name, fsync the folder (so the rename itself survives a power loss).
A write that fails (disk full, quota, permissions) removes its temporary file
and raises one ``CheckpointSaveError`` saying which file, how many bytes it
needed and how many were free.
"""
from __future__ import annotations

import errno
import io
import os
from typing import IO, Any

from ._errors import CheckpointSaveError

TMP_MARK = ".mmfix-tmp-"


def temp_path_for(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}{TMP_MARK}{os.getpid()}")


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and TMP_MARK in name


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(folder: str) -> list[str]:
    """Temporary files of writers that died (SIGKILL, node crash) before renaming."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not is_temp_name(name):
            continue
        pid_text = name.rsplit(TMP_MARK, 1)[1]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and _pid_alive(int(pid_text)):
            continue
        try:
            os.remove(os.path.join(folder, name))
            removed.append(name)
        except OSError:
            pass
    return removed


def fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename is still atomic
    finally:
        os.close(fd)


def free_bytes(folder: str) -> int | None:
    try:
        st = os.statvfs(folder or ".")
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _save_error(path: str, needed: int, exc: OSError) -> CheckpointSaveError:
    folder = os.path.dirname(os.path.abspath(path))
    free = free_bytes(folder)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "the disk is full" if exc.errno == errno.ENOSPC else "the disk quota is exhausted"
        detail = f"it needs {needed:,} bytes and {free:,} bytes are free in {folder}" if free is not None \
            else f"it needs {needed:,} bytes"
        fix = "Free space (or raise the quota), or point --work-dir at a larger disk, then resume with --resume."
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = "writing there is not permitted" if exc.errno != errno.EROFS else "the filesystem is read-only"
        detail = f"({exc.strerror})"
        fix = "Check the folder's permissions, or point --work-dir somewhere writable, then resume with --resume."
    else:
        what = exc.strerror or type(exc).__name__
        detail = f"({needed:,} bytes to write; {free:,} bytes free)" if free is not None else ""
        fix = "Then resume with --resume."
    message = (f"could not save {path}: {what}; {detail}. Nothing was written under that name and the previous "
               f"checkpoints are untouched. {fix}")
    error = CheckpointSaveError(exc.errno or 0, message)
    error.filename = path
    error.needed = needed  # type: ignore[attr-defined]
    error.free = free  # type: ignore[attr-defined]
    return error


def write_bytes(path: str, data: bytes | memoryview) -> None:
    """Atomically replace ``path`` with ``data``."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    remove_stale_temps(folder)
    tmp = temp_path_for(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise _save_error(path, len(data), exc) from None
    fsync_dir(folder)


class AtomicTextFile(io.StringIO):
    """``open(path, 'w')`` whose content replaces ``path`` atomically on close."""

    def __init__(self, path: str, encoding: str = "utf-8") -> None:
        super().__init__()
        self._path = path
        self._encoding = encoding

    def close(self) -> None:
        if not self.closed:
            data = self.getvalue().encode(self._encoding)
            super().close()
            write_bytes(self._path, data)

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.close()
        else:  # the writer failed: leave the old file as it was
            super().close()


def open_atomic(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> IO[Any]:
    """``open`` that makes plain text writes atomic and passes everything else through."""
    if mode in ("w", "wt") and not args and set(kwargs) <= {"encoding"}:
        return AtomicTextFile(os.fspath(path), kwargs.get("encoding") or "utf-8")
    return open(path, mode, *args, **kwargs)
