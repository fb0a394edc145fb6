"""How a run ends when mmfix's own error, or Ctrl-C, reaches the top of the program.

mmfix's errors (a full disk, a corrupt or refused checkpoint, a GPU a worker cannot
see, DDP's unused parameters) already say what went wrong and how to fix it; a
traceback through torch and MMEngine above them only buries that paragraph. So
such an error ends the program with ``mmfix.<Name>: <message>`` on stderr (each
rank prints its own, since ranks can fail differently), and exit status 1. Under
torchrun the error is still written to torchrun's error file, for its summary.
In processes mmfix launched, Ctrl-C ends each with one line instead of a
KeyboardInterrupt traceback per rank. ``MMFIX_LOG_LEVEL=DEBUG`` keeps Python's
tracebacks.

Installed by activation (``sys.excepthook``, chained to the previous hook), so it
costs nothing until a program ends with an uncaught exception.
"""

from __future__ import annotations

import os
import sys

from . import _settings
from ._ranks import process_rank

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from types import TracebackType
    from typing import Any


def _ours(exc_type: type[BaseException]) -> bool:
    errors = sys.modules.get("mmfix._errors")  # not imported: the error cannot be one of ours
    return errors is not None and issubclass(exc_type, errors.ENDS_A_RUN)


def _interrupted(exc_type: type[BaseException]) -> bool:
    # torchrun's agent turns SIGINT/SIGTERM into its own SignalException.
    return issubclass(exc_type, KeyboardInterrupt) or exc_type.__name__ == "SignalException"


def _caused_by_interrupt(exc: BaseException) -> bool:
    # Libraries that catch everything re-raise Ctrl-C as their own error (MMEngine's
    # pretty_text turns a KeyboardInterrupt inside yapf into a SyntaxError): follow the chain.
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 16:
        if _interrupted(type(current)):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def _rank_prefix() -> str:
    world = os.environ.get("WORLD_SIZE") or os.environ.get("SLURM_NTASKS") or "1"
    return f"[rank {process_rank()}] " if world.isdigit() and int(world) > 1 else ""


def _excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    previous = _excepthook.mmfix_chained  # type: ignore[attr-defined]
    try:
        settings = _settings.current()
        ours = _ours(exc_type)
        quiet_interrupt = _caused_by_interrupt(exc) and settings.launched
        if settings.log_level == "DEBUG" or not (ours or quiet_interrupt):
            return previous(exc_type, exc, tb)
        if ours:
            if os.environ.get("TORCHELASTIC_ERROR_FILE"):
                from ._patches.worker_errors import record

                record(exc_type, exc, tb)
            name = f"{exc_type.__module__}.{exc_type.__qualname__}"
            sys.stderr.write(f"{_rank_prefix()}{name}: {exc}\n")
        elif "RANK" in os.environ or "LOCAL_RANK" in os.environ:
            sys.stderr.write(f"mmfix: rank {process_rank()} stopped (interrupted).\n")
        else:
            sys.stderr.write("mmfix: interrupted; the launched job and its workers were stopped.\n")
        sys.stderr.flush()
    except Exception:  # never lose the error itself
        previous(exc_type, exc, tb)


def install() -> None:
    """Put the hook in front of the current ``sys.excepthook`` (once)."""
    if _installed_below():
        return
    _excepthook.mmfix_chained = sys.excepthook  # type: ignore[attr-defined]
    sys.excepthook = _excepthook


def _installed_below() -> bool:
    # worker_errors may have wrapped ours since: walk its chain too.
    hook: Any = sys.excepthook
    while hook is not None:
        if hook is _excepthook:
            return True
        hook = getattr(hook, "mmfix_previous", None)
    return False


def uninstall() -> None:
    """``mmfix.disable()``: the previous hook again, where ours is still the current one."""
    if sys.excepthook is _excepthook:
        sys.excepthook = _excepthook.mmfix_chained  # type: ignore[attr-defined]
