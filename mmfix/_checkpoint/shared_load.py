"""The ranks of a node read a checkpoint once and share one sealed, anonymous copy.

Engaged by ``torch.load`` (see ``patches/torch_load.py``) when this process is one
of several distributed workers on its node, the checkpoint is a zip-format file
given by path and it is loaded to CPU. The first rank to ask for a file (the
*leader*) copies it into a memfd (anonymous shared memory: no name in any
filesystem; holes of a sparse file stay holes), seals it against writing, shrinking
and growing, and hands the descriptor to the other local ranks over an abstract Unix
socket. Every rank then runs the ordinary ``torch.load(..., mmap=True)`` on
``/proc/self/fd/N``: storages are private (copy-on-write) mappings of that one
segment, so the node holds the checkpoint once, and no tensor depends on the
checkpoint file any more.

Why this is safe:
- one file, one model: a mapped load takes storages raw from the segment, so it is used
  only where that reads exactly what a plain load reads (``mappable``: every storage a
  stored, aligned record of exactly its declared size); otherwise every rank is told to
  read the plain way;
- the copy reaches only processes of this job's container, and a rank takes a copy only
  from one (``peers``: same user, visible pid, same mount namespace), checks that it
  maps exactly, and compares it with its own file (every byte but the storages', and
  samples of those);
- the segment is sealed (``F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW``): the kernel
  refuses every write and resize, for every process, so the values cannot change and
  no access can run past its end (no SIGBUS);
- the checkpoint file is only read while the leader copies it; rewriting, truncating,
  deleting or replacing it afterwards changes nothing that was loaded;
- mappings are private: a rank that updates a loaded tensor in place (optimizer state
  of CPU parameters) gets its own page and never disturbs the other ranks;
- nothing is named, so nothing leaks: the kernel frees the segment when the last
  descriptor and mapping of it are gone, however the ranks die, and the abstract
  socket's name disappears with its last descriptor;
- every step that waits has a deadline: a socket held by a stranger only turns sharing off.

Anything unusual (a legacy non-zip file, a buffer, another map_location, no memfd or
/proc, a file or segment that cannot be mapped exactly, a peer of another user or
container, a copy that differs from the rank's file, a leader that died) falls back to
the plain read stock torch does.
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import hashlib
import itertools
import mmap
import os
import re
import secrets
import socket
import stat
import struct
import threading
import time
from typing import Any, Callable

from .. import _log, _settings
from . import files, mappable, peers

_ZIP_MAGIC = b"PK\x03\x04"
_SEAL_WRITE = getattr(fcntl, "F_SEAL_WRITE", 0x0008)
_SEAL_SHRINK = getattr(fcntl, "F_SEAL_SHRINK", 0x0002)
_SEAL_GROW = getattr(fcntl, "F_SEAL_GROW", 0x0004)
_SEAL_SEAL = getattr(fcntl, "F_SEAL_SEAL", 0x0001)
_F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
_F_GET_SEALS = getattr(fcntl, "F_GET_SEALS", 1034)
_IMMUTABLE = _SEAL_WRITE | _SEAL_SHRINK | _SEAL_GROW
#: what a reader answers: b"S" and the size, with the sealed copy attached; or read the plain way,
#: b"P" because a mapped load would read the file otherwise, b"U" because the copy cannot be mapped here
_HELLO = struct.Struct("!cQ")
_SEGMENT, _PLAIN, _UNMAPPABLE = b"S", b"P", b"U"
_RETRY = -1
_CONNECT_WAIT = 10.0  # a reader's queue holds every local rank: a full one is not a reader's
_ANSWER_WAIT = 5.0
#: a follower compares this many 4 KiB windows of the storages' bytes with its own file (all of
#: them when they are smaller than that)
_SAMPLES = 256
_SAMPLE_BYTES = 4096

_lock = threading.Lock()
_load_counts: dict[tuple[int, ...], int] = {}
#: (listening socket, memfd) pairs a leader thread still serves; closed in forked
#: children, or a DataLoader worker would keep the socket name bound and the segment alive.
_serving: list[tuple[socket.socket, int]] = []


def loader(wrapped: Callable[..., Any], f: Any, kwargs: dict[str, Any], mode: str, cpu: bool) -> Callable[..., Any]:
    """What ``torch.load``'s wrapper calls instead of ``wrapped`` (``wrapped`` itself unless
    mmfix maps: ``mode`` is MMFIX_MMAP's ``auto`` / ``on`` / ``off``)."""
    if mode == "off" or "mmap" in kwargs or not cpu or not isinstance(f, (str, os.PathLike)):
        return wrapped
    if mode == "on":  # the user's explicit choice: map the file itself (the old switch)
        if files.is_mappable(f) and _file_maps(f) and _maps_exactly(os.fspath(f)):
            return lambda *args, **kw: wrapped(*args, **{**kw, "mmap": True})
        return wrapped
    if local_world_size() <= 1:
        return wrapped
    return lambda *args, **kw: _load_shared(wrapped, os.fspath(f), args, kw)


def local_world_size() -> int:
    """How many distributed workers run on this node, as the launcher announced it."""
    for name in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"):
        raw = os.environ.get(name, "").strip()
        if raw.isdigit():
            return int(raw)
    if "SLURM_STEP_ID" in os.environ and "SLURM_PROCID" in os.environ:
        # "4(x2),3": tasks per node of this step; the first group is close enough to
        # know whether there are peers (it only bounds how long a leader serves).
        raw = os.environ.get("SLURM_STEP_TASKS_PER_NODE") or os.environ.get("SLURM_TASKS_PER_NODE", "")
        match = re.match(r"\d+", raw)
        if match:
            return int(match.group())
    return 1


def _job_key() -> str:
    names = (
        "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_RESTART_COUNT",
        "MASTER_ADDR",
        "MASTER_PORT",
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "OMPI_MCA_ess_base_jobid",
        "WORLD_SIZE",
    )
    return "|".join(os.environ.get(n, "") for n in names)


def _file_maps(path: Any) -> bool:
    """Whether the file's filesystem lets it be mapped (some FUSE and network ones do not)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return _maps(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _maps_exactly(path: str) -> bool:
    layout = mappable.check(path)
    if isinstance(layout, str):
        _log.info(
            f"{path!r} is read the plain way, not mapped: {layout}, so a mapped load would not read what a "
            "plain load reads",
            key="cannot-map-exactly",
        )
        return False
    return True


def _maps(fd: int, size: int) -> bool:
    try:
        mmap.mmap(fd, max(1, min(size, mmap.PAGESIZE)), flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ).close()
        return True
    except (OSError, ValueError) as exc:
        _log.info(f"a checkpoint cannot be mapped here ({exc}); mmfix reads it the plain way", key="cannot-map")
        return False


def _load_shared(wrapped: Callable[..., Any], path: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    import torch.serialization

    options = getattr(torch.serialization, "get_default_mmap_options", lambda: mmap.MAP_PRIVATE)()
    if options != mmap.MAP_PRIVATE:
        # set_default_mmap_options(MAP_SHARED): a shared writable mapping of a sealed segment is
        # refused, and would not be private to the rank anyway
        return wrapped(*args, **kwargs)
    try:
        fd = _segment_for(path)
    except Exception as exc:  # sharing is an optimisation: never fail a load over it
        _log.info(
            f"the ranks of this node could not share one copy of {path!r} ({exc!r}); each reads its own",
            key="shared-load-failed",
        )
        fd = None
    if fd is None:
        return wrapped(*args, **kwargs)
    # rank 0 says it, reader or not (MMEngine's logger shows other ranks' errors only)
    _log.info(
        f"the ranks of this node load {path!r} from one sealed in-memory copy "
        f"({os.fstat(fd).st_size / 2**20:.0f} MiB) instead of one copy each; the file itself is not "
        "used once loaded (MMFIX_MMAP=0 turns this off)",
        key="shared-load",
    )
    segment = f"/proc/self/fd/{fd}"
    if args:
        args = (segment, *args[1:])
    else:
        kwargs = {**kwargs, "f": segment}
    try:
        return wrapped(*args, **{**kwargs, "mmap": True})
    finally:
        os.close(fd)  # the mappings keep the segment alive as long as a tensor uses it


def _segment_for(path: str) -> int | None:
    """A sealed memfd holding ``path``'s bytes, shared with the node's other ranks, or
    None to read the plain way."""
    if not hasattr(os, "memfd_create") or not hasattr(socket, "SO_PEERCRED") or not os.path.isdir("/proc/self/fd"):
        _log.info(
            "this system has no memfd / abstract sockets / /proc: each rank reads its own copy of checkpoints",
            key="shared-load-unsupported",
        )
        return None
    try:
        src = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None  # torch.load raises its own FileNotFoundError / PermissionError
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            return None
        head = os.pread(src, 4, 0)
        if head != _ZIP_MAGIC:
            if files.file_format(os.pread(src, 64, 0)) == "legacy":
                _log.info(
                    f"{path!r} is in torch's legacy (pre-1.6, non-zip) format, which cannot be mapped: "
                    "each rank reads its own copy. Re-save it with torch.save to let the ranks of a node "
                    "share one.",
                    key="shared-load-legacy",
                )
            return None
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with _lock:
            # the n-th load of this file by this process meets the n-th load of the others
            nth = _load_counts[identity] = _load_counts.get(identity, 0) + 1
        name = socket_name(st, nth)
        own: mappable.Layout | str | None = None  # this rank's file, read while the reader copies it
        for _ in range(3):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                sock.bind(name)
            except OSError as exc:
                sock.close()
                if exc.errno != errno.EADDRINUSE:
                    raise
                own = own or mappable.check(f"/proc/self/fd/{src}")
                if isinstance(own, str):
                    _log.info(
                        f"the ranks of this node read {path!r} the plain way, each its own copy: {own}, so a mapped "
                        "load would not read what a plain load reads",
                        key="shared-load-layout",
                    )
                    return None
                fd = _receive(name, src, st, path, own)
                if fd != _RETRY:
                    return fd
                continue
            return _lead(sock, src, st.st_size, path)
        return None
    finally:
        os.close(src)


def socket_name(st: os.stat_result, nth: int) -> bytes:
    """The abstract socket name under which the node's ranks meet for the ``nth`` load of a file."""
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    digest = hashlib.sha256(repr((os.getuid(), _job_key(), identity, nth)).encode()).hexdigest()[:40]
    return b"\0mmfix-load-" + digest.encode()


def _lead(sock: socket.socket, src: int, size: int, path: str) -> int | None:
    expected = local_world_size() - 1
    try:
        sock.listen(max(16, expected))  # followers queue up while the copy is made
        fd = _fill(src, size)
    except BaseException:
        sock.close()
        raise
    layout = mappable.check(f"/proc/self/fd/{fd}")
    if isinstance(layout, str):
        _log.info(
            f"the ranks of this node read {path!r} the plain way, each its own copy: {layout}, so a mapped "
            "load would not read what a plain load reads",
            key="shared-load-layout",
        )
    answer = _PLAIN if isinstance(layout, str) else _SEGMENT if _maps(fd, size) else _UNMAPPABLE
    if answer != _SEGMENT:
        os.close(fd)
        fd = -1  # the followers are told to read the plain way too, rather than each try in turn
    served = -1 if fd < 0 else fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 0)
    with _lock:
        _serving.append((sock, served))
    threading.Thread(
        target=_serve, args=(sock, served, answer, size, expected, path), name="mmfix-shared-load", daemon=True
    ).start()
    return fd if fd >= 0 else None


def _fill(src: int, size: int) -> int:
    """A sealed memfd with the bytes of ``src``; its holes stay holes (a memfd has them too), so
    a sparse file costs the memory of its data, not of its apparent size."""
    fd = os.memfd_create("mmfix-checkpoint", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        for start, end in _data_extents(src, size):
            os.posix_fallocate(fd, start, end - start)  # fail now (ENOSPC/ENOMEM), not in a page fault later
            done = start
            while done < end:
                os.lseek(fd, done, os.SEEK_SET)  # sendfile writes at the position
                try:
                    sent = os.sendfile(fd, src, done, end - done)
                except OSError as exc:
                    if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                        raise
                    chunk = os.pread(src, min(end - done, 16 << 20), done)
                    sent = os.pwrite(fd, chunk, done) if chunk else 0
                if sent == 0:
                    raise OSError(errno.EIO, f"the file shrank while it was read ({done} of {size} bytes)")
                done += sent
        fcntl.fcntl(fd, _F_ADD_SEALS, _IMMUTABLE | _SEAL_SEAL)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _data_extents(src: int, size: int) -> list[tuple[int, int]]:
    """(start, end) of the parts of ``src`` that hold data (SEEK_DATA / SEEK_HOLE)."""
    extents: list[tuple[int, int]] = []
    at = 0
    while at < size:
        try:
            start = os.lseek(src, at, os.SEEK_DATA)
            end = min(os.lseek(src, start, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break  # only a hole is left
            return [(0, size)]  # a filesystem that cannot tell: all of it is data
        if start >= size:
            break
        extents.append((start, end))
        at = end
    return extents


def _serve(sock: socket.socket, fd: int, answer: bytes, size: int, expected: int, path: str) -> None:
    """Hand the sealed copy (``answer`` _SEGMENT) or the word to read the plain way to the node's
    other ranks, and to no process of another user or container."""
    deadline = time.monotonic() + _settings.current().shared_load_wait
    served = 0
    try:
        while served < expected:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock.settimeout(remaining)
            try:
                conn, _ = sock.accept()
            except (socket.timeout, OSError):
                break
            with conn:
                try:
                    conn.settimeout(_ANSWER_WAIT)
                    why = peers.stranger(conn)
                    if why:
                        _log.info(
                            f"{why} asked for this node's shared copy of {path!r} and was refused: it is given only "
                            "to this job's processes of this container",
                            key="shared-load-stranger",
                        )
                        continue
                    if fd < 0:
                        conn.sendall(_HELLO.pack(answer, size))
                    else:
                        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))]
                        conn.sendmsg([_HELLO.pack(_SEGMENT, size)], rights)
                    served += 1
                except OSError:
                    continue
    finally:
        with _lock:
            if (sock, fd) in _serving:
                _serving.remove((sock, fd))
                sock.close()
                if fd >= 0:
                    os.close(fd)


def _receive(name: bytes, src: int, st: os.stat_result, path: str, layout: mappable.Layout) -> int | None:
    wait, size = _settings.current().shared_load_wait, st.st_size
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    fds: list[int] = []
    try:
        sock.settimeout(min(wait, _CONNECT_WAIT))  # a full queue: someone else's socket, not a reader
        try:
            sock.connect(name)
        except (ConnectionRefusedError, FileNotFoundError):
            return _RETRY  # the leader finished serving in the meantime: lead a new round
        except OSError as exc:
            _log.info(
                f"the socket where this node's ranks share {path!r} does not take connections ({exc!r}); "
                "this rank reads its own copy",
                key="shared-load-connect",
            )
            return None
        why = peers.stranger(sock)
        if why:
            _log.info(
                f"the socket where this node's ranks share {path!r} is held by {why}, not by a rank of this "
                "job; this rank reads its own copy",
                key="shared-load-foreign",
            )
            return None
        sock.settimeout(wait)
        try:
            data, ancillary, flags, _addr = sock.recvmsg(
                _HELLO.size, socket.CMSG_SPACE(struct.calcsize("i")), socket.MSG_CMSG_CLOEXEC
            )
        except (ConnectionResetError, BrokenPipeError):
            return _RETRY  # the reader died: try ourselves
        except socket.timeout:
            _log.info(
                f"the rank reading {path!r} for this node did not answer within MMFIX_SHARED_LOAD_WAIT; "
                "this rank reads its own copy",
                key="shared-load-timeout",
            )
            return None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                whole = len(payload) - len(payload) % 4
                fds.extend(struct.unpack(f"{whole // 4}i", payload[:whole]))
        if not data and not fds:
            return _RETRY  # the leader died before it could answer
        if len(data) != _HELLO.size or flags & socket.MSG_CTRUNC:
            return None
        kind, announced = _HELLO.unpack(data)
        if kind == _PLAIN and not fds:
            _log.info(
                f"the rank reading {path!r} for this node found that a mapped load would not read what a plain "
                "load reads; this rank reads its own copy",
                key="shared-load-plain",
            )
            return None
        if kind == _UNMAPPABLE and not fds:
            _log.info(
                f"a checkpoint cannot be mapped here (the rank reading {path!r} for this node could not map its "
                "copy); mmfix reads it the plain way",
                key="cannot-map",
            )
            return None
        if kind != _SEGMENT or len(fds) != 1 or announced != size or not _trustworthy(fds[0], size):
            return None
        if not _same_as_own_file(fds[0], src, st, layout, path):
            return None
        return fds.pop()
    finally:
        for fd in fds:
            os.close(fd)
        sock.close()


def _trustworthy(fd: int, size: int) -> bool:
    """Only a sealed segment of the expected size is used: nobody can change it later."""
    try:
        st = os.fstat(fd)
        seals = fcntl.fcntl(fd, _F_GET_SEALS)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == size and seals & _IMMUTABLE == _IMMUTABLE


def _same_as_own_file(segment: int, src: int, st: os.stat_result, layout: mappable.Layout, path: str) -> bool:
    """Whether the segment holds this rank's own file: every byte outside the storages (headers,
    pickle, directory: so the segment has the file's layout, which maps exactly) compared, and the
    storages' bytes in full up to _SAMPLES windows' worth, in random windows beyond that; reads of
    the file, no memory. The file must not have changed meanwhile (the layout was read from it)."""
    ranges = _coalesce([*layout.structure(), *_samples(layout.spans)])
    if all(_equal(segment, src, start, length) for start, length in ranges):
        now = os.fstat(src)
        if (now.st_size, now.st_mtime_ns, now.st_ctime_ns) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns):
            return True
    _log.info(
        f"the copy of {path!r} this rank was handed differs from its own file (the file was rewritten since, or "
        "the copy is not the file's); this rank reads its own copy",
        key="shared-load-mismatch",
    )
    return False


def _coalesce(ranges: list[tuple[int, int]], slack: int = 64 << 10) -> list[tuple[int, int]]:
    """(start, length) ranges sorted, those less than ``slack`` apart read as one (fewer reads)."""
    out: list[list[int]] = []
    for start, length in sorted(ranges):
        if out and start <= out[-1][1] + slack:
            out[-1][1] = max(out[-1][1], start + length)
        else:
            out.append([start, start + length])
    return [(start, end - start) for start, end in out]


def _samples(spans: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    total = sum(length for _, length in spans)
    if total <= _SAMPLES * _SAMPLE_BYTES:
        return list(spans)
    ends = list(itertools.accumulate(length for _, length in spans))
    windows = []
    for _ in range(_SAMPLES):
        at = secrets.randbelow(total)
        index = bisect.bisect_right(ends, at)
        start, length = spans[index]
        offset = start + at - (ends[index] - length)
        windows.append((offset, min(_SAMPLE_BYTES, start + length - offset)))
    return windows


def _equal(a: int, b: int, start: int, length: int) -> bool:
    end = start + length
    while start < end:
        n = min(end - start, 1 << 20)
        chunk = os.pread(a, n, start)
        if len(chunk) != n or chunk != os.pread(b, n, start):
            return False
        start += n
    return True


def _forget_in_child() -> None:
    """A forked child (DataLoader worker) must not keep the leader's socket or segment."""
    global _lock
    _lock = threading.Lock()
    while _serving:
        sock, fd = _serving.pop()
        try:
            sock.close()
            if fd >= 0:
                os.close(fd)
        except OSError:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
