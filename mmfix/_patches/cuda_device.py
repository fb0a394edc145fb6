"""In a distributed worker, the current CUDA device is LOCAL_RANK before anything allocates.

Without this, everything a worker puts on "cuda" before MMEngine's init_dist
calls set_device (tensors built at import time, ``map_location='cuda'``, a
library's warm-up) lands on GPU 0, once per rank. Pinning at ``import mmfix``
would force CUDA to initialise in every process that merely imports torch, so
the device is set the moment CUDA initialises instead: ``torch.cuda._lazy_init``
runs on the first CUDA use from Python and from C++ alike.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

from .. import _log, _ranks, _wrapping
from .._errors import DeviceAssignmentError

_swaps = _wrapping.SwapSet()
_state = threading.local()


def apply() -> str | None:
    import torch
    import torch.cuda

    local = _ranks.local_rank()
    if local is None:
        return "not a distributed worker (no LOCAL_RANK, SLURM_LOCALID in a multi-task srun step, or MPI local rank)"
    if torch.cuda.is_initialized():
        # Too late to come first; still make the rest of the process use its own GPU.
        _pin(torch, local)
        return None
    _swaps.wrap(torch.cuda, "_lazy_init", _lazy_init_then_pin)
    return None


def remove() -> None:
    _swaps.undo_all()


def _lazy_init_then_pin(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    import torch

    if getattr(_state, "busy", False) or torch.cuda.is_initialized():
        return wrapped(*args, **kwargs)
    _state.busy = True
    try:
        result = wrapped(*args, **kwargs)
        local = _ranks.local_rank()
        if local is not None:
            _pin(torch, local)
        return result
    finally:
        _state.busy = False


def _pin(torch: Any, local: int) -> None:
    count = torch.cuda.device_count()
    if local >= count:
        from .._launch.translate import plural

        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        shown = "not set" if visible is None else repr(visible)
        raise DeviceAssignmentError(
            f"this worker has LOCAL_RANK={local}, but only {plural(count, 'CUDA device')} "
            f"{'is' if count == 1 else 'are'} visible to it (CUDA_VISIBLE_DEVICES is {shown}). "
            f"Start at most {plural(count, 'process', 'processes')} per node "
            f"(torchrun --nproc_per_node {count}, or --gpus {count}), or make more GPUs visible "
            "through CUDA_VISIBLE_DEVICES."
        )
    torch.cuda.set_device(local)
    _log.debug(f"rank-local CUDA device pinned: cuda:{local}", key="pinned", all_ranks=True)
