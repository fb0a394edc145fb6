"""DDP's unused-parameter error, explained: which parameters, and the exact fix.

Stock message: "Expected to have finished reduction in the prior iteration
before starting a new one ... Parameter indices which did not receive grad for
rank 0: 4 5". Indices are positions in the list DDP hands its reducer, which
is rebuilt here to turn them into names. With MMFIX_FIND_UNUSED_PARAMETERS=1
the fix is applied instead, with a notice of its cost.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from .. import _log, _settings, _wrapping
from .._errors import UnusedParametersError

_swaps = _wrapping.SwapSet()
_MARKER = "Expected to have finished reduction in the prior iteration"
_INDICES = re.compile(r"Parameter indices which did not receive grad for rank (\d+):\s*([\d ]+)")
_NAMES = re.compile(r"Parameters which did not receive grad for rank (\d+):\s*([^\n]+)")


def apply() -> str | None:
    from mmengine.model.wrappers.distributed import MMDistributedDataParallel
    from mmengine.runner import runner

    _swaps.wrap(runner.Runner, "wrap_model", _wrap_model)
    _swaps.wrap(MMDistributedDataParallel, "train_step", _train_step)
    return None


def remove() -> None:
    _swaps.undo_all()


def _wrap_model(wrapped: Callable[..., Any], runner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    model_wrapper_cfg = _wrapping.argument(args, kwargs, 0, "model_wrapper_cfg")
    if _settings.current().find_unused_parameters:
        if model_wrapper_cfg is None:
            runner.cfg["find_unused_parameters"] = True
        else:
            model_wrapper_cfg = dict(model_wrapper_cfg, find_unused_parameters=True)
            args, kwargs = _wrapping.with_argument(args, kwargs, 0, "model_wrapper_cfg", model_wrapper_cfg)
        _log.info(
            "MMFIX_FIND_UNUSED_PARAMETERS=1: DDP runs with find_unused_parameters=True, which walks the "
            "autograd graph after every forward pass and costs time each iteration. Prefer making every "
            "parameter take part in the loss (or freezing the unused ones).",
            key="find-unused-on",
        )
    model = wrapped(*args, **kwargs)
    try:
        model._mmfix_wrapper_cfg_given = model_wrapper_cfg is not None
    except Exception:
        pass
    return model


def _reducer_parameter_names(ddp: Any) -> list[str]:
    """Parameter names in the order DDP gives them to its reducer (indices in its errors)."""
    ignored = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    names: list[str] = []
    seen: set[int] = set()
    for module_name, module in ddp.module.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            full = f"{module_name}.{param_name}" if module_name else param_name
            if not param.requires_grad or full in ignored or id(param) in seen:
                continue
            seen.add(id(param))
            names.append(full)
    return names


def explain(message: str, ddp: Any) -> tuple[str, tuple[str, ...]]:
    rank = None
    params: list[str] = []
    match = _NAMES.search(message)
    if match:
        rank = match.group(1)
        params = [p.strip() for p in match.group(2).split(",") if p.strip()]
    else:
        match = _INDICES.search(message)
        if match:
            rank = match.group(1)
            order = _reducer_parameter_names(ddp)
            for index in match.group(2).split():
                i = int(index)
                params.append(order[i] if i < len(order) else f"<parameter #{i}>")
    if params:
        what = f"these parameters received no gradient on rank {rank}: {', '.join(params)}."
    else:
        what = "some parameters received no gradient (DDP did not say which)."
    if getattr(ddp, "_mmfix_wrapper_cfg_given", False):
        fix = (
            "add `--cfg-options model_wrapper_cfg.find_unused_parameters=True` to the command "
            "(or `find_unused_parameters=True` inside `model_wrapper_cfg` in the config)"
        )
    else:
        fix = (
            "add `--cfg-options find_unused_parameters=True` to the command "
            "(or `find_unused_parameters = True` at the top level of the config)"
        )
    text = (
        f"DDP stopped training: {what} Every parameter must take part in the loss of every iteration, or "
        f"DDP must be told to look for unused ones. Fix: {fix}; or make those parameters part of the loss, "
        "or freeze them (requires_grad=False). MMFIX_FIND_UNUSED_PARAMETERS=1 turns the option on for you "
        "(at the cost of an extra graph traversal per iteration)."
    )
    return text, tuple(params)


def _train_step(wrapped: Callable[..., Any], ddp: Any, args: tuple, kwargs: dict) -> Any:
    try:
        return wrapped(*args, **kwargs)
    except RuntimeError as exc:
        if _MARKER not in str(exc):
            raise
        text, params = explain(str(exc), ddp)
        # Not logged here as well: reaching the top, it is printed once per rank (_excepthook).
        raise UnusedParametersError(text, params) from exc
