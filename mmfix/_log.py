"""mmfix's messages: once, on rank 0 (errors on every rank), in one format (``_message``).

Each goes to stderr and, when MMEngine's logger writes a log file, into that file
too, so it lands in the training log. ``logging`` and MMEngine are never
imported here: only a logger MMEngine has already loaded is used, so a message
never drags MMEngine into a process that did not ask for it.
"""

from __future__ import annotations

import _thread
import sys

from . import _message, _settings
from ._ranks import process_rank

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}
_seen: set[str] = set()
_lock = _thread.allocate_lock()


def _training_log_files() -> list[Any]:
    """The open log files of MMEngine's current logger (none when MMEngine is not loaded)."""
    if "mmengine.logging" not in sys.modules:
        return []
    try:
        import logging

        from mmengine.logging import MMLogger

        logger = MMLogger.get_current_instance()
        return [h for h in logger.handlers if isinstance(h, logging.FileHandler)]
    except Exception:  # the training log is a courtesy; stderr still works
        return []


def _emit(level: str, message: str) -> None:
    text = _message.line(level, message)
    sys.stderr.write(text)
    sys.stderr.flush()
    for handler in _training_log_files():
        try:
            handler.acquire()
            try:
                handler.stream.write(text)
                handler.flush()
            finally:
                handler.release()
        except Exception:
            pass


def log(level: str, message: str, *, key: str | None = None, all_ranks: bool = False) -> bool:
    """Emit ``message`` once per process (per ``key``); return whether it was emitted.

    Non-errors are shown on rank 0 only, since N ranks printing the same notice
    buries the one line that matters. Errors are shown on every rank: the failing
    rank is often not rank 0.
    """
    threshold = _LEVELS[_settings.current().log_level]
    if _LEVELS[level] < threshold:
        return False
    if level != "ERROR" and not all_ranks and process_rank() != 0:
        return False
    with _lock:
        dedup = key if key is not None else message
        if dedup in _seen:
            return False
        _seen.add(dedup)
    _emit(level, message)
    return True


def debug(message: str, *, key: str | None = None, all_ranks: bool = False) -> bool:
    return log("DEBUG", message, key=key, all_ranks=all_ranks)


def info(message: str, *, key: str | None = None, all_ranks: bool = False) -> bool:
    return log("INFO", message, key=key, all_ranks=all_ranks)


def warning(message: str, *, key: str | None = None, all_ranks: bool = False) -> bool:
    return log("WARNING", message, key=key, all_ranks=all_ranks)


def error(message: str, *, key: str | None = None, all_ranks: bool = False) -> bool:
    return log("ERROR", message, key=key, all_ranks=all_ranks)


def said(key: str) -> None:
    """Count the notice under ``key`` as shown (where the caller reports the same itself)."""
    with _lock:
        _seen.add(key)


def forget() -> None:
    """Let every message be shown again (used by tests and by ``mmfix.enable()``)."""
    with _lock:
        _seen.clear()
