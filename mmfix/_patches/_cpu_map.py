"""The one rule behind "checkpoints map to CPU by default", shared by every loader patch.

A caller that named a device keeps it; a missing ``map_location`` (or the
loader's own "default" token, such as ``Runner.resume``'s ``'default'``, which
means the current CUDA device) becomes ``'cpu'``. Model and optimizer state
reach their device through ``load_state_dict`` either way.
"""

from __future__ import annotations

from typing import Any

from .. import _settings
from .._wrapping import argument, with_argument


def cpu_by_default(
    args: tuple[Any, ...], kwargs: dict[str, Any], position: int, default_token: object = None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args, kwargs`` of a loader call with ``map_location`` (at ``position``) made 'cpu'
    where the caller left it to the loader, and MMFIX_CPU_MAP is on."""
    if not _settings.current().cpu_map:
        return args, kwargs
    location = argument(args, kwargs, position, "map_location", default_token)
    if location is None or (default_token is not None and location == default_token):
        return with_argument(args, kwargs, position, "map_location", "cpu")
    return args, kwargs
