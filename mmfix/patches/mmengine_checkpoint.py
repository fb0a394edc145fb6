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

from .. import _settings, _wrapping

NAME = "mmengine_checkpoint"
_swaps: list[_wrapping.Swap] = []


def _map_location_to_cpu(position: int, default_token: object = None) -> Callable[..., Any]:
    """A wrapper body that turns a missing / default map_location into 'cpu'."""

    def body(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _settings.current().cpu_map:
            if len(args) > position:
                if args[position] is None or args[position] == default_token:
                    args = args[:position] + ("cpu",) + args[position + 1 :]
            elif kwargs.get("map_location", default_token) in (None, default_token):
                kwargs["map_location"] = "cpu"
        return wrapped(*args, **kwargs)

    return body


def apply() -> str | None:
    from mmengine.runner import checkpoint, runner

    # _load_checkpoint(filename, map_location=None, logger=None)
    load = _wrapping.wrap(checkpoint, "_load_checkpoint", _map_location_to_cpu(1))
    _swaps.append(load)
    if (alias := _wrapping.also_install(load, runner, "_load_checkpoint")) is not None:
        _swaps.append(alias)
    # load_checkpoint(model, filename, map_location=None, ...) calls the module
    # global _load_checkpoint, but wrap it too for callers that pass None explicitly
    # through other loaders.
    _swaps.append(_wrapping.wrap(checkpoint, "load_checkpoint", _map_location_to_cpu(2)))
    import mmengine.runner as runner_pkg

    if (alias := _wrapping.also_install(_swaps[-1], runner_pkg, "load_checkpoint")) is not None:
        _swaps.append(alias)
    # CheckpointLoader.load_checkpoint(cls, filename, map_location=None, logger=...)
    _swaps.append(_wrapping.wrap(checkpoint.CheckpointLoader, "load_checkpoint", _map_location_to_cpu(1)))
    # Runner.resume(self, filename, resume_optimizer, resume_param_scheduler, map_location='default')
    _swaps.append(_wrapping.wrap(runner.Runner, "resume", _map_location_to_cpu(3, "default")))
    # Runner.load_checkpoint(self, filename, map_location='cpu', ...) already defaults to CPU;
    # an explicit None would still mean "the saved device".
    _swaps.append(_wrapping.wrap(runner.Runner, "load_checkpoint", _map_location_to_cpu(1)))
    return None


def remove() -> None:
    while _swaps:
        _swaps.pop().undo()
