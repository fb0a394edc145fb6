"""mmcv's ``roi_align_forward`` / ``roi_align_backward`` (ops/csrc/pytorch/cpu/roi_align.cpp, the CUDA kernel).

Each output bin (ph, pw) of a RoI averages (pool_mode 1) or maxes (pool_mode 0) a grid of
bilinear samples. The sample positions are computed with the kernel's float operations in
its order (``_Geometry``): ``start = roi * scale - (0.5 if aligned)``, the legacy 1-pixel
minimum size when not aligned, ``bin = size / pooled``, ``grid = sampling_ratio`` or
``ceil(bin)``, ``y = (start + ph * bin) + ((iy + .5) * bin) / grid``, samples outside
``[-1, size]`` count as zero, the rest are clamped into the map.

**Average pooling** is separable: a sample's weight on pixel (row, col) is the row weight
(1 - ly or ly) times the column weight, and "outside" is "row outside or column outside".
So a bin's value is ``Wy[ph] · window · Wx[pw]ᵀ`` where Wy sums the row weights of the
bin's samples (and Wx the column weights): two small matrix products per RoI over the
window of the map the RoI samples from, instead of 4 × samples gathers per output value.
RoIs are sorted by window size and processed in chunks of similar windows (bounded
memory). The backward pass is the transpose: ``Wyᵀ · grad · Wx`` added back into each
window. The sums run in another order than the kernel's loops: values agree to float
rounding, not bit for bit.

**Max pooling** keeps the kernel's per-sample arithmetic exactly (argmax positions are
outputs): each sample's value is ``((w1*v1 + w2*v2) + w3*v3) + w4*v4`` and the first
strictly greater sample wins, from the kernel's starting value (-10000 on the CPU,
-FLT_MAX in CUDA).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from . import _deform_checks as check
from . import _maps, _torchvision

#: Most window elements (RoIs × channels × window rows × columns) gathered at once.
WINDOW_BUDGET = 1 << 21
#: Copy the maps channel-last when the windows hold at least 1/this of the maps' values.
CHANNELS_LAST_GAIN = 8
#: RoIs whose windows differ by less than this factor per axis share a padded window size.
WINDOW_STEP = 1.25
#: Neighbouring window sizes share a chunk while the padded windows hold at most this many
#: times the values of the windows themselves.
WINDOW_WASTE = 1.5
#: Most sample rows (per RoI and bin) computed at once when building the weights.
SAMPLE_CHUNK = 64
#: Most output values evaluated at once in max pooling (RoIs × channels × bins).
MAX_POOL_BUDGET = 1 << 18


#: For `mmfix doctor`: on the CPU this family is mmfix's own code (faster there than torchvision's
#: kernel); only CUDA tensors go to torchvision's roi_align (``_torchvision.FAST_PATHS``).
TORCHVISION_FAST_PATH = False


class _Kernel(NamedTuple):
    max_start: float  # what max pooling starts from (an empty grid outputs it)
    checks_negative_size: bool  # AT_ASSERTM in the CPU kernel for aligned RoIs of negative size


#: Each device's compiled kernel (other devices compute as CUDA does).
KERNELS = {
    "cpu": _Kernel(max_start=-10000.0, checks_negative_size=True),
    "cuda": _Kernel(max_start=-3.4028234663852886e38, checks_negative_size=False),
}


def _kernel(device: torch.device) -> _Kernel:
    return KERNELS.get(device.type, KERNELS["cuda"])


# --- the sampling geometry ------------------------------------------------------------------


class _Geometry(NamedTuple):
    """Per RoI: batch index, start, bin size and sample grid along each axis, the sample count."""

    batch: Tensor  # (R,) long
    start_h: Tensor  # (R,) in the compute dtype
    start_w: Tensor
    bin_h: Tensor
    bin_w: Tensor
    grid_h: Tensor  # (R,) long; <= 0 means no samples
    grid_w: Tensor
    divisor: Tensor  # (R,) max(grid_h * grid_w, 1) in the compute dtype


def _geometry(
    rois: Tensor,
    dtype: torch.dtype,
    pooled_height: int,
    pooled_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    aligned: bool,
    kernel: _Kernel,
    op: str,
) -> _Geometry:
    r = rois.to(dtype)
    scale = torch.tensor(spatial_scale, dtype=dtype, device=rois.device)  # static_cast<T>(spatial_scale)
    offset = 0.5 if aligned else 0.0
    start_w = r[:, 1] * scale - offset
    start_h = r[:, 2] * scale - offset
    end_w = r[:, 3] * scale - offset
    end_h = r[:, 4] * scale - offset
    width = end_w - start_w
    height = end_h - start_h
    if aligned:
        if kernel.checks_negative_size and bool(((width < 0) | (height < 0)).any()):
            raise ValueError(
                f"mmcv op `{op}` with aligned=True got RoIs of negative size (x2 < x1 or y2 < y1 after scaling), "
                "which mmcv's CPU kernel refuses ('ROIs in ROIAlign cannot have non-negative size!'). "
                "Pass boxes as (batch_index, x1, y1, x2, y2) with x2 >= x1 and y2 >= y1."
            )
    else:  # the legacy behaviour: at least one pixel
        width = width.clamp(min=1.0)
        height = height.clamp(min=1.0)
    bin_h = height / pooled_height
    bin_w = width / pooled_width
    if sampling_ratio > 0:
        grid_h = torch.full_like(bin_h, sampling_ratio, dtype=torch.long)
        grid_w = torch.full_like(bin_w, sampling_ratio, dtype=torch.long)
    else:  # ceilf(roi_height / pooled_height), the same division as the bin size
        grid_h = torch.ceil(bin_h).long()
        grid_w = torch.ceil(bin_w).long()
    divisor = (grid_h * grid_w).clamp(min=1).to(dtype)
    return _Geometry(r[:, 0].long(), start_h, start_w, bin_h, bin_w, grid_h, grid_w, divisor)


class _Samples(NamedTuple):
    """Along one axis, for sample positions t (any shape): whether inside, the two pixels, their weights."""

    inside: Tensor
    low: Tensor
    high: Tensor
    w_low: Tensor
    w_high: Tensor


def _sample_positions(start: Tensor, bin_size: Tensor, grid: Tensor, bins: int, taps: Tensor) -> Tensor:
    """The kernel's ``start + p * bin + (i + .5) * bin / grid`` for bins p and sample indices ``taps``.

    start, bin_size, grid: (R,); taps: (T,) float sample indices i. Returns (R, bins, T)."""
    p = torch.arange(bins, device=start.device, dtype=start.dtype)
    base = start[:, None] + p[None, :] * bin_size[:, None]  # (R, bins)
    within = ((taps[None, :] + 0.5) * bin_size[:, None]) / grid.to(start.dtype)[:, None]  # (R, T)
    return base[:, :, None] + within[:, None, :]


def _bilinear_axis(t: Tensor, size: int) -> _Samples:
    """bilinear_interpolate along one axis: outside [-1, size] is empty, else clamp into the map."""
    inside = (t >= -1.0) & (t <= size)
    t = t.clamp(min=0)
    low = t.long()
    last = low >= size - 1
    low = torch.where(last, size - 1, low)
    high = torch.where(last, size - 1, low + 1)
    t = torch.where(last, low.to(t.dtype), t)
    w_high = t - low.to(t.dtype)
    w_low = 1.0 - w_high
    return _Samples(inside, low, high, w_low, w_high)


# --- checks -----------------------------------------------------------------------------------


_POOLED = "(num_rois, channels, aligned_height, aligned_width)"


def _rois_written(op: str, output: Tensor, channels: int, ph: int, pw: int, num_rois: int) -> int:
    """How many RoIs the kernel pools: output.numel() / (channels * ph * pw), at most ``num_rois``."""
    per_roi = channels * ph * pw
    if per_roi <= 0:
        return num_rois
    count = output.numel() // per_roi
    if count > num_rois:
        raise ValueError(
            f"mmcv op `{op}`: `output` has {output.numel()} elements, room for {count} RoIs of {channels} x {ph} x "
            f"{pw}, but `rois` holds {num_rois}: the kernel would read RoIs past its end. Pass an output of shape "
            f"({num_rois}, {channels}, {ph}, {pw})."
        )
    return count


def _check(op: str, features: Tensor, rois: Tensor, pooled_height: int, pooled_width: int, pool_mode: int) -> None:
    _maps.check_rois(op, features, rois, pooled_height, pooled_width)
    if pool_mode not in (0, 1):
        raise ValueError(f"mmcv op `{op}`: pool_mode must be 0 (max) or 1 (avg), got {pool_mode!r}.")


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    # Half is computed in float32 and rounded once at the end (mmcv's kernel rounds every step).
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


# --- forward ----------------------------------------------------------------------------------


def roi_align_forward(
    input: Tensor,
    rois: Tensor,
    output: Tensor,
    argmax_y: Tensor,
    argmax_x: Tensor,
    aligned_height: int,
    aligned_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    pool_mode: int,
    aligned: bool,
) -> None:
    """Pool each RoI into ``output`` (K, C, aligned_height, aligned_width); max pooling also
    writes the winning sample's (y, x) into ``argmax_y`` / ``argmax_x`` (-1 where none)."""
    ph, pw, mode = int(aligned_height), int(aligned_width), int(pool_mode)
    op = "roi_align_forward"
    if input.dim() == 4 and rois.dim() == 2:
        # The kernel pools output.numel() / (C * ph * pw) RoIs from the start of `rois` and writes
        # output (and argmax_y / argmax_x) through their data pointers, row-major, whatever their
        # shapes: so does this. Only more RoIs than `rois` holds (a read past it) is refused.
        count = _rois_written(op, output, input.shape[1], ph, pw, rois.shape[0])
        rois = rois[:count]
    _check(op, input, rois, ph, pw, mode)
    shape = (rois.shape[0], input.shape[1], ph, pw)
    output = check.flat(op, "output", output, shape, _POOLED)
    if mode == 0:
        argmax_y = check.flat(op, "argmax_y", argmax_y, shape, _POOLED + " (max pooling)")
        argmax_x = check.flat(op, "argmax_x", argmax_x, shape, _POOLED + " (max pooling)")
    if rois.shape[0] == 0:
        return
    kernel = _kernel(input.device)
    dtype = _compute_dtype(input.dtype)
    geometry = _geometry(
        rois, dtype, ph, pw, float(spatial_scale), int(sampling_ratio), bool(aligned), kernel, "roi_align_forward"
    )
    if mode == 1:
        fast = _torchvision_forward(input, rois, ph, pw, float(spatial_scale), int(sampling_ratio), bool(aligned))
        if fast is not None:
            output.copy_(fast)
            return
        _average_forward(input, geometry, output, ph, pw)
    else:
        _max_forward(input, geometry, output, argmax_y, argmax_x, ph, pw, kernel)


def _torchvision_forward(
    input: Tensor, rois: Tensor, ph: int, pw: int, scale: float, sampling_ratio: int, aligned: bool
) -> Tensor | None:
    """torchvision's kernel computes mmcv's average pooling (same sample grid, same operations)."""
    if not _torchvision.use_for("roi_align", input.device):
        return None
    return torch.ops.torchvision.roi_align(input, rois, scale, ph, pw, sampling_ratio, aligned)


# --- average pooling: separable weights over windows -----------------------------------------


class _Windows(NamedTuple):
    """For a chunk of RoIs: the window origins and the row / column weights into the window."""

    rois: Tensor  # (Rc,) RoI indices
    y0: Tensor  # (Rc,) first row of each window
    x0: Tensor
    rows: int  # window height (the chunk's largest)
    cols: int
    weight_y: Tensor  # (Rc, PH, rows), divided by the sample count
    weight_x: Tensor  # (Rc, PW, cols)


def _extent(start: Tensor, bin_size: Tensor, grid: Tensor, bins: int, size: int) -> tuple[Tensor, Tensor]:
    """First and last map row a RoI's samples can touch (a superset: one row of margin)."""
    g = grid.clamp(min=1)
    ends = torch.stack(
        [
            _sample_positions(start, bin_size, g, 1, torch.zeros(1, device=start.device, dtype=start.dtype))[:, 0, 0],
            _last_sample(start, bin_size, g, bins),
        ]
    )
    lo = torch.floor(ends.min(0).values).clamp(min=0, max=size - 1).long()
    hi = (torch.floor(ends.max(0).values) + 1).clamp(min=0, max=size - 1).long()
    lo = (lo - 1).clamp(min=0)
    hi = (hi + 1).clamp(max=size - 1)
    return lo, hi


def _last_sample(start: Tensor, bin_size: Tensor, grid: Tensor, bins: int) -> Tensor:
    p = float(bins - 1)
    base = start + p * bin_size
    within = ((grid.to(start.dtype) - 1 + 0.5) * bin_size) / grid.to(start.dtype)
    return base + within


def _windows(geometry: _Geometry, height: int, width: int, ph: int, pw: int, channels: int) -> list[_Windows]:
    """Chunks of RoIs with similar windows, each within WINDOW_BUDGET, with their weights.

    RoIs are grouped by window size (classes a factor WINDOW_STEP apart per axis); classes next
    to each other share a chunk (padded to its largest window) while the padding stays below
    WINDOW_WASTE, so few RoIs cost few chunks and many RoIs little padding."""
    y_lo, y_hi = _extent(geometry.start_h, geometry.bin_h, geometry.grid_h, ph, height)
    x_lo, x_hi = _extent(geometry.start_w, geometry.bin_w, geometry.grid_w, pw, width)
    empty = (geometry.grid_h <= 0) | (geometry.grid_w <= 0)
    rows = torch.where(empty, 1, y_hi - y_lo + 1)
    cols = torch.where(empty, 1, x_hi - x_lo + 1)
    key = _size_class(rows) * 4096 + _size_class(cols)
    classes, members = torch.unique(key, return_inverse=True)
    order = torch.argsort(members, stable=True)
    sizes = torch.bincount(members, minlength=classes.numel())
    most_rows = torch.zeros_like(sizes).scatter_reduce_(0, members, rows, reduce="amax")
    most_cols = torch.zeros_like(sizes).scatter_reduce_(0, members, cols, reduce="amax")
    areas = torch.zeros_like(sizes).scatter_add_(0, members, rows * cols)
    groups: list[tuple[int, int, int, int]] = []  # (first member, count, rows, cols)
    begin = count = span_y = span_x = area = 0
    for size, class_rows, class_cols, class_area in zip(
        sizes.tolist(), most_rows.tolist(), most_cols.tolist(), areas.tolist()
    ):
        wider_y, wider_x = max(span_y, class_rows), max(span_x, class_cols)
        padded = (count + size) * wider_y * wider_x
        if count and (padded * channels > WINDOW_BUDGET or padded > WINDOW_WASTE * (area + class_area)):
            groups.append((begin, count, span_y, span_x))
            begin, count, span_y, span_x, area = begin + count, 0, class_rows, class_cols, 0
        else:
            span_y, span_x = wider_y, wider_x
        count += size
        area += class_area
    groups.append((begin, count, span_y, span_x))
    chunks: list[_Windows] = []
    for begin, count, span_y, span_x in groups:
        step = max(1, WINDOW_BUDGET // (channels * span_y * span_x))
        for first in range(begin, begin + count, step):
            index = order[first : min(first + step, begin + count)]
            y0 = y_lo[index].clamp(max=height - span_y)
            x0 = x_lo[index].clamp(max=width - span_x)
            weight_y = _axis_weights(
                geometry.start_h[index], geometry.bin_h[index], geometry.grid_h[index], ph, height, y0, span_y
            )
            weight_x = _axis_weights(
                geometry.start_w[index], geometry.bin_w[index], geometry.grid_w[index], pw, width, x0, span_x
            )
            weight_y /= geometry.divisor[index][:, None, None]
            chunks.append(_Windows(index, y0, x0, span_y, span_x, weight_y, weight_x))
    return chunks


def _size_class(span: Tensor) -> Tensor:
    """Window sizes within a factor WINDOW_STEP of each other share a class."""
    return torch.ceil(torch.log(span.to(torch.float32)) / math.log(WINDOW_STEP)).long()


def _axis_weights(
    start: Tensor, bin_size: Tensor, grid: Tensor, bins: int, size: int, origin: Tensor, span: int
) -> Tensor:
    """(Rc, bins, span): each bin's summed sample weights on the window's rows (or columns).

    A sample outside [-1, size] along this axis adds nothing: the kernel's sample is zero
    when either coordinate is outside, and the weights multiply."""
    rc = start.shape[0]
    weights = torch.zeros(rc, bins, span, dtype=start.dtype, device=start.device)
    most = int(grid.max()) if rc else 0
    flat = weights.view(rc * bins, span)
    row_base = (torch.arange(rc * bins, device=start.device) * span).view(rc, bins, 1)
    for first in range(0, max(most, 0), SAMPLE_CHUNK):
        taps = torch.arange(first, min(first + SAMPLE_CHUNK, most), device=start.device, dtype=start.dtype)
        t = _sample_positions(start, bin_size, grid.clamp(min=1), bins, taps)  # (Rc, bins, T)
        s = _bilinear_axis(t, size)
        used = s.inside & (taps[None, None, :] < grid.to(start.dtype)[:, None, None])
        low = (s.low - origin[:, None, None]).clamp(0, span - 1)
        high = (s.high - origin[:, None, None]).clamp(0, span - 1)
        zero = torch.zeros((), dtype=start.dtype, device=start.device)
        flat.view(-1).index_add_(0, (row_base + low).view(-1), torch.where(used, s.w_low, zero).view(-1))
        flat.view(-1).index_add_(0, (row_base + high).view(-1), torch.where(used, s.w_high, zero).view(-1))
    return weights


def _window_volume(chunks: list[_Windows], channels: int) -> int:
    return sum(chunk.rois.numel() * chunk.rows * chunk.cols for chunk in chunks) * channels


def _gather_windows_last(features: Tensor, batch: Tensor, y0: Tensor, x0: Tensor, rows: int, cols: int) -> Tensor:
    """(Rc, rows, cols * C) windows of channel-last maps, through a view of every window."""
    n, h, w, c = features.shape
    every = features.as_strided((n, h - rows + 1, w - cols + 1, rows, cols * c), (h * w * c, w * c, c, w * c, 1))
    return every[batch, y0, x0]


def _gather_windows_first(features: Tensor, batch: Tensor, y0: Tensor, x0: Tensor, rows: int, cols: int) -> Tensor:
    """(Rc, C, rows, cols) windows of channel-first maps (slower per value, but no copy of the maps)."""
    n, c, h, w = features.shape
    sn, sc, sh, sw = features.stride()
    every = features.as_strided(
        (n, h - rows + 1, w - cols + 1, c, rows, cols), (sn, sh, sw, sc, sh, sw), features.storage_offset()
    )
    return every[batch, y0, x0]


def _average_forward(input: Tensor, geometry: _Geometry, output: Tensor, ph: int, pw: int) -> None:
    _, c, h, w = input.shape
    dtype = geometry.start_h.dtype
    chunks = _windows(geometry, h, w, ph, pw, c)
    # Reading windows from channel-last maps is fast, but costs one copy of the maps: worth it
    # unless the windows hold much less than the maps.
    if _window_volume(chunks, c) * CHANNELS_LAST_GAIN >= input.numel():
        maps = _maps.channels_last(input, dtype)
        for chunk in chunks:
            rc = chunk.rois.numel()
            window = _gather_windows_last(maps, geometry.batch[chunk.rois], chunk.y0, chunk.x0, chunk.rows, chunk.cols)
            by_rows = torch.bmm(chunk.weight_y, window).view(rc, ph, chunk.cols, c)
            pooled = torch.matmul(chunk.weight_x[:, None], by_rows)  # (rc, ph, pw, c)
            output.index_copy_(0, chunk.rois, pooled.permute(0, 3, 1, 2).to(output.dtype))
        return
    features = input if input.dtype == dtype else input.to(dtype)
    for chunk in chunks:
        rc = chunk.rois.numel()
        window = _gather_windows_first(features, geometry.batch[chunk.rois], chunk.y0, chunk.x0, chunk.rows, chunk.cols)
        by_cols = torch.bmm(window.view(rc, c * chunk.rows, chunk.cols), chunk.weight_x.transpose(1, 2))
        by_cols = by_cols.view(rc, c, chunk.rows, pw).transpose(1, 2).reshape(rc, chunk.rows, c * pw)
        pooled = torch.bmm(chunk.weight_y, by_cols).view(rc, ph, c, pw).transpose(1, 2)
        output.index_copy_(0, chunk.rois, pooled.to(output.dtype))


# --- max pooling: the kernel's per-sample arithmetic ---------------------------------------


def _max_forward(
    input: Tensor,
    geometry: _Geometry,
    output: Tensor,
    argmax_y: Tensor,
    argmax_x: Tensor,
    ph: int,
    pw: int,
    kernel: _Kernel,
) -> None:
    n, c, h, w = input.shape
    dtype = geometry.start_h.dtype
    pixels = _maps.channels_last(input, dtype).reshape(n * h * w, c)
    samples = geometry.grid_h.clamp(min=0) * geometry.grid_w.clamp(min=0)
    order = torch.argsort(samples)  # RoIs with similar grids together
    step = max(1, MAX_POOL_BUDGET // (c * ph * pw))
    for begin in range(0, order.numel(), step):
        index = order[begin : begin + step]
        best, best_y, best_x = _max_chunk(pixels, geometry, index, h, w, ph, pw, kernel)
        output.index_copy_(0, index, best.permute(0, 3, 1, 2).to(output.dtype))
        argmax_y.index_copy_(0, index, best_y.permute(0, 3, 1, 2).to(argmax_y.dtype))
        argmax_x.index_copy_(0, index, best_x.permute(0, 3, 1, 2).to(argmax_x.dtype))


def _max_chunk(
    pixels: Tensor, geometry: _Geometry, index: Tensor, h: int, w: int, ph: int, pw: int, kernel: _Kernel
) -> tuple[Tensor, Tensor, Tensor]:
    """(rc, ph, pw, C) maxima and their sample positions, the kernel's loop over (iy, ix)."""
    dtype, device = pixels.dtype, pixels.device
    rc, c = index.numel(), pixels.shape[1]
    grid_h, grid_w = geometry.grid_h[index], geometry.grid_w[index]
    most_h, most_w = max(int(grid_h.max()), 0), max(int(grid_w.max()), 0)
    best = torch.full((rc, ph, pw, c), kernel.max_start, dtype=dtype, device=device)
    best_y = torch.full((rc, ph, pw, c), -1.0, dtype=dtype, device=device)
    best_x = torch.full_like(best_y, -1.0)
    if most_h == 0 or most_w == 0:
        return best, best_y, best_x
    ys = _sample_positions(
        geometry.start_h[index],
        geometry.bin_h[index],
        grid_h.clamp(min=1),
        ph,
        torch.arange(most_h, device=device, dtype=dtype),
    )
    xs = _sample_positions(
        geometry.start_w[index],
        geometry.bin_w[index],
        grid_w.clamp(min=1),
        pw,
        torch.arange(most_w, device=device, dtype=dtype),
    )
    sy, sx = _bilinear_axis(ys, h), _bilinear_axis(xs, w)  # (rc, ph, most_h), (rc, pw, most_w)
    image = (geometry.batch[index] * (h * w)).view(rc, 1, 1)
    zero = torch.zeros((), dtype=dtype, device=device)
    for iy in range(most_h):
        for ix in range(most_w):
            used = (iy < grid_h) & (ix < grid_w)  # (rc,)
            inside = sy.inside[:, :, iy, None] & sx.inside[:, None, :, ix]  # (rc, ph, pw)
            ly, hy = sy.w_high[:, :, iy, None], sy.w_low[:, :, iy, None]
            lx, hx = sx.w_high[:, None, :, ix], sx.w_low[:, None, :, ix]
            # Outside samples read pixel 0 with zero weights, as the CPU kernel's pre-calculation does.
            y_low = torch.where(inside, sy.low[:, :, iy, None] * w, 0)
            y_high = torch.where(inside, sy.high[:, :, iy, None] * w, 0)
            x_low = torch.where(inside, sx.low[:, None, :, ix], 0)
            x_high = torch.where(inside, sx.high[:, None, :, ix], 0)

            def tap(at: Tensor, weight: Tensor, inside: Tensor = inside) -> Tensor:
                values = pixels.index_select(0, (image + at).view(-1)).view(rc, ph, pw, c)
                return torch.where(inside, weight, zero)[..., None] * values

            val = tap(y_low + x_low, hy * hx)
            val = val + tap(y_low + x_high, hy * lx)
            val = val + tap(y_high + x_low, ly * hx)
            val = val + tap(y_high + x_high, ly * lx)
            better = (val > best) & used.view(rc, 1, 1, 1)
            best = torch.where(better, val, best)
            best_y = torch.where(better, ys[:, :, iy, None, None], best_y)
            best_x = torch.where(better, xs[:, None, :, ix, None], best_x)
    return best, best_y, best_x


# --- backward ---------------------------------------------------------------------------------


def roi_align_backward(
    grad_output: Tensor,
    rois: Tensor,
    argmax_y: Tensor,
    argmax_x: Tensor,
    grad_input: Tensor,
    aligned_height: int,
    aligned_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    pool_mode: int,
    aligned: bool,
) -> None:
    """Add the gradient of roi_align_forward with respect to its input into ``grad_input``."""
    ph, pw, mode = int(aligned_height), int(aligned_width), int(pool_mode)
    op = "roi_align_backward"
    # The kernel reads grad_output with its own 4-D strides as (n, C, ph, pw) for grad_output.numel()
    # elements, RoIs from the start of `rois`, and argmax_y / argmax_x row-major through their data
    # pointers. A grad_output of fewer RoIs pools those; one of another per-RoI shape would be read
    # with mismatched strides, and more RoIs than `rois` holds past its end: refused.
    per_roi = (grad_input.shape[1], ph, pw) if grad_input.dim() == 4 else None
    fewer = grad_output.dim() == 4 and rois.dim() == 2 and grad_output.shape[0] <= rois.shape[0]
    if per_roi is not None and fewer and tuple(grad_output.shape[1:]) == per_roi:
        rois = rois[: grad_output.shape[0]]
    _check(op, grad_input, rois, ph, pw, mode)
    expected_shape = (rois.shape[0], grad_input.shape[1], ph, pw)
    if tuple(grad_output.shape) != expected_shape:
        raise ValueError(
            f"mmcv op `roi_align_backward` takes grad_output of shape {expected_shape} (or fewer RoIs), "
            f"got {tuple(grad_output.shape)}."
        )
    if rois.shape[0] == 0:
        return
    kernel = _kernel(grad_input.device)
    if mode == 0:
        argmax_y = check.flat(op, "argmax_y", argmax_y, expected_shape, _POOLED + " (from roi_align_forward)")
        argmax_x = check.flat(op, "argmax_x", argmax_x, expected_shape, _POOLED + " (from roi_align_forward)")
        _max_backward(grad_output, rois, argmax_y, argmax_x, grad_input)
        return
    dtype = _compute_dtype(grad_input.dtype)
    geometry = _geometry(
        rois, dtype, ph, pw, float(spatial_scale), int(sampling_ratio), bool(aligned), kernel, "roi_align_backward"
    )
    fast = _torchvision_backward(
        grad_output, rois, grad_input, ph, pw, float(spatial_scale), int(sampling_ratio), bool(aligned)
    )
    if fast is not None:
        grad_input.add_(fast)
        return
    _average_backward(grad_output, geometry, grad_input, ph, pw)


def _torchvision_backward(
    grad_output: Tensor,
    rois: Tensor,
    grad_input: Tensor,
    ph: int,
    pw: int,
    scale: float,
    sampling_ratio: int,
    aligned: bool,
) -> Tensor | None:
    if not _torchvision.use_for("roi_align", grad_input.device):
        return None
    n, c, h, w = grad_input.shape
    return torch.ops.torchvision._roi_align_backward(
        grad_output, rois, scale, ph, pw, n, c, h, w, sampling_ratio, aligned
    )


def _average_backward(grad_output: Tensor, geometry: _Geometry, grad_input: Tensor, ph: int, pw: int) -> None:
    n, c, h, w = grad_input.shape
    dtype = geometry.start_h.dtype
    grad = grad_output.to(dtype)
    chunks = _windows(geometry, h, w, ph, pw, c)
    # Windows of different RoIs overlap, so their gradients are summed with index_add_: into a
    # channel-last copy of the maps (one row of C values per pixel, fast) when the windows
    # cover much of the maps, else value by value into grad_input itself.
    last = _window_volume(chunks, c) * CHANNELS_LAST_GAIN >= grad_input.numel()
    direct = not last and grad_input.is_contiguous() and grad_input.dtype == dtype
    if direct:
        target = grad_input.view(-1)
    elif last:
        target = torch.zeros(n * h * w, c, dtype=dtype, device=grad_input.device)
    else:
        target = torch.zeros(n * c * h * w, dtype=dtype, device=grad_input.device)
    for chunk in chunks:
        rc = chunk.rois.numel()
        g = grad.index_select(0, chunk.rois).permute(0, 2, 3, 1)  # (rc, ph, pw, c)
        by_cols = torch.matmul(chunk.weight_x.transpose(1, 2)[:, None], g)  # (rc, ph, cols, c)
        window = torch.bmm(chunk.weight_y.transpose(1, 2), by_cols.reshape(rc, ph, chunk.cols * c))
        pixels = _window_pixels(geometry.batch[chunk.rois], chunk.y0, chunk.x0, chunk.rows, chunk.cols, h, w)
        if last:
            target.index_add_(0, pixels.view(-1), window.view(-1, c))
        else:
            batch = geometry.batch[chunk.rois].view(rc, 1, 1, 1)
            plane = (pixels.view(rc, chunk.rows, chunk.cols, 1) - batch * (h * w)) + (
                batch * c + torch.arange(c, device=batch.device)
            ) * (h * w)
            target.scatter_add_(0, plane.view(-1), window.reshape(-1))
    if last:
        planes = target.view(n, h * w, c)
        for i in range(n):
            grad_input[i].add_(planes[i].t().contiguous().view(c, h, w).to(grad_input.dtype))
    elif not direct:
        grad_input.add_(target.view(n, c, h, w).to(grad_input.dtype))


def _window_pixels(batch: Tensor, y0: Tensor, x0: Tensor, rows: int, cols: int, h: int, w: int) -> Tensor:
    """(Rc, rows, cols) flat pixel indices (b * H + y) * W + x of each window."""
    r = torch.arange(rows, device=batch.device)
    q = torch.arange(cols, device=batch.device)
    top = (batch * h + y0) * w + x0
    return top[:, None, None] + r[None, :, None] * w + q[None, None, :]


def _max_backward(grad_output: Tensor, rois: Tensor, argmax_y: Tensor, argmax_x: Tensor, grad_input: Tensor) -> None:
    """Each output value's gradient goes to the four pixels around its winning sample."""
    _, c, h, w = grad_input.shape
    dtype = _compute_dtype(grad_input.dtype)
    direct = grad_input.is_contiguous() and grad_input.dtype == dtype
    target = grad_input.view(-1) if direct else torch.zeros(grad_input.numel(), dtype=dtype, device=grad_input.device)
    r = rois.shape[0]
    step = max(1, MAX_POOL_BUDGET // (c * argmax_y[0].numel() // c))
    for begin in range(0, r, step):
        end = min(begin + step, r)
        at, values = _max_backward_chunk(
            grad_output[begin:end], rois[begin:end], argmax_y[begin:end], argmax_x[begin:end], c, h, w, dtype
        )
        target.scatter_add_(0, at, values)
    if not direct:
        grad_input.add_(target.view(grad_input.shape).to(grad_input.dtype))


def _max_backward_chunk(
    grad_output: Tensor, rois: Tensor, argmax_y: Tensor, argmax_x: Tensor, c: int, h: int, w: int, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """Flat pixel indices and gradient shares for a chunk of RoIs (four per output value)."""
    r = rois.shape[0]
    y = argmax_y.to(dtype).reshape(r, c, -1)
    x = argmax_x.to(dtype).reshape(r, c, -1)
    g = grad_output.to(dtype).reshape(r, c, -1)
    sy, sx = _bilinear_axis(y, h), _bilinear_axis(x, w)
    live = (y != -1.0) & sy.inside & sx.inside
    plane = (rois[:, 0].long()[:, None] * c + torch.arange(c, device=rois.device)[None, :]) * (h * w)  # (r, c)
    corner = torch.where(live, plane[:, :, None] + sy.low * w + sx.low, 0)
    down = torch.where(live, (sy.high - sy.low) * w, 0)
    right = torch.where(live, sx.high - sx.low, 0)
    zero = torch.zeros((), dtype=dtype, device=rois.device)
    # The four pixels of one value side by side (nearby in memory); dead entries add zero at pixel 0.
    at = torch.stack([corner, corner + right, corner + down, corner + down + right], -1).view(-1)
    # The kernel's g1 = grad * w1 with w1 = hy * hx, and so on.
    values = torch.stack(
        [
            torch.where(live, g * (sy.w_low * sx.w_low), zero),
            torch.where(live, g * (sy.w_low * sx.w_high), zero),
            torch.where(live, g * (sy.w_high * sx.w_low), zero),
            torch.where(live, g * (sy.w_high * sx.w_high), zero),
        ],
        -1,
    ).view(-1)
    return at, values
