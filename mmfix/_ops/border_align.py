"""``border_align_forward`` / ``border_align_backward``: BorderDet's border max-pooling (mmcv.ops.BorderAlign).

``input`` is (N, 4C, H, W): four groups of C channels for the top, left, bottom and right
borders; ``boxes`` (N, K, 4) as (x1, y1, x2, y2). For every box, channel and border the
CUDA kernel (mmcv has no CPU one) walks ``pool_size + 1`` points along the border and
keeps the largest bilinear sample (``output`` (N, C, K, 4)) and its step (``argmax_idx``,
int32; the first of equal maxima):

* top: from (x1, y1) rightwards, left: from (x1, y1) downwards, bottom: from (x2, y2)
  leftwards, right: from (x2, y2) upwards, in steps of (side length) / pool_size, each
  point the previous plus the step (float additions in turn, as the kernel does);
* samples are mmcv's ``bilinear_interpolate``: 0 beyond one pixel outside the map,
  coordinates clamped to it.

The backward adds each output gradient, times the bilinear weights of the arg-max point
(recomputed as start + step · argmax, one fused multiply-add on the GPU), into
``grad_input``. Half inputs are computed in float32 and rounded once.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_checks as check
from ._cuda_float import fma

_FLOATS = (torch.float16, torch.float32, torch.float64)
#: Border order in the channel groups and in the output's last dimension.
_TOP, _LEFT, _BOTTOM, _RIGHT = range(4)


def _compute(t: Tensor) -> Tensor:
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


def _check(
    op: str, input_name: str, input_shape: tuple[int, ...], dtype: torch.dtype, boxes: Tensor, pool_size: int
) -> None:
    if len(input_shape) != 4 or input_shape[1] % 4:
        check._fail(op, f"`{input_name}` must be (N, 4·C, H, W), four channel groups; got shape {input_shape}.")
    if boxes.dim() != 3 or boxes.shape[2] != 4 or boxes.shape[0] != input_shape[0]:
        check._fail(op, f"`boxes` must be (N={input_shape[0]}, K, 4) as (x1, y1, x2, y2); got {tuple(boxes.shape)}.")
    if boxes.dtype != dtype:
        check._fail(op, f"`boxes` must have the dtype of `{input_name}` ({dtype}); got {boxes.dtype}.")
    if int(pool_size) < 1:
        check._fail(op, f"`pool_size` must be at least 1; got {pool_size}.")


def _walk(boxes: Tensor, border: int, pool_size: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Start point and step (x, y) of every box (N, K) along one border."""
    x1, y1, x2, y2 = boxes.unbind(-1)
    zero = torch.zeros_like(x1)
    width_step = (x2 - x1) / pool_size
    height_step = (y2 - y1) / pool_size
    if border == _TOP:
        return x1, y1, width_step, zero
    if border == _LEFT:
        return x1, y1, zero, height_step
    if border == _BOTTOM:
        return x2, y2, -width_step, zero
    return x2, y2, zero, -height_step


def _bilinear(x: Tensor, y: Tensor, height: int, width: int) -> tuple[list[Tensor], list[Tensor]]:
    """The four flat indices and weights of mmcv's bilinear_interpolate at (x, y); weights 0 outside."""
    outside = (y < -1.0) | (y > height) | (x < -1.0) | (x > width)
    y, x = y.clamp(min=0), x.clamp(min=0)
    y_low, x_low = y.to(torch.int64), x.to(torch.int64)
    y_edge, x_edge = y_low >= height - 1, x_low >= width - 1
    y_low = torch.where(y_edge, height - 1, y_low)
    x_low = torch.where(x_edge, width - 1, x_low)
    y = torch.where(y_edge, y_low.to(y.dtype), y)
    x = torch.where(x_edge, x_low.to(x.dtype), x)
    y_high = torch.where(y_edge, y_low, y_low + 1)
    x_high = torch.where(x_edge, x_low, x_low + 1)
    ly, lx = y - y_low, x - x_low
    hy, hx = 1.0 - ly, 1.0 - lx
    keep = (~outside).to(x.dtype)
    weights = [hy * hx * keep, hy * lx * keep, ly * hx * keep, ly * lx * keep]
    indices = [y_low * width + x_low, y_low * width + x_high, y_high * width + x_low, y_high * width + x_high]
    zero = torch.zeros_like(indices[0])
    return [torch.where(outside, zero, i) for i in indices], weights


def border_align_forward(input: Tensor, boxes: Tensor, output: Tensor, argmax_idx: Tensor, pool_size: int) -> None:
    op = "border_align_forward"
    _check(op, "input", tuple(input.shape), input.dtype, boxes, pool_size)
    check.dtype(op, "input", input, _FLOATS, "mmcv's CUDA kernel takes half, float and double")
    n, channels4, height, width = input.shape
    channels, k = channels4 // 4, boxes.shape[1]
    shape = (n, channels, k, 4)
    if tuple(output.shape) != shape or output.dtype != input.dtype:
        check._fail(op, f"`output` must be {input.dtype} of shape {shape}; got {output.dtype} {tuple(output.shape)}.")
    if tuple(argmax_idx.shape) != shape or argmax_idx.dtype != torch.int32:
        check._fail(
            op, f"`argmax_idx` must be int32 of shape {shape}; got {argmax_idx.dtype} {tuple(argmax_idx.shape)}."
        )
    check.same_device(op, input=input, boxes=boxes, output=output, argmax_idx=argmax_idx)
    if output.numel() == 0:
        return
    with torch.no_grad():
        features = _compute(input).reshape(n, 4, channels, height * width)
        walk_boxes = _compute(boxes)
        for border in range(4):
            plane = features[:, border]  # (N, C, H*W)
            x, y, step_x, step_y = _walk(walk_boxes, border, pool_size)
            best = best_at = None
            for i in range(pool_size + 1):
                if i:
                    x, y = x + step_x, y + step_y
                indices, weights = _bilinear(x, y, height, width)
                value = None
                for index, weight in zip(indices, weights):
                    term = plane.gather(2, index[:, None, :].expand(n, channels, k)) * weight[:, None, :]
                    value = term if value is None else value + term
                assert value is not None
                if best is None or best_at is None:
                    best, best_at = value, torch.zeros(value.shape, dtype=torch.int32, device=value.device)
                else:
                    better = value > best
                    best = torch.where(better, value, best)
                    best_at = torch.where(better, torch.full_like(best_at, i), best_at)
            assert best is not None and best_at is not None
            output[..., border] = best.to(output.dtype)
            argmax_idx[..., border] = best_at


def border_align_backward(
    grad_output: Tensor, boxes: Tensor, argmax_idx: Tensor, grad_input: Tensor, pool_size: int
) -> None:
    op = "border_align_backward"
    _check(op, "grad_input", tuple(grad_input.shape), grad_output.dtype, boxes, pool_size)
    check.dtype(op, "grad_output", grad_output, _FLOATS, "mmcv's CUDA kernel takes half, float and double")
    n, channels4, height, width = grad_input.shape
    channels, k = channels4 // 4, boxes.shape[1]
    shape = (n, channels, k, 4)
    if tuple(grad_output.shape) != shape or grad_input.dtype != grad_output.dtype:
        check._fail(
            op,
            f"`grad_output` must be of shape {shape} and the dtype of `grad_input`; got {grad_output.dtype} {tuple(grad_output.shape)}.",
        )
    if tuple(argmax_idx.shape) != shape or argmax_idx.dtype != torch.int32:
        check._fail(
            op, f"`argmax_idx` must be int32 of shape {shape}; got {argmax_idx.dtype} {tuple(argmax_idx.shape)}."
        )
    check.same_device(op, grad_output=grad_output, boxes=boxes, argmax_idx=argmax_idx, grad_input=grad_input)
    if grad_output.numel() == 0:
        return
    with torch.no_grad():
        grads = _compute(grad_output)
        total = _compute(grad_input).reshape(n, 4, channels, height * width).clone()
        walk_boxes = _compute(boxes)
        for border in range(4):
            x0, y0, step_x, step_y = (
                t[:, None, :].expand(n, channels, k) for t in _walk(walk_boxes, border, pool_size)
            )
            steps = argmax_idx[..., border].to(x0.dtype)
            if x0.dtype == torch.float32:
                x, y = fma(step_x, steps, x0), fma(step_y, steps, y0)
            else:
                x, y = x0 + step_x * steps, y0 + step_y * steps
            indices, weights = _bilinear(x, y, height, width)
            g = grads[..., border]
            plane = total[:, border]
            for index, weight in zip(indices, weights):
                plane.scatter_add_(2, index, g * weight)
        grad_input.copy_(total.view(grad_input.shape))
