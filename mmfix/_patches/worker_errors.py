"""In a torchrun worker, an uncaught exception is recorded where torchrun's summary reads it.

torchrun ends a failed job with a "Root Cause" table naming the first failing
rank, but without ``@record`` on the script's main function it shows
``error_file: <N/A>`` and no exception. MMDetection's tools do not use
``@record``; this hook records the exception into TORCHELASTIC_ERROR_FILE, so
the summary names the rank *and* what it raised.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .. import _wrapping

_swaps = _wrapping.SwapSet()


def apply() -> str | None:
    if not os.environ.get("TORCHELASTIC_ERROR_FILE"):
        return "not a torchrun worker (no TORCHELASTIC_ERROR_FILE)"
    previous = sys.excepthook

    def record_then_report(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        if not isinstance(exc, (KeyboardInterrupt, SystemExit)):
            try:
                record(exc_type, exc, tb)
            except Exception:
                pass  # the summary is a courtesy; the traceback below still prints
        previous(exc_type, exc, tb)

    # _excepthook (and the patch-ordering test) follow this chain to find hooks below ours
    record_then_report.mmfix_previous = previous  # type: ignore[attr-defined]
    sys.excepthook = record_then_report

    def restore() -> None:
        if sys.excepthook is record_then_report:  # else someone chained onto ours: leave theirs
            sys.excepthook = previous

    _swaps.on_undo(restore)
    return None


def record(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
    """Write the error file in the format torch's ErrorHandler.record_exception uses
    (which reads the *active* exception, and there is none inside an excepthook)."""
    import json
    import time
    import traceback

    path = os.environ["TORCHELASTIC_ERROR_FILE"]
    data = {
        "message": {
            "message": f"{exc_type.__name__}: {exc}",
            "extraInfo": {
                "py_callstack": "".join(traceback.format_exception(exc_type, exc, tb)),
                "timestamp": str(int(time.time())),
            },
        }
    }
    with open(path, "w") as fh:
        json.dump(data, fh)


def remove() -> None:
    _swaps.undo_all()
