"""mmcv's ``roi_pool_forward`` / ``roi_pool_backward`` (ops/csrc/common/cuda/roi_pool_cuda_kernel.cuh).

Compiled mmcv has this op in CUDA only; this is that kernel's arithmetic:

* the RoI spans ``[x1 * scale, (x2 + 1) * scale)`` (no rounding, unlike torchvision's
  roi_pool, which rounds the corners: the two differ, so torchvision is not used);
* a RoI of zero or negative width or height is skipped: its output and argmax are left as
  they were (mmcv's Python wrapper passes zeros, so such a RoI's gradient then goes to
  pixel 0 of its map, as in compiled mmcv);
* bin p covers ``[floor(p * bin + start), ceil((p + 1) * bin + start))``, clipped to the
  map, where ``p * bin + start`` is one fused multiply-add as nvcc compiles it (emulated
  exactly for float32 through float64);
* the maximum is the first strictly greater value in row-major order, from -FLT_MAX; an
  empty bin outputs 0 with argmax -1; argmax is the pixel's index ``h * W + w`` in its map.

The backward pass adds each output's gradient to its argmax pixel.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

import torch
from torch import Tensor

from . import _maps

#: Most values (RoIs × bins × channels × pixels of a bin row) read at once.
POOL_BUDGET = 1 << 21
_FLT_MAX = 3.4028234663852886e38


def _fused(p: Tensor, step: Tensor, start: Tensor) -> Tensor:
    """fmaf(p, step, start): the product and sum exact, one rounding (float64 holds the product
    of two float32 exactly); other dtypes compute as written."""
    if step.dtype == torch.float32:
        return (p.double() * step.double() + start.double()).float()
    return p.to(step.dtype) * step + start


class _Bins(NamedTuple):
    """Per RoI (R,) and bin: the clipped [first, end) rows (R, PH) and columns (R, PW)."""

    skipped: Tensor  # (R,) RoIs of zero or negative size
    y1: Tensor
    y2: Tensor
    x1: Tensor
    x2: Tensor


def _bins(rois: Tensor, dtype: torch.dtype, ph: int, pw: int, scale: float, height: int, width: int) -> _Bins:
    r = rois.to(dtype)
    s = torch.tensor(scale, dtype=dtype, device=rois.device)
    x1 = r[:, 1] * s
    y1 = r[:, 2] * s
    x2 = (r[:, 3] + 1) * s
    y2 = (r[:, 4] + 1) * s
    roi_w = x2 - x1
    roi_h = y2 - y1
    skipped = (roi_w <= 0) | (roi_h <= 0)
    bin_w = roi_w / pw
    bin_h = roi_h / ph
    pws = torch.arange(pw, device=rois.device, dtype=dtype)
    phs = torch.arange(ph, device=rois.device, dtype=dtype)
    first_x = torch.floor(_fused(pws[None, :], bin_w[:, None], x1[:, None]))
    end_x = torch.ceil(_fused(pws[None, :] + 1, bin_w[:, None], x1[:, None]))
    first_y = torch.floor(_fused(phs[None, :], bin_h[:, None], y1[:, None]))
    end_y = torch.ceil(_fused(phs[None, :] + 1, bin_h[:, None], y1[:, None]))
    return _Bins(
        skipped,
        first_y.clamp(0, height).long(),
        end_y.clamp(0, height).long(),
        first_x.clamp(0, width).long(),
        end_x.clamp(0, width).long(),
    )


def _check(op: str, features: Tensor, rois: Tensor, pooled_height: int, pooled_width: int) -> None:
    _maps.check_rois(op, features, rois, pooled_height, pooled_width)


def roi_pool_forward(
    input: Tensor,
    rois: Tensor,
    output: Tensor,
    argmax: Tensor,
    pooled_height: int,
    pooled_width: int,
    spatial_scale: float,
) -> None:
    """Max-pool each RoI into ``output`` (K, C, PH, PW) and the winning pixels into ``argmax`` (int32)."""
    ph, pw = int(pooled_height), int(pooled_width)
    _check("roi_pool_forward", input, rois, ph, pw)
    expected = (rois.shape[0], input.shape[1], ph, pw)
    if tuple(output.shape) != expected or tuple(argmax.shape) != expected:
        raise ValueError(
            f"mmcv op `roi_pool_forward` writes output and argmax of shape {expected}, "
            f"got {tuple(output.shape)} and {tuple(argmax.shape)}."
        )
    if rois.shape[0] == 0:
        return
    _, c, h, w = input.shape
    dtype = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
    bins = _bins(rois, dtype, ph, pw, float(spatial_scale), h, w)
    pooled = (~bins.skipped).nonzero().squeeze(1)
    if not pooled.numel():
        return
    pixels = _pixel_table(input, dtype)
    batch = rois[:, 0].long()
    widest = (bins.x2 - bins.x1).amax(1).clamp(min=1)
    extent = (bins.y2 - bins.y1).amax(1).clamp(min=0) * widest
    order = pooled[torch.argsort(extent[pooled])]  # RoIs with similar bins together
    # Chunks within POOL_BUDGET values (each RoI: its bins times its widest bin's pixels).
    spent = ((ph * pw * c) * widest[order]).cumsum(0).tolist()
    begin = 0
    while begin < len(spent):
        before = spent[begin - 1] if begin else 0
        end = max(bisect.bisect_right(spent, before + POOL_BUDGET), begin + 1)
        index = order[begin:end]
        best, best_at = _pool_chunk(pixels, batch[index], bins, index, h, w, ph, pw)
        output.index_copy_(0, index, best.permute(0, 3, 1, 2).to(output.dtype))
        argmax.index_copy_(0, index, best_at.permute(0, 3, 1, 2).to(argmax.dtype))
        begin = end


def _pixel_table(input: Tensor, dtype: torch.dtype) -> Tensor:
    """(N * H * W + 1, C): each pixel's channels, then a row of -inf that bins read outside.

    The kernel's ``value > max`` never picks a NaN: NaN is stored as -inf (never picked either)."""
    n, c, h, w = input.shape
    table = torch.empty(n * h * w + 1, c, dtype=dtype, device=input.device)
    planes = table[:-1].view(n, h * w, c)
    for i in range(n):
        planes[i].copy_(input[i].reshape(c, h * w).t())
    table[-1] = float("-inf")
    if bool(torch.isnan(planes).any()):
        torch.nan_to_num(planes, nan=float("-inf"), posinf=float("inf"), neginf=float("-inf"), out=planes)
    return table


def _pool_chunk(
    pixels: Tensor, batch: Tensor, bins: _Bins, index: Tensor, h: int, w: int, ph: int, pw: int
) -> tuple[Tensor, Tensor]:
    """(rc, PH, PW, C) maxima and their pixel indices: each bin row's pixels read at once, then
    compared pixel by pixel in row-major order with the kernel's strict ``>``. What no pixel
    beats stays at the kernel's start: -FLT_MAX with argmax -1, or 0 for an empty bin."""
    rc, c = index.numel(), pixels.shape[1]
    outside = pixels.shape[0] - 1
    y1, y2, x1, x2 = bins.y1[index], bins.y2[index], bins.x1[index], bins.x2[index]
    empty = (y2 <= y1)[:, :, None] | (x2 <= x1)[:, None, :]  # (rc, ph, pw)
    best = torch.where(empty, 0.0, -_FLT_MAX).to(pixels.dtype)[..., None].expand(rc, ph, pw, c).clone()
    best_at = torch.full((rc, ph, pw, c), -1, dtype=torch.long, device=pixels.device)
    rows = int((y2 - y1).max().clamp(min=0))
    cols = int((x2 - x1).max().clamp(min=0))
    if rows == 0 or cols == 0:
        return best, best_at
    x = x1[:, :, None] + torch.arange(cols, device=pixels.device)  # (rc, pw, cols)
    column_in = (x < x2[:, :, None])[:, None]  # (rc, 1, pw, cols)
    image = (batch * (h * w)).view(rc, 1, 1, 1)
    for dy in range(rows):
        y = (y1 + dy)[:, :, None, None]  # (rc, ph, 1, 1)
        inside = column_in & (y < y2[:, :, None, None])  # (rc, ph, pw, cols)
        at = y * w + x[:, None]  # pixel index within the map
        slot = torch.where(inside, image + at, outside)
        values = pixels.index_select(0, slot.view(-1)).view(rc, ph, pw, cols, c)
        for dx in range(cols):  # strictly greater: the first maximum in row-major order wins
            better = values[:, :, :, dx] > best
            best = torch.where(better, values[:, :, :, dx], best)
            best_at = torch.where(better, at[:, :, :, dx, None], best_at)
    return best, best_at


def roi_pool_backward(
    grad_output: Tensor,
    rois: Tensor,
    argmax: Tensor,
    grad_input: Tensor,
    pooled_height: int,
    pooled_width: int,
    spatial_scale: float,
) -> None:
    """Add each output's gradient to the pixel ``argmax`` names (none where it is -1)."""
    ph, pw = int(pooled_height), int(pooled_width)
    _check("roi_pool_backward", grad_input, rois, ph, pw)
    n, c, h, w = grad_input.shape
    expected = (rois.shape[0], c, ph, pw)
    if tuple(grad_output.shape) != expected or tuple(argmax.shape) != expected:
        raise ValueError(
            f"mmcv op `roi_pool_backward` takes grad_output and argmax of shape {expected}, "
            f"got {tuple(grad_output.shape)} and {tuple(argmax.shape)}."
        )
    if rois.shape[0] == 0:
        return
    at = argmax.long()
    if bool(((at < -1) | (at >= h * w)).any()):
        raise ValueError(
            f"mmcv op `roi_pool_backward`: argmax holds pixel indices outside the {h}x{w} maps; pass the argmax "
            "that roi_pool_forward wrote."
        )
    dtype = torch.float32 if grad_input.dtype in (torch.float16, torch.bfloat16) else grad_input.dtype
    live = at != -1
    plane = (rois[:, 0].long()[:, None] * c + torch.arange(c, device=rois.device)[None, :]) * (h * w)
    target = (plane[:, :, None, None] + at.clamp(min=0)).view(-1)
    values = torch.where(live, grad_output.to(dtype), torch.zeros((), dtype=dtype, device=grad_output.device))
    if grad_input.is_contiguous() and grad_input.dtype == dtype:
        grad_input.view(-1).scatter_add_(0, target, values.reshape(-1))
    else:
        flat = torch.zeros(n * c * h * w, dtype=dtype, device=grad_input.device)
        flat.scatter_add_(0, target, values.reshape(-1))
        grad_input.add_(flat.view(n, c, h, w).to(grad_input.dtype))
