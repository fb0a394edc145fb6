"""Deformable RoI pooling: ``deform_roi_pool_forward`` / ``_backward`` (DeformRoIPool, its Packs).

As mmcv's CUDA kernel (``csrc/common/cuda/deform_roi_pool_cuda_kernel.cuh``; compiled mmcv
has no CPU kernel): RoI Align with ``aligned=True`` (-0.5 pixel shift), an adaptive
``ceil(roi_size / pooled_size)`` sampling grid when ``sampling_ratio`` is 0, and each bin's
start moved by ``gamma * roi_size * offset`` when an offset is given (an empty ``offset``
means none: plain DeformRoIPool). A bin averages its samples; a sample outside
``[-1, H] x [-1, W]`` counts as 0, others are clamped into the image and bilinearly
interpolated. The forward overwrites ``output``; the backward ADDS into ``grad_input`` and
``grad_offset`` (the kernel uses atomicAdd). The offset gradient uses, as the kernel does,
the sample's unclamped coordinates with the clamped corner indices.

All bins' samples are one ragged weighted gather (``_weighted_rows``) over a channels-last
copy of the input; RoIs are processed in chunks of at most ``SAMPLE_BUDGET`` samples (a
large RoI with ``sampling_ratio=0`` has many).
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

import torch

from . import _deform_checks as check
from ._deform_im2col import compute_dtype
from ._weighted_rows import weighted_rows_backward, weighted_rows_ragged

#: Most bilinear samples (each 4 corner rows) gathered at once.
SAMPLE_BUDGET = 1 << 20


def _as_float32(value: float) -> float:
    """The kernels take spatial_scale and gamma as C++ floats."""
    return float(torch.tensor(value, dtype=torch.float32))


class _Plan(NamedTuple):
    rows: torch.Tensor  # (samples * 4,) corner rows of the channels-last table (the zero row when outside)
    weight: torch.Tensor  # (samples * 4,) bilinear weights
    starts: torch.Tensor  # (bins,) first entry of each bin (bag)
    divisor: torch.Tensor  # (bins,) the samples a bin averages over (the kernel's count)
    bag: torch.Tensor  # (samples,) the bin of each sample
    d_x: torch.Tensor | None  # (samples * 4,) per-corner factors of the x-offset gradient (0 outside)
    d_y: torch.Tensor | None  # (samples * 4,) per-corner factors of the y-offset gradient
    roi_width: torch.Tensor  # (bins,)
    roi_height: torch.Tensor  # (bins,)


class _Geometry(NamedTuple):
    pooled_height: int
    pooled_width: int
    spatial_scale: float
    sampling_ratio: int
    gamma: float


def _roi_frames(rois: torch.Tensor, geo: _Geometry, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Per RoI: start_w, start_h, width, height and the sampling grid (grid_h, grid_w), as the kernel rounds them."""
    r = rois.to(dtype)
    scale = torch.tensor(geo.spatial_scale, dtype=dtype, device=rois.device)
    start_w = r[:, 1] * scale - 0.5
    start_h = r[:, 2] * scale - 0.5
    width = (r[:, 3] * scale - 0.5) - start_w
    height = (r[:, 4] * scale - 0.5) - start_h
    if geo.sampling_ratio > 0:
        grid_h = torch.full_like(start_w, geo.sampling_ratio, dtype=torch.long)
        grid_w = grid_h
    else:  # ceilf(roi_size / pooled_size), in float as the kernel's ceilf
        grid_h = torch.ceil((height / geo.pooled_height).float()).long()
        grid_w = torch.ceil((width / geo.pooled_width).float()).long()
    return start_w, start_h, width, height, grid_h, grid_w


def _chunks(samples_per_roi: torch.Tensor) -> Iterator[slice]:
    """Consecutive RoIs whose samples stay under the budget (at least one RoI each)."""
    totals = torch.cumsum(samples_per_roi, 0).tolist()
    start, done = 0, 0
    for i, total in enumerate(totals):
        if total - done > SAMPLE_BUDGET and i > start:
            yield slice(start, i)
            start, done = i, totals[i - 1]
    if start < len(totals):
        yield slice(start, len(totals))


def _plan(
    rois: torch.Tensor,
    offset: torch.Tensor | None,
    frames: tuple[torch.Tensor, ...],
    geo: _Geometry,
    height: int,
    width: int,
    batch: int,
    offset_grads: bool = False,
) -> _Plan:
    """The samples of a chunk of RoIs, bin by bin, and their corners."""
    start_w, start_h, roi_w, roi_h, grid_h, grid_w = frames
    device, dtype = start_w.device, start_w.dtype
    n, ph, pw = rois.shape[0], geo.pooled_height, geo.pooled_width
    bins_per_roi = ph * pw
    # Bins (roi, i, j): their start, moved by the offset.
    bin_h = roi_h / ph
    bin_w = roi_w / pw
    i = torch.arange(ph, device=device).view(1, ph, 1)
    j = torch.arange(pw, device=device).view(1, 1, pw)
    bin_start_h = start_h.view(n, 1, 1).expand(n, ph, pw)
    bin_start_w = start_w.view(n, 1, 1).expand(n, ph, pw)
    if offset is not None:
        gamma = torch.tensor(geo.gamma, dtype=dtype, device=device)
        bin_start_w = bin_start_w + (gamma * roi_w).view(n, 1, 1) * offset[:, 0].to(dtype)
        bin_start_h = bin_start_h + (gamma * roi_h).view(n, 1, 1) * offset[:, 1].to(dtype)
    bin_start_h = (bin_start_h + i.to(dtype) * bin_h.view(n, 1, 1)).reshape(-1)
    bin_start_w = (bin_start_w + j.to(dtype) * bin_w.view(n, 1, 1)).reshape(-1)
    # Samples of each bin: grid_h x grid_w of its RoI (none when either is < 1).
    valid = (grid_h > 0) & (grid_w > 0)
    per_bin = torch.where(valid, grid_h * grid_w, 0).repeat_interleave(bins_per_roi)
    count = torch.clamp(grid_h * grid_w, min=1).to(dtype).repeat_interleave(bins_per_roi)
    bag = torch.repeat_interleave(torch.arange(n * bins_per_roi, device=device), per_bin)
    first = torch.cumsum(per_bin, 0) - per_bin
    k = torch.arange(bag.shape[0], device=device) - first[bag]
    roi = bag // bins_per_roi
    gw = grid_w[roi]
    iy = (k // gw).to(dtype)
    ix = (k % gw).to(dtype)
    gh_f = grid_h[roi].to(dtype)
    gw_f = gw.to(dtype)
    y = bin_start_h[bag] + (iy + 0.5) * bin_h[roi] / gh_f
    x = bin_start_w[bag] + (ix + 0.5) * bin_w[roi] / gw_f
    # bilinear_interpolate(_gradient): clamp into the image; outside [-1, H] x [-1, W] is empty.
    inside = (y >= -1) & (y <= height) & (x >= -1) & (x <= width)
    yc = torch.where(inside, y, 0).clamp(min=0)
    xc = torch.where(inside, x, 0).clamp(min=0)
    y_low = yc.long()
    x_low = xc.long()
    y_edge = y_low >= height - 1
    x_edge = x_low >= width - 1
    y_low = torch.where(y_edge, height - 1, y_low)
    x_low = torch.where(x_edge, width - 1, x_low)
    y_high = torch.where(y_edge, y_low, y_low + 1)
    x_high = torch.where(x_edge, x_low, x_low + 1)
    yc = torch.where(y_edge, y_low.to(dtype), yc)
    xc = torch.where(x_edge, x_low.to(dtype), xc)
    ly = yc - y_low
    lx = xc - x_low
    hy = 1 - ly
    hx = 1 - lx
    zero = torch.zeros((), dtype=dtype, device=device)
    corner_inside = inside.unsqueeze(-1)
    weight = torch.where(corner_inside, torch.stack((hy * hx, hy * lx, ly * hx, ly * lx), -1), zero)
    image = rois[:, 0].long()[roi] * (height * width)
    rows = torch.stack(
        (y_low * width + x_low, y_low * width + x_high, y_high * width + x_low, y_high * width + x_high), -1
    )
    rows = torch.where(corner_inside, rows + image.unsqueeze(-1), batch * height * width)  # the zero row
    bin_roi_w = roi_w.repeat_interleave(bins_per_roi)
    bin_roi_h = roi_h.repeat_interleave(bins_per_roi)
    if not offset_grads:
        return _Plan(rows.view(-1), weight.view(-1), 4 * first, count, bag, None, None, bin_roi_w, bin_roi_h)
    # The kernel's offset gradient, per corner (00, 10, 01, 11 = low/high y, low/high x), with the
    # unclamped sample coordinates y, x and the clamped corner indices.
    y_low_f, y_high_f, x_low_f, x_high_f = (t.to(dtype) for t in (y_low, y_high, x_low, x_high))
    d_x = torch.stack((y - y_high_f, y_high_f - y, y_low_f - y, y - y_low_f), -1)
    d_y = torch.stack((x - x_high_f, x_low_f - x, x_high_f - x, x - x_low_f), -1)
    d_x = torch.where(corner_inside, d_x, zero)
    d_y = torch.where(corner_inside, d_y, zero)
    return _Plan(
        rows.view(-1), weight.view(-1), 4 * first, count, bag, d_x.view(-1), d_y.view(-1), bin_roi_w, bin_roi_h
    )


def _table(input: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Channels-last rows (image, y, x), and a zero row last (for samples outside the image)."""
    batch, channels, height, width = input.shape
    table = input.new_empty(batch * height * width + 1, channels, dtype=dtype)
    table[:-1].view(batch, height, width, channels).copy_(input.permute(0, 2, 3, 1))
    table[-1] = 0
    return table


_OFFSET = "(num_rois, 2, pooled_height, pooled_width): dx then dy per bin"


def _check(
    op: str,
    input: torch.Tensor,
    rois: torch.Tensor,
    offset: torch.Tensor,
    pooled_height: int,
    pooled_width: int,
) -> torch.Tensor | None:
    check.dims(op, "input", input, 4, "(batch, channels, height, width)")
    check.positive(op, pooled_height=pooled_height, pooled_width=pooled_width)
    if rois.dim() != 2 or rois.shape[1] != 5:
        raise check.fail(
            op, f"`rois` has shape {tuple(rois.shape)}", "Pass (num_rois, 5): (batch_index, x1, y1, x2, y2)"
        )
    if rois.shape[0]:
        index = rois[:, 0].long()
        if bool((index < 0).any()) or bool((index >= input.shape[0]).any()):
            raise check.fail(
                op,
                f"a RoI's batch index is outside 0..{input.shape[0] - 1}",
                "The first column of `rois` is the image's index in the batch",
            )
    if offset.numel() == 0:
        return None
    # The kernel indexes offset.data_ptr() as (num_rois, 2, pooled_height, pooled_width): so does this.
    return check.flat(op, "offset", offset, (rois.shape[0], 2, pooled_height, pooled_width), _OFFSET)


def deform_roi_pool_forward(
    input: torch.Tensor,
    rois: torch.Tensor,
    offset: torch.Tensor,
    output: torch.Tensor,
    pooled_height: int,
    pooled_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    gamma: float,
) -> None:
    op = "deform_roi_pool_forward"
    check.same_kind(op, input=input, rois=rois, offset=offset, output=output)
    offset_or_none = _check(op, input, rois, offset, pooled_height, pooled_width)
    batch, channels, height, width = input.shape
    n = rois.shape[0]
    target = check.view(op, "output", output, (n, channels, pooled_height, pooled_width))
    if n == 0:
        return
    dtype = compute_dtype(input.dtype)
    geo = _Geometry(pooled_height, pooled_width, _as_float32(spatial_scale), sampling_ratio, _as_float32(gamma))
    frames = _roi_frames(rois, geo, dtype)
    table = _table(input, dtype)
    for part in _chunks(_samples_per_roi(frames, geo)):
        chunk_offset = None if offset_or_none is None else offset_or_none[part]
        plan = _plan(rois[part], chunk_offset, tuple(f[part] for f in frames), geo, height, width, batch)
        sums = weighted_rows_ragged(table, plan.rows, plan.weight, plan.starts).div_(plan.divisor.unsqueeze(1))
        target[part].copy_(sums.view(-1, pooled_height, pooled_width, channels).permute(0, 3, 1, 2))


def _samples_per_roi(frames: tuple[torch.Tensor, ...], geo: _Geometry) -> torch.Tensor:
    grid_h, grid_w = frames[4], frames[5]
    per_bin = torch.where((grid_h > 0) & (grid_w > 0), grid_h * grid_w, 0)
    return per_bin * (geo.pooled_height * geo.pooled_width)


def deform_roi_pool_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    rois: torch.Tensor,
    offset: torch.Tensor,
    grad_input: torch.Tensor,
    grad_offset: torch.Tensor,
    pooled_height: int,
    pooled_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    gamma: float,
) -> None:
    op = "deform_roi_pool_backward"
    check.same_kind(op, grad_output=grad_output, input=input, rois=rois, offset=offset, grad_input=grad_input)
    offset_or_none = _check(op, input, rois, offset, pooled_height, pooled_width)
    batch, channels, height, width = input.shape
    n = rois.shape[0]
    check.shape(op, "grad_output", grad_output, (n, channels, pooled_height, pooled_width), "that of the output")
    input_target = check.view(op, "grad_input", grad_input, input.shape)
    offset_target = None
    if offset_or_none is not None:
        check.same_kind(op, grad_output=grad_output, grad_offset=grad_offset)
        offset_target = check.flat(op, "grad_offset", grad_offset, offset_or_none.shape, _OFFSET)
    if n == 0:
        return
    dtype = compute_dtype(input.dtype)
    geo = _Geometry(pooled_height, pooled_width, _as_float32(spatial_scale), sampling_ratio, _as_float32(gamma))
    frames = _roi_frames(rois, geo, dtype)
    table = _table(input, dtype)
    d_table: torch.Tensor | None = None
    gamma_t = torch.tensor(geo.gamma, dtype=dtype, device=input.device)
    for part in _chunks(_samples_per_roi(frames, geo)):
        chunk_offset = None if offset_or_none is None else offset_or_none[part]
        plan = _plan(
            rois[part],
            chunk_offset,
            tuple(f[part] for f in frames),
            geo,
            height,
            width,
            batch,
            offset_target is not None,
        )
        # The kernel's grad_output[...] / count per bin (count without the forward's max(., 1): a bin
        # without samples gets nothing either way).
        grads = grad_output[part].to(dtype).permute(0, 2, 3, 1).reshape(-1, channels) / plan.divisor.unsqueeze(1)
        chunk_table, dots, _ = weighted_rows_backward(
            table, plan.rows, plan.weight, grads, plan.starts, need_weight=offset_target is not None
        )
        assert chunk_table is not None
        if d_table is None:
            d_table = chunk_table
        else:
            d_table += chunk_table
        del chunk_table
        if offset_target is not None:
            assert dots is not None and plan.d_x is not None and plan.d_y is not None
            per_bin_x = torch.zeros_like(plan.divisor).index_add_(0, plan.bag, (plan.d_x * dots).view(-1, 4).sum(-1))
            per_bin_y = torch.zeros_like(plan.divisor).index_add_(0, plan.bag, (plan.d_y * dots).view(-1, 4).sum(-1))
            d_offset = torch.stack((gamma_t * plan.roi_width * per_bin_x, gamma_t * plan.roi_height * per_bin_y), 0)
            offset_target[part] += d_offset.view(2, -1, pooled_height, pooled_width).transpose(0, 1)
    assert d_table is not None
    input_target += d_table[:-1].view(batch, height, width, channels).permute(0, 3, 1, 2)
