"""Why a checkpoint file cannot be read: its container first, then (``deep``) its pickle.

Used after a load has already failed (so its cost never lands on a good load),
by auto-resume to skip an unreadable newest checkpoint, and by ``mmfix inspect``.
"""

from __future__ import annotations

from typing import Any

from .files import container_problem
from .pickle_reader import PickleUnreadable
from .replay import consistency_problem


def diagnose(f: Any, deep: bool = False) -> str | None:
    """A sentence saying why ``f`` cannot be a readable checkpoint, or None if it looks fine.

    ``deep`` also replays the pickle (inertly, see ``replay``) and checks that every
    storage it references is in the archive and large enough: records spliced from
    another file keep valid CRCs but no longer fit together.
    """
    problem = container_problem(f)
    if problem is not None or not deep:
        return problem
    try:
        return consistency_problem(f)
    except PickleUnreadable as exc:
        return str(exc)
    except Exception as exc:  # the static reading itself failed: the container is damaged
        return f"its pickle is damaged ({type(exc).__name__}: {exc})"
