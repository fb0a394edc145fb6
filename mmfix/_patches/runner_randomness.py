"""A ``randomness`` config without a seed means no fixed seed, as MMEngine's default does.

The legacy flags ``--deterministic`` and ``--diff-seed`` / ``--diff_seed`` become
``--cfg-options randomness.deterministic=True`` / ``randomness.diff_rank_seed=True`` on the current
tools (mmfix/_launch/rules.py). Most current configs (MMDetection 3.x's, MMPose 1.x's …) set no
``randomness``, so without ``--seed`` the merged one has no ``seed`` key and stock MMEngine stops in
``Runner.set_randomness`` with ``TypeError: missing 1 required positional argument: 'seed'`` — where
the 2.x tools, given no ``--seed``, fixed none. MMEngine's own default is ``randomness=dict(seed=None)``:
a missing seed is that ``None`` here; a seed given anywhere is used as stock uses it.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import _wrapping

_swaps = _wrapping.SwapSet()


def apply() -> str | None:
    from mmengine.runner import Runner

    _swaps.wrap(Runner, "set_randomness", _set_randomness)
    return None


def remove() -> None:
    _swaps.undo_all()


def _set_randomness(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if not args and "seed" not in kwargs:
        kwargs = {**kwargs, "seed": None}
    return wrapped(*args, **kwargs)
