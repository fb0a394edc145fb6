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
from typing import IO, Any, Callable

from .._errors import CheckpointSaveError

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
    removed: list[str] = []
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
        detail = (
            f"it needs {needed:,} bytes and {free:,} bytes are free in {folder}"
            if free is not None
            else f"it needs {needed:,} bytes"
        )
        fix = "Free space (or raise the quota), or point --work-dir at a larger disk, then resume with --resume."
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = "writing there is not permitted" if exc.errno != errno.EROFS else "the filesystem is read-only"
        detail = f"({exc.strerror})"
        fix = "Check the folder's permissions, or point --work-dir somewhere writable, then resume with --resume."
    else:
        what = exc.strerror or type(exc).__name__
        detail = f"({needed:,} bytes to write; {free:,} bytes free)" if free is not None else ""
        fix = "Then resume with --resume."
    message = (
        f"could not save {path}: {what}; {detail}. Nothing was written under that name and the previous "
        f"checkpoints are untouched. {fix}"
    )
    error = CheckpointSaveError(exc.errno or 0, message, path)
    error.needed = needed  # type: ignore[attr-defined]
    error.free = free  # type: ignore[attr-defined]
    return error


def _stored_bytes(obj: Any) -> int:
    """Roughly how many bytes torch.save will write for ``obj``: its tensors' storages."""
    import torch

    seen: set[int] = set()
    total = 0
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


_KICK_BYTES = 8 << 20
_sync_file_range: Any = None


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing this range now (Linux sync_file_range), so the
    final fsync waits for the tail only, not for the whole file."""
    global _sync_file_range
    if _sync_file_range is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            func = libc.sync_file_range
            func.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
            _sync_file_range = func
        except (OSError, AttributeError):
            _sync_file_range = False
    if _sync_file_range:
        _sync_file_range(fd, offset, length, 2)  # SYNC_FILE_RANGE_WRITE: start, do not wait


class _StreamingFile(io.RawIOBase):
    """The file torch.save writes into: plain os.write, with writeback started as it goes."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.pos = 0
        self.kicked = 0
        # torch's zip writer swallows the OSError of a failed write and reports its
        # own "unexpected pos": keep the real cause.
        self.error: OSError | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        try:
            while done < len(view):
                done += os.write(self.fd, view[done:])
        except OSError as exc:
            self.error = exc
            raise
        self.pos += done
        if self.pos - self.kicked >= _KICK_BYTES:
            _start_writeback(self.fd, self.kicked, self.pos - self.kicked)
            self.kicked = self.pos
        return done

    def tell(self) -> int:
        return self.pos

    def finish(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


def _replace_atomically(path: str, write: Callable[[_StreamingFile], None], needed: Callable[[], int]) -> None:
    """The one atomic-replace sequence: temp file in the same folder, ``write`` into it,
    fsync, rename over ``path``, fsync the folder. On failure: temp file removed, one
    CheckpointSaveError (``needed`` says how many bytes the write wanted)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    remove_stale_temps(folder)
    tmp = temp_path_for(path)
    fh: _StreamingFile | None = None
    try:
        with _StreamingFile(tmp) as fh:
            write(fh)
            fh.finish()
        os.replace(tmp, path)
    except (OSError, RuntimeError) as failure:
        try:
            os.remove(tmp)
        except OSError:
            pass
        error: OSError | RuntimeError = failure
        if fh is not None and fh.error is not None:
            error = fh.error  # torch's zip writer hides the OSError behind "unexpected pos"
        if isinstance(error, RuntimeError):
            if "write" not in str(error).lower():
                raise
            # torch's zip writer may report a failed write without an errno: tell a
            # full disk from other failures by what was needed and what is free.
            free = free_bytes(folder)
            code = errno.ENOSPC if free is not None and free < needed() + (1 << 20) else errno.EIO
            error = OSError(code, os.strerror(code))
        raise _save_error(path, needed(), error) from None
    fsync_dir(folder)


def write_bytes(path: str, data: bytes | memoryview) -> None:
    """Atomically replace ``path`` with ``data``."""

    def write(fh: _StreamingFile) -> None:
        fh.write(data)

    _replace_atomically(path, write, lambda: len(data))


def save_torch(obj: Any, path: str) -> None:
    """``torch.save(obj, path)``, atomically: streamed into the temporary file (stock
    MMEngine serialises into memory and copies it out)."""
    import torch

    _replace_atomically(path, lambda fh: torch.save(obj, fh), lambda: _stored_bytes(obj))  # type: ignore[arg-type]


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
