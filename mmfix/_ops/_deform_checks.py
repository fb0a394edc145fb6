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


# --- raw reads and writes ----------------------------------------------------------------------
# mmcv's kernels take ``tensor[b].data_ptr()`` (or ``tensor.data_ptr()``) and index it with the
# strides of the shape THEY expect (the output's height and width for an offset), never checking
# the tensor's own shape or strides. A tensor larger than that shape is therefore read from its
# first element on, row-major, and its remaining elements are ignored: MMDetection's DyHead
# relies on it (``spatial_conv_high`` applies the offset and mask computed on one FPN level to
# the next, smaller one), and every DyHead checkpoint was trained so. ``reader`` reproduces that
# read exactly (it is also what the kernels do with a non-contiguous tensor); a read that would
# leave the memory of the argument's own element (or image) is refused, as it would read out of
# bounds or another image's data.


def _span(tensor: torch.Tensor) -> int:
    """Elements from a tensor's first element to its last, inclusive, in its storage (0 if empty)."""
    if tensor.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))


def _check_span(op: str, name: str, tensor: torch.Tensor, images: int, per_image: int, layout: str) -> None:
    if tensor.dim() < 1 or tensor.shape[0] < images:
        raise fail(
            op,
            f"`{name}` has shape {tuple(tensor.shape)}, fewer than the {images} image(s) of the input",
            f"Its layout is {layout}",
        )
    span = _span(tensor[0]) if tensor.dim() > 1 else 1
    if images and span < per_image:
        raise fail(
            op,
            f"`{name}` has shape {tuple(tensor.shape)} (strides {tensor.stride()}): the kernel reads {per_image} "
            f"elements per image from each image's first one, but an image of it spans {span}",
            f"Its layout is {layout}; pass at least that many elements per image (a larger tensor is read from its "
            "start, row-major, as mmcv's kernels read it)",
        )


def reader(op: str, name: str, tensor: torch.Tensor, images: int, shape: Sequence[int], layout: str) -> torch.Tensor:
    """(images, *shape): what the kernel reads of ``tensor[b]`` for each image b, as a view."""
    per_image = int(torch.Size(shape).numel())
    _check_span(op, name, tensor, images, per_image, layout)
    if tuple(tensor.shape) == (images, *shape) and tensor.is_contiguous():
        return tensor
    inner = [int(torch.Size(shape[i + 1 :]).numel()) for i in range(len(shape))]
    return torch.as_strided(tensor, (images, *shape), (tensor.stride(0), *inner), tensor.storage_offset())


def write_per_image(
    op: str, name: str, tensor: torch.Tensor, values: torch.Tensor, layout: str, add: bool = False
) -> None:
    """Overwrite (or ``add`` into) what the kernel writes of ``tensor[b]``: ``values[b]``, row-major
    from its first element. Image by image, in order, as the kernel's loop (so overlapping images
    end as the last wrote them)."""
    images = values.shape[0]
    per_image = values[0].numel() if images else 0
    _check_span(op, name, tensor, images, per_image, layout)
    for b in range(images):
        region = torch.as_strided(tensor, (per_image,), (1,), tensor.storage_offset() + b * tensor.stride(0))
        if add:
            region.add_(values[b].reshape(-1))
        else:
            region.copy_(values[b].reshape(-1))


def flat(op: str, name: str, tensor: torch.Tensor, shape: Sequence[int], layout: str) -> torch.Tensor:
    """``shape``, row-major from ``tensor``'s first element: what a kernel indexing ``tensor.data_ptr()``
    reads (and writes) of it, as a view. Refused where that would leave the tensor's memory."""
    needed = int(torch.Size(shape).numel())
    if _span(tensor) < needed:
        raise fail(
            op,
            f"`{name}` has shape {tuple(tensor.shape)} (strides {tensor.stride()}): the kernel reads {needed} elements "
            f"from its first one, but it spans {_span(tensor)}",
            f"Its layout is {layout}",
        )
    if tuple(tensor.shape) == tuple(shape) and tensor.is_contiguous():
        return tensor
    inner = [int(torch.Size(shape[i + 1 :]).numel()) for i in range(len(shape))]
    return torch.as_strided(tensor, tuple(shape), tuple(inner), tensor.storage_offset())
