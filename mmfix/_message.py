"""The one format every mmfix message has, whichever way it leaves the process.

``MM/DD HH:MM:SS - mmfix - LEVEL - message``: MMEngine's own layout, so in a
training log mmfix's lines read like the lines around them, and the same line
goes to stderr and into MMEngine's log file. Only ``time`` is imported (a builtin
module): settings problems are reported with it at interpreter start.
"""

from __future__ import annotations

import time


def line(level: str, message: str) -> str:
    return f"{time.strftime('%m/%d %H:%M:%S')} - mmfix - {level} - {message}\n"
