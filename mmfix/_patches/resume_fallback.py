"""Auto-resume that survives a torn newest checkpoint.

``--resume`` without a path (2.x ``--auto-resume``) resumes from the file named
in ``work_dir/last_checkpoint``. If that file is unreadable (killed writer, node
crash before the page cache reached disk, quota), stock MMEngine dies; here the
newest readable ``epoch_N.pth`` / ``iter_N.pth`` is used instead, with a warning
naming both. An explicit ``--resume PATH`` is never second-guessed: an unreadable
PATH is a clear error naming it (see the torch_load patch).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable

from .. import _log, _wrapping
from .._checkpoint import atomic, diagnosis, files

_swaps = _wrapping.SwapSet()
_STEP = re.compile(r"^(epoch|iter)_(\d+)\.pth$")


def apply() -> str | None:
    from mmengine.runner import checkpoint, runner

    _swaps.wrap(checkpoint, "find_latest_checkpoint", _find_latest, aliases=((runner, "find_latest_checkpoint"),))
    return None


def remove() -> None:
    _swaps.undo_all()


def unreadable_reason(path: str) -> str | None:
    special = files.special_file_problem(path)
    if special is not None:
        return special
    if not os.path.isfile(path):
        return "it does not exist"
    return diagnosis.diagnose(path, deep=True)


def candidates(work_dir: str) -> list[str]:
    """epoch_N / iter_N checkpoints in ``work_dir``, newest step first."""
    found = []
    for name in os.listdir(work_dir):
        match = _STEP.match(name)
        if match and not atomic.is_temp_name(name):
            path = os.path.join(work_dir, name)
            found.append((int(match.group(2)), os.path.getmtime(path), path))
    return [p for _, _, p in sorted(found, reverse=True)]


def _find_latest(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    work_dir = _wrapping.argument(args, kwargs, 0, "path")
    try:
        if isinstance(work_dir, str) and files.special_file_problem(os.path.join(work_dir, "last_checkpoint")):
            raise OSError("last_checkpoint is not a regular file")  # MMEngine's open() would block on a FIFO
        latest = wrapped(*args, **kwargs)
    except (OSError, UnicodeDecodeError):
        latest = None  # a torn or unreadable last_checkpoint: look at the files themselves
    if not os.path.isdir(work_dir):
        return latest
    problem = unreadable_reason(latest) if latest else "last_checkpoint names no file"
    if latest and problem is None:
        return latest
    others = [c for c in candidates(work_dir) if not latest or os.path.abspath(c) != os.path.abspath(latest)]
    for candidate in others:
        if unreadable_reason(candidate) is None:
            _log.warning(
                f"auto-resume: the newest checkpoint {latest or '(none recorded in last_checkpoint)'} is unreadable "
                f"({problem}); resuming from {candidate}, the newest readable one, instead.",
                key="resume-fallback",
            )
            return candidate
    if latest is None:
        return None  # nothing was ever saved here: MMEngine starts from scratch, as stock
    from .._errors import CheckpointCorruptError

    raise CheckpointCorruptError(
        f"auto-resume: the newest checkpoint {latest} is unreadable ({problem}) and no other readable "
        f"epoch_N.pth / iter_N.pth is in {work_dir}. Resume from a copy (--resume PATH), or start again without "
        "--resume.",
        path=latest,
    )
