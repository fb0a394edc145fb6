"""Who is at the other end of a Unix socket: a process of this job's container, or a stranger.

Abstract Unix socket names belong to a network namespace, and containers that share the
host's network (very often all running as root) share them: a user id says nothing about
which container a peer runs in. The ranks of one job on a node share a mount namespace
(torchrun's workers are its children; an srun step's tasks are started by one slurmstepd,
in one container when there is one), and a process of another container does not. So a
peer counts as ours when the kernel says it runs as our user (``SO_PEERCRED``), its pid is
visible in our pid namespace (it is 0 for a process of a sibling container) and its mount
namespace is ours. A pidfd taken from the socket itself (``SO_PEERPIDFD``, Linux 6.5) proves
that the pid whose namespace was read is still the process that made the connection (a pid
can be reused once its process is gone); on older kernels a pidfd opened by pid closes the
window only while the check runs.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct

_CREDS = struct.Struct("3i")  # struct ucred: pid, uid, gid
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)


def stranger(sock: socket.socket) -> str | None:
    """Why the peer of the connected ``sock`` is not a process of this job's container; None if it is."""
    pid, uid, _gid = _CREDS.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDS.size))
    if uid != os.getuid():
        return f"a process of another user (uid {uid})"
    if pid <= 0:
        return "a process outside this container (its pid is not visible here)"
    pidfd = _pidfd(sock, pid)
    if pidfd is None:
        return "a process that has already exited"
    try:
        if _exited(pidfd):
            return "a process that has already exited"
        try:
            theirs, ours = os.stat(f"/proc/{pid}/ns/mnt"), os.stat("/proc/self/ns/mnt")
        except OSError as exc:
            return f"a process whose mount namespace cannot be read ({exc.strerror})"
        if (theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino):
            return "a process in another mount namespace (another container)"
        if _exited(pidfd):  # it ended while we looked: the pid read may have named another process
            return "a process that has already exited"
    finally:
        os.close(pidfd)
    return None


def _pidfd(sock: socket.socket, pid: int) -> int | None:
    try:
        return int(sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD))
    except OSError as exc:
        if exc.errno not in (errno.ENOPROTOOPT, errno.EINVAL, errno.EOPNOTSUPP):
            return None  # ESRCH: the peer is gone; its pid may already name another process
    try:  # a kernel before 6.5
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def _exited(pidfd: int) -> bool:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))
