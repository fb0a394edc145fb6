"""Argument checks of the deformable convolutions, with messages that say what to change.

mmcv's ``deform_conv_shape_check`` (``csrc/pytorch/deform_conv.cpp``) refuses the same
inputs with a ``TORCH_CHECK``; mmcv's Python wrappers never pass such arguments, so these
fire only for direct calls of the extension functions.
"""

from __future__ import annotations

from typing import Sequence

import torch


def fail(op: str, problem: str, fix: str) -> ValueError:
    return ValueError(f"{op}: {problem}. {fix}")


def same_kind(op: str, **tensors: torch.Tensor) -> None:
    """All floating point, one dtype, one device (the kernels read every buffer as the input's type)."""
    first_name, first = next(iter(tensors.items()))
    if not first.dtype.is_floating_point:
        raise fail(op, f"`{first_name}` is {first.dtype}", "Pass floating point tensors (float32, float64 or float16)")
    for name, tensor in tensors.items():
        if tensor.dtype != first.dtype or tensor.device != first.device:
            raise fail(
                op,
                f"`{name}` is {tensor.dtype} on {tensor.device} but `{first_name}` is {first.dtype} on {first.device}",
                "Give every tensor the same dtype and device (mmcv's wrappers cast with `.type_as(input)`)",
            )


def positive(op: str, **values: int) -> None:
    for name, value in values.items():
        if value <= 0:
            raise fail(op, f"`{name}` is {value}", f"`{name}` must be at least 1")


def non_negative(op: str, **values: int) -> None:
    for name, value in values.items():
        if value < 0:
            raise fail(op, f"`{name}` is {value}", f"`{name}` must be 0 or more")


def dims(op: str, name: str, tensor: torch.Tensor, expected: int, layout: str) -> None:
    if tensor.dim() != expected:
        raise fail(op, f"`{name}` has shape {tuple(tensor.shape)}", f"It must be {expected}-D: {layout}")


def shape(op: str, name: str, tensor: torch.Tensor, expected: Sequence[int], layout: str) -> None:
    if tuple(tensor.shape) != tuple(expected):
        raise fail(
            op, f"`{name}` has shape {tuple(tensor.shape)}, expected {tuple(expected)}", f"Its layout is {layout}"
        )


def view(op: str, name: str, tensor: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """The kernels write through ``tensor.view(size)``: same element count, viewable memory."""
    try:
        return tensor.view(*size)
    except RuntimeError:
        raise fail(
            op,
            f"`{name}` has shape {tuple(tensor.shape)} (strides {tensor.stride()}), which cannot be viewed as {tuple(size)}",
            f"Pass a contiguous tensor of {int(torch.Size(size).numel())} elements (results are written into it)",
        ) from None
