"""MMEngine's checkpoint loaders load to CPU unless the caller chose a device.

MMEngine keeps its own references (``runner.py`` does
``from .checkpoint import _load_checkpoint``), so the wrapper is installed under
every name MMEngine calls it by. ``Runner.resume(map_location='default')`` maps
to the current CUDA device in stock MMEngine: on N ranks before
``set_device`` ran, that is N copies on GPU 0. Model and optimizer state reach
their device through ``load_state_dict`` either way.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import _wrapping
from ._cpu_map import cpu_by_default

_swaps = _wrapping.SwapSet()


def _map_location_to_cpu(position: int, default_token: object = None) -> Callable[..., Any]:
    """A wrapper body for a loader whose ``map_location`` is argument ``position``."""

    def body(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        args, kwargs = cpu_by_default(args, kwargs, position, default_token)
        return wrapped(*args, **kwargs)

    return body


def apply() -> str | None:
    from mmengine.runner import checkpoint, runner

    # _load_checkpoint(filename, map_location=None, logger=None)
    _swaps.wrap(checkpoint, "_load_checkpoint", _map_location_to_cpu(1), aliases=((runner, "_load_checkpoint"),))
    # load_checkpoint(model, filename, map_location=None, ...) calls the module
    # global _load_checkpoint, but wrap it too for callers that pass None explicitly
    # through other loaders.
    import mmengine.runner as runner_pkg

    _swaps.wrap(checkpoint, "load_checkpoint", _map_location_to_cpu(2), aliases=((runner_pkg, "load_checkpoint"),))
    # CheckpointLoader.load_checkpoint(cls, filename, map_location=None, logger=...)
    _swaps.wrap(checkpoint.CheckpointLoader, "load_checkpoint", _map_location_to_cpu(1))
    # Runner.resume(self, filename, resume_optimizer, resume_param_scheduler, map_location='default')
    _swaps.wrap(runner.Runner, "resume", _map_location_to_cpu(3, "default"))
    # Runner.load_checkpoint(self, filename, map_location='cpu', ...) already defaults to CPU;
    # an explicit None would still mean "the saved device".
    _swaps.wrap(runner.Runner, "load_checkpoint", _map_location_to_cpu(1))
    return None


def remove() -> None:
    _swaps.undo_all()
