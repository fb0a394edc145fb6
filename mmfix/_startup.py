"""What the zero-code front doors call: sitecustomize, ``.pth``, ``.start``, mmfix-run.

Each function activates mmfix (idempotently, see ``_activation``) and records
which door did it, so ``mmfix.status()`` and ``mmfix doctor`` can say.
Nothing here may raise: it runs while the interpreter starts.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType


def _activate(door: str) -> None:
    try:
        from . import _activation

        _activation.activate(door)
    except Exception as exc:  # pragma: no cover - a broken install must not break Python
        sys.stderr.write(f"mmfix: could not activate from {door}: {exc!r}\n")


def from_pth() -> None:
    """Called by the ``mmfix.pth`` line (which may run twice in a venv: harmless)."""
    _activate("pth")
    _start_steps()


def from_start() -> None:
    """Entry point named in ``mmfix.start`` (PEP 829, Python >= 3.15)."""
    _activate("start")
    _start_steps()


def from_interactive() -> None:
    _activate("pythonstartup")


def _same_dir(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a or ".", b)
    except OSError:
        return False


def activate_and_chain(sitecustomize_file: str, door: str = "sitecustomize") -> ModuleType | None:
    """Activate mmfix, then import the next ``sitecustomize`` on the path, if any.

    A ``sitecustomize`` found through PYTHONPATH hides every other one (a
    distribution's, a conda env's, the user's own). To keep theirs running we
    take our folder off sys.path, import the name again, and put everything
    back, as ddtrace's bootstrap does. Returns the chained module (or None).
    """
    # The door is what called us: under mmfix-run a user's sitecustomize (chained by
    # mmfix-run's own) is a second door that fired, and status lists both.
    _activate(door)
    own_dir = os.path.dirname(os.path.abspath(sitecustomize_file))
    saved_path = list(sys.path)
    ours = sys.modules.pop("sitecustomize", None)
    # Every spelling of our folder goes (PYTHONPATH may list it twice or
    # relatively); otherwise we would import ourselves again and loop.
    sys.path[:] = [p for p in sys.path if not _same_dir(p, own_dir)]
    chained = None
    try:
        import importlib.util

        if importlib.util.find_spec("sitecustomize") is not None:
            import sitecustomize as chained  # type: ignore[import-not-found, no-redef, unused-ignore]
    except Exception as exc:
        # The user's sitecustomize failed on its own; Python would print this too.
        sys.stderr.write(f"Error in the sitecustomize chained by mmfix: {exc!r}\n")
    finally:
        sys.path[:] = saved_path
        if chained is None and ours is not None:
            sys.modules["sitecustomize"] = ours
    _start_steps()
    return chained


def _start_steps() -> None:
    try:
        from . import _activation

        _activation.run_start_steps()
    except Exception as exc:  # pragma: no cover - guarded inside as well
        sys.stderr.write(f"mmfix: {exc!r}\n")
