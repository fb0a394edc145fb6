"""Deformable convolution v2 (DCNv2): ``modulated_deform_conv_forward`` / ``_backward``.

As ``csrc/pytorch/modulated_deform_conv.cpp``: the forward zeroes ``output`` and writes the
convolution of the mask-weighted samples, plus ``bias`` when ``with_bias``; the backward
ADDS into ``grad_input``, ``grad_weight`` and (with bias) ``grad_bias``, and overwrites
``grad_offset`` and ``grad_mask``. ``columns`` is scratch the C++ rebinds locally (the
caller's tensor is never changed, nor here); ``ones`` is too, unless the caller passes a
2-D tensor of at least out_h * out_w elements, which the kernel then uses as the weights
of the bias gradient's sum over positions (mmcv passes an empty tensor: plain sums).

``offset`` and ``mask`` are read as the kernel reads them: per image, from the image's first
element on, in the output's layout; so a larger one (DyHead applies one level's offset to the
next, smaller level) is read from its start, and ``grad_offset`` / ``grad_mask`` are
overwritten there only (see ``_deform_checks.reader``).

The arithmetic is in ``_deform_im2col`` (shared with ``deform_conv``).
"""

from __future__ import annotations

import torch

from . import _deform_checks as check
from . import _deform_im2col
from ._deform_im2col import Geometry, data_gradients, forward

#: For ``mmfix doctor``: torchvision's kernel serves only the forward, and only on CUDA tensors
#: (see ``_deform_im2col.torchvision_ops``); the backward and everything on CPU are mmfix's.
TORCHVISION_FAST_PATH = False

_OFFSET = "(batch, deform_groups * 2 * kernel_h * kernel_w, out_h, out_w), (dy, dx) per kernel tap"
_INPUT = "(batch, channels, height, width)"
_MASK = "(batch, deform_groups * kernel_h * kernel_w, out_h, out_w)"


def _geometry(
    op: str,
    input: torch.Tensor,
    weight: torch.Tensor,
    offset: torch.Tensor,
    mask: torch.Tensor,
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_h: int,
    pad_w: int,
    dilation_h: int,
    dilation_w: int,
    group: int,
    deformable_group: int,
) -> tuple[Geometry, int, int, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The geometry, output size, and the input, offset and mask as the kernel reads them (``check.reader``)."""
    check.positive(op, kernel_h=kernel_h, kernel_w=kernel_w, stride_h=stride_h, stride_w=stride_w)
    check.positive(op, dilation_h=dilation_h, dilation_w=dilation_w, group=group, deformable_group=deformable_group)
    check.non_negative(op, pad_h=pad_h, pad_w=pad_w)
    check.dims(op, "input", input, 4, "(batch, channels, height, width)")
    check.dims(op, "weight", weight, 4, "(out_channels, in_channels / group, kernel_h, kernel_w)")
    if tuple(weight.shape[2:]) != (kernel_h, kernel_w):
        raise check.fail(
            op,
            f"kernel_h, kernel_w = {kernel_h}, {kernel_w} but the weight's kernel is {tuple(weight.shape[2:])}",
            "Pass the weight's own kernel size",
        )
    batch, channels, height, width = input.shape
    if channels != weight.shape[1] * group:
        raise check.fail(
            op,
            f"the input has {channels} channels, the weight expects {weight.shape[1]} x group {group}",
            "Pass in_channels = weight.size(1) * group",
        )
    if channels % deformable_group or weight.shape[0] % group:
        raise check.fail(
            op,
            f"{channels} input / {weight.shape[0]} output channels with group {group}, deformable_group {deformable_group}",
            "deformable_group must divide the input channels, and group the input and output channels",
        )
    geo = Geometry(
        kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, group, deformable_group
    )
    out_h, out_w = geo.output_size(height, width)
    if out_h < 1 or out_w < 1:
        raise check.fail(
            op, f"the output would be {out_h} x {out_w} for a {height} x {width} input", "Use a larger input or padding"
        )
    taps = kernel_h * kernel_w
    # Read as the kernel reads them: a larger offset or mask (DyHead's) from its start, row-major.
    offset = check.reader(op, "offset", offset, batch, (deformable_group * 2 * taps, out_h, out_w), _OFFSET)
    mask = check.reader(op, "mask", mask, batch, (deformable_group * taps, out_h, out_w), _MASK)
    # The image too (a channels-last input is read as its memory lies, as the kernel reads it).
    input = check.reader(op, "input", input, batch, (channels, height, width), _INPUT)
    return geo, out_h, out_w, input, offset, mask


def _bias(op: str, bias: torch.Tensor, out_channels: int) -> torch.Tensor:
    if bias.numel() != out_channels:
        raise check.fail(
            op,
            f"with_bias is set but the bias has {bias.numel()} elements",
            f"Pass one per output channel ({out_channels})",
        )
    return bias.reshape(out_channels)


def modulated_deform_conv_forward(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    ones: torch.Tensor,
    offset: torch.Tensor,
    mask: torch.Tensor,
    output: torch.Tensor,
    columns: torch.Tensor,
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_h: int,
    pad_w: int,
    dilation_h: int,
    dilation_w: int,
    group: int,
    deformable_group: int,
    with_bias: bool,
) -> None:
    op = "modulated_deform_conv_forward"
    check.same_kind(op, input=input, weight=weight, offset=offset, mask=mask, output=output)
    geo, out_h, out_w, input, offset, mask = _geometry(
        op,
        input,
        weight,
        offset,
        mask,
        kernel_h,
        kernel_w,
        stride_h,
        stride_w,
        pad_h,
        pad_w,
        dilation_h,
        dilation_w,
        group,
        deformable_group,
    )
    out_channels = weight.shape[0]
    bias_vector = None
    if with_bias:
        check.same_kind(op, input=input, bias=bias)
        bias_vector = _bias(op, bias, out_channels)
    target = check.view(op, "output", output, (input.shape[0], out_channels, out_h, out_w))
    tv = _deform_im2col.torchvision_ops(input)
    if tv is not None:
        # Same sampling, offset and mask layouts and groups (torchvision infers them from the shapes).
        result = tv.deform_conv2d(
            input,
            offset,
            weight,
            bias_vector,
            stride=(stride_h, stride_w),
            padding=(pad_h, pad_w),
            dilation=(dilation_h, dilation_w),
            mask=mask,
        )
        target.copy_(result)
        return
    forward(input, weight, offset, mask, target, geo, max(1, input.shape[0]))
    if bias_vector is not None:
        target += bias_vector.view(1, out_channels, 1, 1)


def modulated_deform_conv_backward(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    ones: torch.Tensor,
    offset: torch.Tensor,
    mask: torch.Tensor,
    columns: torch.Tensor,
    grad_input: torch.Tensor,
    grad_weight: torch.Tensor,
    grad_bias: torch.Tensor,
    grad_offset: torch.Tensor,
    grad_mask: torch.Tensor,
    grad_output: torch.Tensor,
    kernel_h: int,
    kernel_w: int,
    stride_h: int,
    stride_w: int,
    pad_h: int,
    pad_w: int,
    dilation_h: int,
    dilation_w: int,
    group: int,
    deformable_group: int,
    with_bias: bool,
) -> None:
    op = "modulated_deform_conv_backward"
    check.same_kind(
        op,
        input=input,
        weight=weight,
        offset=offset,
        mask=mask,
        grad_input=grad_input,
        grad_weight=grad_weight,
        grad_offset=grad_offset,
        grad_mask=grad_mask,
        grad_output=grad_output,
    )
    geo, out_h, out_w, input, offset, mask = _geometry(
        op,
        input,
        weight,
        offset,
        mask,
        kernel_h,
        kernel_w,
        stride_h,
        stride_w,
        pad_h,
        pad_w,
        dilation_h,
        dilation_w,
        group,
        deformable_group,
    )
    batch, out_channels = input.shape[0], weight.shape[0]
    check.shape(op, "grad_output", grad_output, (batch, out_channels, out_h, out_w), "that of the output")
    grad_image = check.view(op, "grad_input", grad_input, input.shape)  # the kernel's grad_input.view(...)
    weight_target = check.view(op, "grad_weight", grad_weight, weight.shape)
    bias_target = None
    if with_bias:
        check.same_kind(op, grad_output=grad_output, grad_bias=grad_bias)
        bias_target = check.view(op, "grad_bias", grad_bias, (out_channels,))
    grads = data_gradients(input, weight, offset, mask, grad_output, geo, max(1, batch), with_weight=True)
    assert grads.mask is not None and grads.weight is not None
    # Added where the kernel's col2im adds: grad_input[b] from its first element on.
    check.write_per_image(op, "grad_input", grad_image, grads.input.to(grad_input.dtype), _INPUT, add=True)
    # Overwritten where the kernel writes: per image, from its first element on (see ``check.reader``).
    check.write_per_image(op, "grad_offset", grad_offset, grads.offset.to(grad_offset.dtype), _OFFSET)
    check.write_per_image(op, "grad_mask", grad_mask, grads.mask.to(grad_mask.dtype), _MASK)
    weight_target += grads.weight
    if bias_target is not None:
        positions = grad_output.reshape(batch, out_channels, out_h * out_w)
        if ones.dim() == 2 and ones.numel() >= out_h * out_w:
            # The kernel keeps a caller's 2-D `ones` of sufficient size and sums with its values as weights.
            if ones.numel() != out_h * out_w:
                raise check.fail(
                    op,
                    f"`ones` has {ones.numel()} elements",
                    f"Pass an empty tensor or one of out_h * out_w = {out_h * out_w}",
                )
            bias_target += (positions @ ones.reshape(-1, 1).to(positions.dtype)).sum((0, 2))
        else:
            bias_target += positions.sum((0, 2))
