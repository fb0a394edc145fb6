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

# Temporary files live in the checkpoint's own folder (a rename is atomic only within one file
# system), which may be a shared, non-sticky work directory on a network file system that other
# users, containers and hosts write to. So:
#
# * a temporary file is created with O_CREAT|O_EXCL|O_NOFOLLOW under a name with 64 random bits:
#   a file or symlink planted under a guessed name makes the open fail (EEXIST) and another name
#   is drawn, instead of being followed or truncated;
# * its name says who wrote it: ``.<name>.mmfix-tmp-<kernel>-<pidns>-<pid>-<start>-<random>``,
#   where <kernel> is a digest of this boot's /proc/sys/kernel/random/boot_id (one per running
#   kernel: tells hosts apart, and containers of one host share it), <pidns> the inode of this
#   process's pid namespace (tells containers of one kernel apart), <pid> and <start> the
#   writer's pid and its start time in clock ticks since boot (tells a dead writer from a new
#   process that reused its pid);
# * clean-up removes a temporary file only when its writer provably died: same kernel, same pid
#   namespace, and that pid is gone or is another process now. A file from another host or
#   container (or an older mmfix, or a name it cannot read) may be another machine's save in
#   flight on the shared folder: it is never removed, only named once in a log line when old.
_RANDOM_BYTES = 8
_CREATE_TRIES = 16
_FOREIGN_NOTICE_S = 24 * 3600  # a foreign temporary file this old is named (not removed)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _start_ticks(pid: int | str) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22), or None if it is gone."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    try:
        # the command name (field 2) may hold spaces and parentheses: count from the last ")"
        return int(text.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def _writer_identity() -> tuple[str, str] | None:
    """(this kernel, this pid namespace) as they appear in temporary names, or None if unknown."""
    import hashlib

    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    if not boot or not boot.strip():
        return None
    return hashlib.sha256(boot.strip().encode()).hexdigest()[:16], str(namespace)


def _proc_is_ours() -> bool:
    """Whether /proc shows this pid namespace (a container may see its host's /proc, or none)."""
    text = _read("/proc/self/stat")
    return text is not None and text.split(" ", 1)[0] == str(os.getpid())


def temp_path_for(path: str) -> str:
    """A fresh, unpredictable temporary name beside ``path`` that says which writer it belongs to."""
    import secrets

    folder, name = os.path.split(path)
    identity = _writer_identity()
    kernel, namespace = identity if identity is not None else ("unknown", "0")
    start = _start_ticks("self")
    owner = f"{kernel}-{namespace}-{os.getpid()}-{start if start is not None else 0}"
    return os.path.join(folder, f".{name}{TMP_MARK}{owner}-{secrets.token_hex(_RANDOM_BYTES)}")


def create_temp(path: str) -> tuple[str, int]:
    """(temporary name, file descriptor) beside ``path``: created exclusively, never through a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_CREATE_TRIES):
        tmp = temp_path_for(path)
        try:
            return tmp, os.open(tmp, flags, 0o644)
        except FileExistsError:
            continue  # planted (or, at 2^-64, drawn twice): draw another name
    raise OSError(
        errno.EEXIST,
        f"{_CREATE_TRIES} fresh random temporary names beside it were all taken, which only "
        "another user planting files in the folder explains; save into a folder only you can write to",
    )


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and TMP_MARK in name


def _abandoned(owner: str, identity: tuple[str, str] | None) -> bool | None:
    """True: this host's writer of that temporary file provably died. False: it is alive.
    None: it cannot be told (another host or container, an older or unreadable name)."""
    fields = owner.split("-")
    if identity is None or len(fields) != 5 or not all(f.isalnum() for f in fields):
        return None
    kernel, namespace, pid, start, _random = fields
    if (kernel, namespace) != identity or not pid.isdigit() or not start.isdigit():
        return None
    if int(pid) == os.getpid():
        return False  # ours: another thread's save may be in flight; a failed save removes its own
    now = _start_ticks(pid)
    if now is not None:
        return now != int(start)  # gone since, or the pid now names another process
    try:  # no /proc entry: gone -- unless /proc hides other users' processes (hidepid)
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    return False


def remove_stale_temps(folder: str) -> list[str]:
    """Temporary files of this host's writers that died (SIGKILL, a crash) before renaming."""
    import time

    from .. import _log

    removed: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    identity = _writer_identity() if _proc_is_ours() else None
    for name in names:
        if not is_temp_name(name):
            continue
        path = os.path.join(folder, name)
        verdict = _abandoned(name.rsplit(TMP_MARK, 1)[1], identity)
        if verdict is None:
            try:
                age = time.time() - os.lstat(path).st_mtime
            except OSError:
                continue
            if age > _FOREIGN_NOTICE_S:
                _log.info(
                    f"{path} is an unfinished mmfix save {age / 3600:.0f} h old from another host, "
                    "container or mmfix version; it is left alone (it may be a save in flight there). "
                    "Delete it by hand if nothing writes into this folder any more.",
                    key=f"foreign-temp:{path}",
                )
            continue
        if not verdict:
            continue
        try:
            os.remove(path)
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

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
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
    tmp: str | None = None
    fh: _StreamingFile | None = None
    try:
        tmp, fd = create_temp(path)
        with _StreamingFile(fd) as fh:
            write(fh)
            fh.finish()
        os.replace(tmp, path)
    except BaseException as failure:
        if tmp is not None:
            try:
                os.remove(tmp)  # unlinks our own name (a link planted there since is not followed)
            except OSError:
                pass
        if not isinstance(failure, (OSError, RuntimeError)):
            raise  # Ctrl-C, a pickling error …: no temporary file left behind, the error as it was
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
