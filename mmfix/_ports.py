"""Is a TCP port free on this machine (the check torchrun's master would fail)."""

from __future__ import annotations

import socket


def port_free(port: int, host: str = "0.0.0.0") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR: a port merely in TIME_WAIT is one torchrun can bind too.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
