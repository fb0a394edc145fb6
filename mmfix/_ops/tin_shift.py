"""``tin_shift_forward`` / ``tin_shift_backward``: MMAction2's Temporal Interlace shift (TIN).

``input`` is (N, T, C, HW) and ``shift`` (N, G) int32, one integer shift per group of
``C // G`` channels. The CUDA kernel (mmcv has no CPU one) moves frame ``t`` of each
channel to ``t + shift``: ``output[n, t + s, c] = input[n, t, c]`` wherever ``t + s`` is a
frame, and writes nothing else (mmcv passes zeros, so frames shifted in are zero).

The backward kernel is the SAME kernel run on the gradient: ``grad_input[n, t + s, c] =
grad_output[n, t, c]``, a shift in the same direction as the forward one, where the
derivative of the forward would shift the other way. mmcv's own test expects exactly that,
so it is kept: gradients through ``mmcv.ops.tin_shift`` are those of mmcv on CUDA.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_checks as check

_FLOATS = (torch.float16, torch.float32, torch.float64)


def _check(
    op: str, source: Tensor, shift: Tensor, destination: Tensor, source_name: str, destination_name: str
) -> None:
    if source.dim() != 4:
        check._fail(op, f"`{source_name}` must be 4-D (N, T, C, H*W); got shape {tuple(source.shape)}.")
    check.dtype(op, source_name, source, _FLOATS, "mmcv's CUDA kernel takes half, float and double")
    check.dtype(op, "shift", shift, (torch.int32,), "the kernel reads the shifts as C ints; mmcv passes `.int()`")
    check.same_device(op, **{source_name: source, "shift": shift, destination_name: destination})
    n, _, channels, _ = source.shape
    if shift.dim() != 2 or shift.shape[0] != n:
        check._fail(op, f"`shift` must have shape (N={n}, groups); got {tuple(shift.shape)}.")
    groups = shift.shape[1]
    if groups == 0 or channels % groups:
        check._fail(
            op,
            f"the channels ({channels}) must split into the {groups} shift groups evenly "
            "(mmcv.ops.tin_shift says: C should be a multiple of num_segments).",
        )
    if destination.shape != source.shape or destination.dtype != source.dtype:
        check._fail(
            op,
            f"`{destination_name}` must have the shape and dtype of `{source_name}` "
            f"({tuple(source.shape)}, {source.dtype}); got {tuple(destination.shape)}, {destination.dtype}.",
        )


def _shift(source: Tensor, shift: Tensor, destination: Tensor) -> None:
    _, frames, channels, _ = source.shape
    if source.numel() == 0:
        return
    per_channel = shift.long().repeat_interleave(channels // shift.shape[1], dim=1)  # (N, C)
    t = torch.arange(frames, device=source.device)
    origin = t[None, :, None] - per_channel[:, None, :]  # (N, T, C): the frame that lands on t
    lands = (origin >= 0) & (origin < frames)
    gathered = source.gather(1, origin.clamp(0, frames - 1)[..., None].expand_as(source))
    destination.copy_(torch.where(lands[..., None], gathered, destination))


def tin_shift_forward(input: Tensor, shift: Tensor, output: Tensor) -> None:
    _check("tin_shift_forward", input, shift, output, "input", "output")
    with torch.no_grad():
        _shift(input, shift, output)


def tin_shift_backward(grad_output: Tensor, shift: Tensor, grad_input: Tensor) -> None:
    _check("tin_shift_backward", grad_output, shift, grad_input, "grad_output", "grad_input")
    with torch.no_grad():
        _shift(grad_output, shift, grad_input)
