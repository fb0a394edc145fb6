"""Deformable convolution v1: ``deform_conv_forward`` and its two backward functions.

The extension's calling convention (``mmcv/ops/deform_conv.py``): the output and the
gradients are passed in and written into, with the kernel's semantics —
``deform_conv_forward`` overwrites ``output``; ``deform_conv_backward_input`` ADDS the input
gradient into ``gradInput`` (col2im accumulates) and overwrites ``gradOffset``;
``deform_conv_backward_parameters`` adds ``scale`` times the weight gradient into
``gradWeight``. ``columns`` and ``ones`` are scratch handles: the C++ rebinds them to fresh
tensors locally, so the caller's tensors are never changed, and neither are they here.
Batches run ``im2col_step`` images at a time, which must divide the batch, as in mmcv.

The arithmetic is in ``_deform_im2col`` (shared with the modulated version).
"""

from __future__ import annotations

import torch

from . import _deform_checks as check
from . import _deform_im2col
from ._deform_im2col import Geometry, data_gradients, forward, weight_gradient

_LAYOUT = "(batch, channels, height, width)"
#: For ``mmfix doctor``: torchvision's kernel serves only the forward, and only on CUDA tensors
#: (see ``_deform_im2col.torchvision_ops``); the backward and everything on CPU are mmfix's.
TORCHVISION_FAST_PATH = False

_OFFSET = "(batch, deform_groups * 2 * kH * kW, out_h, out_w), (dy, dx) per kernel tap"


def _geometry(
    op: str,
    input: torch.Tensor,
    weight_shape: torch.Size,
    offset: torch.Tensor,
    kW: int,
    kH: int,
    dW: int,
    dH: int,
    padW: int,
    padH: int,
    dilationW: int,
    dilationH: int,
    group: int,
    deformable_group: int,
    im2col_step: int,
) -> tuple[Geometry, int, int]:
    """deform_conv_shape_check, plus what the kernel's views need (groups and im2col_step divide)."""
    check.positive(op, kW=kW, kH=kH, dW=dW, dH=dH, dilationW=dilationW, dilationH=dilationH)
    check.positive(op, group=group, deformable_group=deformable_group, im2col_step=im2col_step)
    check.non_negative(op, padW=padW, padH=padH)
    if len(weight_shape) != 4:
        raise check.fail(
            op,
            f"the weight has shape {tuple(weight_shape)}",
            "It must be 4-D: (out_channels, in_channels / groups, kH, kW)",
        )
    if tuple(weight_shape[2:]) != (kH, kW):
        raise check.fail(
            op,
            f"kH, kW = {kH}, {kW} but the weight's kernel is {tuple(weight_shape[2:])}",
            "Pass the weight's own kernel size",
        )
    check.dims(op, "input", input, 4, _LAYOUT)
    check.dims(op, "offset", offset, 4, _OFFSET)
    batch, channels, height, width = input.shape
    if channels != weight_shape[1] * group:
        raise check.fail(
            op,
            f"the input has {channels} channels, the weight expects {weight_shape[1]} x group {group}",
            "Pass in_channels = weight.size(1) * group",
        )
    if channels % deformable_group or weight_shape[0] % group:
        raise check.fail(
            op,
            f"{channels} input / {weight_shape[0]} output channels with group {group}, deformable_group {deformable_group}",
            "deformable_group must divide the input channels, and group the input and output channels",
        )
    geo = Geometry(kH, kW, dH, dW, padH, padW, dilationH, dilationW, group, deformable_group)
    out_h, out_w = geo.output_size(height, width)
    if out_h < 1 or out_w < 1:
        raise check.fail(
            op, f"the output would be {out_h} x {out_w} for a {height} x {width} input", "Use a larger input or padding"
        )
    if height < kH or width < kW:
        raise check.fail(
            op,
            f"the {height} x {width} input is smaller than the {kH} x {kW} kernel",
            "Pad the input to the kernel size (mmcv's DeformConv2d does so)",
        )
    check.shape(op, "offset", offset, (batch, deformable_group * 2 * kH * kW, out_h, out_w), _OFFSET)
    if batch % im2col_step:
        raise check.fail(
            op, f"im2col_step {im2col_step} does not divide the batch of {batch}", "Pass a divisor of the batch size"
        )
    return geo, out_h, out_w


def deform_conv_forward(
    input: torch.Tensor,
    weight: torch.Tensor,
    offset: torch.Tensor,
    output: torch.Tensor,
    columns: torch.Tensor,
    ones: torch.Tensor,
    kW: int,
    kH: int,
    dW: int,
    dH: int,
    padW: int,
    padH: int,
    dilationW: int,
    dilationH: int,
    group: int,
    deformable_group: int,
    im2col_step: int,
) -> None:
    op = "deform_conv_forward"
    check.same_kind(op, input=input, weight=weight, offset=offset, output=output)
    geo, out_h, out_w = _geometry(
        op,
        input,
        weight.shape,
        offset,
        kW,
        kH,
        dW,
        dH,
        padW,
        padH,
        dilationW,
        dilationH,
        group,
        deformable_group,
        im2col_step,
    )
    target = check.view(op, "output", output, (input.shape[0], weight.shape[0], out_h, out_w))
    tv = _deform_im2col.torchvision_ops(input)
    if tv is not None:
        # Same sampling, offset layout and groups (torchvision infers them from the shapes).
        target.copy_(
            tv.deform_conv2d(
                input, offset, weight, stride=(dH, dW), padding=(padH, padW), dilation=(dilationH, dilationW)
            )
        )
        return
    forward(input, weight, offset, None, target, geo, im2col_step)


def deform_conv_backward_input(
    input: torch.Tensor,
    offset: torch.Tensor,
    gradOutput: torch.Tensor,
    gradInput: torch.Tensor,
    gradOffset: torch.Tensor,
    weight: torch.Tensor,
    columns: torch.Tensor,
    kW: int,
    kH: int,
    dW: int,
    dH: int,
    padW: int,
    padH: int,
    dilationW: int,
    dilationH: int,
    group: int,
    deformable_group: int,
    im2col_step: int,
) -> None:
    op = "deform_conv_backward_input"
    check.same_kind(
        op, input=input, offset=offset, gradOutput=gradOutput, gradInput=gradInput, gradOffset=gradOffset, weight=weight
    )
    geo, out_h, out_w = _geometry(
        op,
        input,
        weight.shape,
        offset,
        kW,
        kH,
        dW,
        dH,
        padW,
        padH,
        dilationW,
        dilationH,
        group,
        deformable_group,
        im2col_step,
    )
    check.shape(op, "gradOutput", gradOutput, (input.shape[0], weight.shape[0], out_h, out_w), "that of the output")
    grad_input = check.view(op, "gradInput", gradInput, input.shape)
    grad_offset = check.view(op, "gradOffset", gradOffset, offset.shape)
    grads = data_gradients(input, weight, offset, None, gradOutput, geo, im2col_step, with_weight=False)
    grad_input += grads.input
    grad_offset.copy_(grads.offset)


def deform_conv_backward_parameters(
    input: torch.Tensor,
    offset: torch.Tensor,
    gradOutput: torch.Tensor,
    gradWeight: torch.Tensor,
    columns: torch.Tensor,
    ones: torch.Tensor,
    kW: int,
    kH: int,
    dW: int,
    dH: int,
    padW: int,
    padH: int,
    dilationW: int,
    dilationH: int,
    group: int,
    deformable_group: int,
    scale: float,
    im2col_step: int,
) -> None:
    op = "deform_conv_backward_parameters"
    check.same_kind(op, input=input, offset=offset, gradOutput=gradOutput, gradWeight=gradWeight)
    geo, out_h, out_w = _geometry(
        op,
        input,
        gradWeight.shape,
        offset,
        kW,
        kH,
        dW,
        dH,
        padW,
        padH,
        dilationW,
        dilationH,
        group,
        deformable_group,
        im2col_step,
    )
    check.shape(op, "gradOutput", gradOutput, (input.shape[0], gradWeight.shape[0], out_h, out_w), "that of the output")
    grad_weight = check.view(op, "gradWeight", gradWeight, gradWeight.shape)
    grad_weight.add_(weight_gradient(input, offset, None, gradOutput, geo, im2col_step), alpha=scale)
