"""``roi_align_rotated_forward`` / ``_backward``: RoIAlign over rotated RoIs (MMRotate's RoI extractor).

RoIs are (batch_index, x_ctr, y_ctr, w, h, angle), angle counter-clockwise in radians
(``clockwise`` flips it). The arithmetic is mmcv's CPU kernel's (detectron2's
ROIAlignRotated): centre shifted by 0.5 when ``aligned``, sizes at least 1 when not,
``ceil(size / pooled)`` samples per bin and side when ``sampling_ratio`` is 0, each sample
rotated about the centre and read bilinearly (nothing outside [-1, size], clamped at the
border), the samples of a bin averaged. The backward spreads each bin's gradient over the
same taps (and, as the kernel, divides by the sample count without flooring it at 1).

Vectorised over RoIs and bins: every tap (4 per sample) is a row index into the feature
map viewed channels-last, so reading or scattering a tap moves all channels at once.
RoIs and taps are processed in chunks, which bounds memory for any RoI size; taps that
do not exist (samples outside the map, or beyond a RoI's own grid) point at an extra
zero row.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_checks as check

_OP = "roi_align_rotated"
#: Taps (RoIs x bins x samples x 4) whose indices and weights are built at once.
TAP_CHUNK = 1 << 21
#: Partial sums (RoIs x bins x channels) accumulated at once: about 2 MB, to stay in cache.
VALUE_CHUNK = 1 << 19


def _taps(
    rois: Tensor,
    height: int,
    width: int,
    pooled: tuple[int, int],
    spatial_scale: float,
    sampling_ratio: int,
    aligned: bool,
    clockwise: bool,
    grid: tuple[int, int],
) -> tuple[Tensor, Tensor, Tensor]:
    """Row indices (R, bins, taps) into the (N*H*W + 1)-row table, their weights, and each RoI's sample count.

    ``grid`` is the largest sample grid (per bin) of these RoIs; smaller grids are padded
    with taps of weight 0 on the zero row."""
    pooled_h, pooled_w = pooled
    dtype = rois.dtype
    scale = torch.tensor(spatial_scale, dtype=dtype)
    offset = 0.5 if aligned else 0.0
    batch = rois[:, 0].long()
    centre_w = rois[:, 1] * scale - offset
    centre_h = rois[:, 2] * scale - offset
    roi_w = rois[:, 3] * scale
    roi_h = rois[:, 4] * scale
    theta = -rois[:, 5] if clockwise else rois[:, 5]
    cos, sin = torch.cos(theta), torch.sin(theta)
    if not aligned:  # "for backward-compatibility only", as the kernel says
        roi_w = roi_w.clamp(min=1.0)
        roi_h = roi_h.clamp(min=1.0)
    bin_h = roi_h / pooled_h
    bin_w = roi_w / pooled_w
    if sampling_ratio > 0:
        grid_h = torch.full_like(batch, sampling_ratio)
        grid_w = torch.full_like(batch, sampling_ratio)
    else:
        grid_h = torch.ceil(roi_h / pooled_h).long()
        grid_w = torch.ceil(roi_w / pooled_w).long()
    count = (grid_h * grid_w).to(dtype)
    start_h = (-roi_h.double() / 2.0).to(dtype)
    start_w = (-roi_w.double() / 2.0).to(dtype)

    gh, gw = grid
    device = rois.device
    ph = torch.arange(pooled_h, device=device, dtype=dtype).view(1, pooled_h, 1, 1, 1)
    pw = torch.arange(pooled_w, device=device, dtype=dtype).view(1, 1, pooled_w, 1, 1)
    iy = torch.arange(gh, device=device).view(1, 1, 1, gh, 1)
    ix = torch.arange(gw, device=device).view(1, 1, 1, 1, gw)

    def per_roi(v: Tensor) -> Tensor:
        return v.view(-1, 1, 1, 1, 1)

    fy = per_roi(grid_h).to(dtype)
    fx = per_roi(grid_w).to(dtype)
    yy = per_roi(start_h) + ph * per_roi(bin_h) + (iy.to(dtype) + 0.5) * per_roi(bin_h) / fy
    xx = per_roi(start_w) + pw * per_roi(bin_w) + (ix.to(dtype) + 0.5) * per_roi(bin_w) / fx
    y = yy * per_roi(cos) - xx * per_roi(sin) + per_roi(centre_h)
    x = yy * per_roi(sin) + xx * per_roi(cos) + per_roi(centre_w)
    exists = (iy < per_roi(grid_h)) & (ix < per_roi(grid_w))
    inside = exists & (y >= -1.0) & (y <= height) & (x >= -1.0) & (x <= width)
    y = y.clamp(min=0)
    x = x.clamp(min=0)
    y_low = y.long()
    x_low = x.long()
    y_top = y_low >= height - 1
    x_top = x_low >= width - 1
    y_low = torch.where(y_top, height - 1, y_low)
    x_low = torch.where(x_top, width - 1, x_low)
    y_high = torch.where(y_top, y_low, y_low + 1)
    x_high = torch.where(x_top, x_low, x_low + 1)
    y = torch.where(y_top, y_low.to(dtype), y)
    x = torch.where(x_top, x_low.to(dtype), x)
    ly = y - y_low.to(dtype)
    lx = x - x_low.to(dtype)
    hy = 1.0 - ly
    hx = 1.0 - lx
    weights = torch.stack((hy * hx, hy * lx, ly * hx, ly * lx), -1)
    base = per_roi(batch) * (height * width)
    rows = torch.stack(
        (
            base + y_low * width + x_low,
            base + y_low * width + x_high,
            base + y_high * width + x_low,
            base + y_high * width + x_high,
        ),
        -1,
    )
    dead = ~inside.unsqueeze(-1)
    weights = torch.where(dead, torch.zeros_like(weights), weights)
    bins = pooled_h * pooled_w
    n = rois.shape[0]
    return rows.view(n, bins, -1), weights.reshape(n, bins, -1), count


def _grid_sizes(
    rois: Tensor, pooled: tuple[int, int], spatial_scale: float, sampling_ratio: int, aligned: bool
) -> Tensor:
    """(R, 2) samples per bin along h and w, as the kernel computes them."""
    if sampling_ratio > 0:
        return torch.full((rois.shape[0], 2), sampling_ratio, dtype=torch.long, device=rois.device)
    scale = torch.tensor(spatial_scale, dtype=rois.dtype)
    sizes = torch.stack((rois[:, 4] * scale, rois[:, 3] * scale), 1)
    if not aligned:
        sizes = sizes.clamp(min=1.0)
    return torch.ceil(sizes / torch.tensor(pooled, dtype=rois.dtype, device=rois.device)).long()


def _check(
    op: str, features: Tensor, rois: Tensor, out: Tensor, pooled: tuple[int, int], aligned: bool, out_name: str
) -> None:
    check.boxes(op, "rois", rois, (6,), "(batch_index, x_ctr, y_ctr, w, h, angle)")
    if features.dim() != 4:
        raise check.OpArgumentError(
            f"mmcv op `{op}` (mmfix's PyTorch version): the feature map must be 4-D (N, C, H, W); "
            f"got shape {tuple(features.shape)}."
        )
    check.same_device(op, features=features, rois=rois, **{out_name: out})
    allowed = (torch.float32, torch.float64, torch.float16)
    for name, value in (("features", features), ("rois", rois), (out_name, out)):
        check.dtype(op, name, value, allowed, "mmcv's kernels take these")
    if pooled[0] <= 0 or pooled[1] <= 0:
        raise check.OpArgumentError(
            f"mmcv op `{op}` (mmfix's PyTorch version): pooled_height and pooled_width must be positive; got {pooled}."
        )
    if aligned and rois.numel() and bool(((rois[:, 3] < 0) | (rois[:, 4] < 0)).any()):
        raise check.OpArgumentError(
            f"mmcv op `{op}` (mmfix's PyTorch version): with aligned=True every RoI needs a non-negative "
            "width and height (columns 3 and 4), as mmcv's kernel asserts; some are negative."
        )
    batch = features.shape[0]
    if rois.numel() and bool(((rois[:, 0] < 0) | (rois[:, 0] >= batch)).any()):
        raise check.OpArgumentError(
            f"mmcv op `{op}` (mmfix's PyTorch version): column 0 of `rois` is the batch index of each RoI and "
            f"must lie in [0, {batch}) for this feature map of batch size {batch}; some do not."
        )


def _chunks(rois: Tensor, pooled: tuple[int, int], grids: Tensor) -> list[tuple[slice, tuple[int, int]]]:
    """RoI slices with their largest sample grid, each small enough for TAP_CHUNK taps."""
    out = []
    bins = pooled[0] * pooled[1]
    start = 0
    n = rois.shape[0]
    while start < n:
        # One RoI at least; as many as fit at the largest grid of the rest.
        gh, gw = (int(v) for v in grids[start:].amax(0))
        per_roi = max(1, bins * max(gh, 1) * max(gw, 1) * 4)
        stop = min(n, start + max(1, TAP_CHUNK // per_roi))
        part = slice(start, stop)
        gh, gw = (int(v) for v in grids[part].amax(0))
        out.append((part, (max(gh, 1), max(gw, 1))))
        start = stop
    return out


def _table(features: Tensor, dtype: torch.dtype) -> Tensor:
    """The feature map as (N*H*W + 1, C) rows, the last one zero."""
    n, c, h, w = features.shape
    table = features.new_zeros(n * h * w + 1, c, dtype=dtype)
    table[:-1] = features.permute(0, 2, 3, 1).reshape(n * h * w, c)
    return table


def _gather(table: Tensor, rows: Tensor, weights: Tensor) -> Tensor:
    """sum over taps t of weights[r, b, t] * table[rows[r, b, t]]: (R, bins, C).

    Tap by tap over a few RoIs at a time, so the partial sums stay in cache and the
    (taps x channels) values are never all in memory."""
    num_rois, bins, taps = rows.shape
    channels = table.shape[1]
    out = table.new_empty(num_rois, bins, channels)
    step = max(1, VALUE_CHUNK // max(1, bins * channels))
    buffer = table.new_empty(step * bins, channels)
    for start in range(0, num_rois, step):
        index = rows[start : start + step].reshape(-1, taps)
        weight = weights[start : start + step].reshape(-1, taps)
        n = index.shape[0]
        acc = out[start : start + step].view(n, channels)
        values = buffer[:n]
        torch.index_select(table, 0, index[:, 0], out=values)
        torch.mul(values, weight[:, :1], out=acc)
        for t in range(1, taps):
            torch.index_select(table, 0, index[:, t], out=values)
            acc.addcmul_(values, weight[:, t : t + 1])
    return out


def _scatter(table: Tensor, rows: Tensor, weights: Tensor, grads: Tensor) -> None:
    """table[rows[r, b, t]] += weights[r, b, t] * grads[r, b] for every tap, in place."""
    num_rois, bins, taps = rows.shape
    channels = table.shape[1]
    step = max(1, VALUE_CHUNK // max(1, bins * channels))
    for start in range(0, num_rois, step):
        index = rows[start : start + step].reshape(-1, taps)
        weight = weights[start : start + step].reshape(-1, taps)
        grad = grads[start : start + step].reshape(-1, channels)
        for t in range(taps):
            table.index_add_(0, index[:, t], grad * weight[:, t : t + 1])


def roi_align_rotated_forward(
    input: Tensor,
    rois: Tensor,
    output: Tensor,
    pooled_height: int,
    pooled_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    aligned: bool,
    clockwise: bool,
) -> None:
    op = "roi_align_rotated_forward"
    pooled = (int(pooled_height), int(pooled_width))
    _check(op, input, rois, output, pooled, aligned, "output")
    _, c, height, width = input.shape
    num_rois = rois.shape[0]
    check.numel(
        op, "output", output, num_rois * c * pooled[0] * pooled[1], "(num_rois, C, pooled_height, pooled_width)"
    )
    with torch.no_grad():
        dtype = torch.float32 if input.dtype == torch.float16 else input.dtype
        if num_rois == 0:
            return
        table = _table(input, dtype)
        boxes = rois.to(dtype)
        grids = _grid_sizes(boxes, pooled, spatial_scale, sampling_ratio, aligned)
        result = torch.empty(num_rois, pooled[0] * pooled[1], c, dtype=dtype, device=input.device)
        zero_row = table.shape[0] - 1
        for part, grid in _chunks(boxes, pooled, grids):
            rows, weights, count = _taps(
                boxes[part], height, width, pooled, spatial_scale, sampling_ratio, aligned, clockwise, grid
            )
            rows = torch.where(weights == 0, zero_row, rows)
            result[part] = _gather(table, rows, weights) / count.clamp(min=1).view(-1, 1, 1)
        output.copy_(result.permute(0, 2, 1).reshape(output.shape).to(output.dtype))


def roi_align_rotated_backward(
    rois: Tensor,
    grad_input: Tensor,
    grad_output: Tensor,
    pooled_height: int,
    pooled_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    aligned: bool,
    clockwise: bool,
) -> None:
    # mmcv's Python binding names the arguments (rois, grad_input, grad_output), but the C++
    # function takes (grad_output, rois, grad_input), and mmcv calls it by position: the
    # first argument is the gradient of the output, the third the gradient of the input.
    top_grad, boxes_in, bottom_grad = rois, grad_input, grad_output
    op = "roi_align_rotated_backward"
    pooled = (int(pooled_height), int(pooled_width))
    _check(op, bottom_grad, boxes_in, top_grad, pooled, aligned, "grad_output")
    n, c, height, width = bottom_grad.shape
    num_rois = boxes_in.shape[0]
    if tuple(top_grad.shape) != (num_rois, c, *pooled):
        check.numel(
            op, "grad_output", top_grad, num_rois * c * pooled[0] * pooled[1], "(num_rois, C, pooled_h, pooled_w)"
        )
    with torch.no_grad():
        dtype = torch.float32 if bottom_grad.dtype == torch.float16 else bottom_grad.dtype
        if num_rois == 0:
            return
        boxes = boxes_in.to(dtype)
        grads = top_grad.to(dtype).reshape(num_rois, c, pooled[0] * pooled[1]).permute(0, 2, 1)
        grids = _grid_sizes(boxes, pooled, spatial_scale, sampling_ratio, aligned)
        table = bottom_grad.new_zeros(n * height * width + 1, c, dtype=dtype)
        zero_row = table.shape[0] - 1
        for part, grid in _chunks(boxes, pooled, grids):
            rows, weights, count = _taps(
                boxes[part], height, width, pooled, spatial_scale, sampling_ratio, aligned, clockwise, grid
            )
            rows = torch.where(weights == 0, zero_row, rows)
            # The kernel divides by the sample count itself (0 for an empty RoI, whose
            # grid then has no samples at all).
            scaled = grads[part] / count.view(-1, 1, 1)
            _scatter(table, rows, weights, scaled)
        added = table[:-1].view(n, height, width, c).permute(0, 3, 1, 2)
        bottom_grad += added.to(bottom_grad.dtype)
