"""Argument checks for the rotated-box and 3D-box ops: one clear paragraph per mistake.

mmcv's kernels read raw memory (a box with 4 columns where 5 are expected reads its
neighbour's), so where they would compute garbage or fail with an internal assertion,
these say what was wrong and how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor


class OpArgumentError(ValueError, RuntimeError):
    """Bad arguments to an op; also a RuntimeError, which is what the compiled kernels' checks raise."""


def _fail(op: str, message: str) -> None:
    raise OpArgumentError(f"mmcv op `{op}` (mmfix's PyTorch version): {message}")


def boxes(op: str, name: str, value: object, columns: Iterable[int], layout: str) -> Tensor:
    """A 2-D tensor with one of ``columns`` columns."""
    allowed = tuple(columns)
    if not isinstance(value, Tensor):
        _fail(op, f"`{name}` must be a torch.Tensor of boxes {layout}, got {type(value).__name__}.")
    assert isinstance(value, Tensor)
    if value.dim() != 2 or value.shape[1] not in allowed:
        _fail(
            op,
            f"`{name}` must have shape (N, {' or '.join(map(str, allowed))}), one box {layout} per row; "
            f"got shape {tuple(value.shape)}. Reshape the boxes to rows of that layout before calling.",
        )
    return value


def dtype(op: str, name: str, value: Tensor, allowed: Iterable[torch.dtype], why: str) -> None:
    allowed = tuple(allowed)
    if value.dtype not in allowed:
        names = " or ".join(str(d).replace("torch.", "") for d in allowed)
        _fail(
            op,
            f"`{name}` is {str(value.dtype).replace('torch.', '')}, but this op takes {names} ({why}). "
            f"Convert it, e.g. `{name}.float()`.",
        )


def same_device(op: str, **tensors: Tensor) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"`{n}` on {d}" for n, d in devices.items())
        _fail(op, f"the tensors must be on one device; got {listed}. Move them with `.to(device)`.")


def numel(op: str, name: str, value: Tensor, expected: int, meaning: str) -> None:
    if value.numel() != expected:
        _fail(
            op,
            f"`{name}` has {value.numel()} elements (shape {tuple(value.shape)}), but {meaning} needs {expected}. "
            "mmcv's Python wrapper allocates it; when calling the extension directly, allocate it the same way.",
        )


def choice(op: str, name: str, value: object, allowed: dict[int, str]) -> int:
    if not isinstance(value, int) or int(value) not in allowed:
        listed = ", ".join(f"{k} ({v})" for k, v in allowed.items())
        _fail(op, f"`{name}` must be one of {listed}; got {value!r}.")
    assert isinstance(value, int)
    return int(value)


def scores(op: str, name: str, value: object, count: int) -> Tensor:
    """A 1-D tensor of ``count`` scores."""
    if not isinstance(value, Tensor) or value.dim() != 1 or value.shape[0] != count:
        shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        _fail(op, f"`{name}` must be a 1-D tensor with one score per box ({count}); got {shape}.")
    assert isinstance(value, Tensor)
    return value
