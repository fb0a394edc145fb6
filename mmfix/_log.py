"""mmfix's messages: into the training log when MMEngine is there, once, on rank 0.

``logging`` is imported lazily (it costs ~7 ms) and MMEngine is never imported
here: only a logger that is already loaded is used, so a message never drags
MMEngine into a process that did not ask for it.
"""
from __future__ import annotations

import sys
import _thread

from . import _settings
from ._ranks import process_rank

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    import logging

_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}
_seen: set[str] = set()
_lock = _thread.allocate_lock()
_std_logger: logging.Logger | None = None


def _standard_logger() -> logging.Logger:
    global _std_logger
    if _std_logger is None:
        import logging

        logger = logging.getLogger("mmfix")
        if not logger.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("mmfix %(levelname)s: %(message)s"))
            logger.addHandler(handler)
            logger.propagate = False
        logger.setLevel(logging.DEBUG)
        _std_logger = logger
    return _std_logger


def _emit(level: str, message: str) -> None:
    if "mmengine.logging" in sys.modules:
        try:
            from mmengine.logging import print_log

            import logging

            print_log(f"[mmfix] {message}", logger="current", level=getattr(logging, level))
            return
        except Exception:  # the training log is a courtesy; stderr still works
            pass
    _standard_logger().log(_LEVELS[level], message)


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


def debug(message: str, **kw: object) -> bool:
    return log("DEBUG", message, **kw)  # type: ignore[arg-type]


def info(message: str, **kw: object) -> bool:
    return log("INFO", message, **kw)  # type: ignore[arg-type]


def warning(message: str, **kw: object) -> bool:
    return log("WARNING", message, **kw)  # type: ignore[arg-type]


def error(message: str, **kw: object) -> bool:
    return log("ERROR", message, **kw)  # type: ignore[arg-type]


def forget() -> None:
    """Let every message be shown again (used by tests and by ``mmfix.enable()``)."""
    with _lock:
        _seen.clear()
