"""mmcv's multi-scale deformable attention: ``ms_deform_attn_forward`` / ``_backward``.

Deformable DETR, DINO, Mask2Former's pixel decoder and MMPose's ED-Pose call it through
``MultiScaleDeformableAttention`` when the value is on CUDA (on CPU mmcv uses its own
``multi_scale_deformable_attn_pytorch``); compiled mmcv has no CPU kernel.

For every (batch, query, head, level, point) the kernel samples the head's value map of that
level bilinearly at ``(loc_x · W - 0.5, loc_y · H - 0.5)``, corners outside the map reading
zero, skips points with ``y ≤ -1``, ``x ≤ -1``, ``y ≥ H`` or ``x ≥ W`` altogether (their
gradients are zero too), and sums the samples weighted by the attention weights. Here the
value maps are laid out as the rows of one ``(batch · head · padded keys, channels)`` matrix,
each level framed by one pixel of zeros (so a corner just off the map reads zero without a
test), and each sample is 4 corner rows with a coefficient (bilinear weight × attention
weight): the forward is a gather and a weighted sum, the backward a scatter-add of the same
coefficients (``grad_value``) and dot products of the corner rows with the output gradient
(``grad_attn_weight``, ``grad_sampling_loc``). The coordinates and bilinear weights use the
kernel's own float arithmetic, so samples land in the same cells as the kernel's — unlike
``grid_sample``, whose rounding can put a point lying exactly on a pixel row into the cell
above and so give a different location gradient there.

Queries are processed in chunks that bound the gathered rows (the Deformable DETR encoder at
1333×800 samples 16 points × 4 corners for 22k queries per image); ``im2col_step`` only
needs to divide the batch, as the kernel requires: the result does not depend on it.
Half values are computed in float32 and rounded at the end.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

#: Elements of gathered corner rows per chunk of queries (64 MiB in float32).
_CHUNK_ELEMENTS = 1 << 24
#: mmcv's THREADS_PER_BLOCK: with more channels per head than this, the backward kernels add
#: into grad_sampling_loc and grad_attn_weight (atomicAdd); otherwise they overwrite them.
_THREADS_PER_BLOCK = 512


class _Shapes(NamedTuple):
    batch: int
    keys: int
    heads: int
    channels: int
    queries: int
    levels: int
    points: int


def _compute_dtype(tensor: torch.Tensor) -> torch.dtype:
    return tensor.dtype if tensor.dtype in (torch.float32, torch.float64) else torch.float32


def _check(
    name: str,
    value: torch.Tensor,
    spatial_shapes: torch.Tensor,
    level_start_index: torch.Tensor,
    sampling_loc: torch.Tensor,
    attn_weight: torch.Tensor,
    im2col_step: int,
) -> _Shapes:
    if value.dim() != 4:
        raise ValueError(
            f"{name}: `value` must be 4-D (batch, keys, heads, channels per head), got shape {tuple(value.shape)}."
        )
    batch, keys, heads, channels = value.shape
    levels = spatial_shapes.size(0) if spatial_shapes.dim() == 2 else -1
    if spatial_shapes.dim() != 2 or spatial_shapes.size(1) != 2 or level_start_index.shape != (levels,):
        raise ValueError(
            f"{name}: `value_spatial_shapes` must be (levels, 2) holding (H, W) of each level and "
            f"`value_level_start_index` (levels,), got {tuple(spatial_shapes.shape)} and {tuple(level_start_index.shape)}."
        )
    if spatial_shapes.dtype != torch.long or level_start_index.dtype != torch.long:
        raise ValueError(
            f"{name}: `value_spatial_shapes` and `value_level_start_index` must be int64 tensors, got "
            f"{spatial_shapes.dtype} and {level_start_index.dtype}."
        )
    if sampling_loc.dim() != 6 or tuple(sampling_loc.shape[:4:2]) != (batch, heads) or sampling_loc.shape[3] != levels:
        raise ValueError(
            f"{name}: `sampling_loc` must be (batch, queries, heads, levels, points, 2) = ({batch}, queries, "
            f"{heads}, {levels}, points, 2), got {tuple(sampling_loc.shape)}."
        )
    if sampling_loc.size(5) != 2 or attn_weight.shape != sampling_loc.shape[:5]:
        raise ValueError(
            f"{name}: `sampling_loc` must end in (x, y) pairs and `attn_weight` must be its shape without "
            f"them {tuple(sampling_loc.shape[:5])}; got {tuple(sampling_loc.shape)} and {tuple(attn_weight.shape)}."
        )
    step = min(batch, int(im2col_step))
    if batch and (step <= 0 or batch % step):
        raise ValueError(
            f"{name}: the batch ({batch}) must be a multiple of im2col_step ({im2col_step}, capped at the batch); "
            "set MultiScaleDeformableAttention's im2col_step to a divisor of the batch size."
        )
    return _Shapes(batch, keys, heads, channels, sampling_loc.size(1), levels, sampling_loc.size(4))


class _Layout(NamedTuple):
    """Each level's (H, W), its first key in ``value`` and in the padded matrix; the padded key count."""

    levels: list[tuple[int, int, int, int]]
    padded_keys: int
    #: (levels, 1) tensors for the corner arithmetic: H, W (float and int), padded first key.
    height: torch.Tensor
    width: torch.Tensor
    padded_width: torch.Tensor
    padded_start: torch.Tensor
    #: (levels, 1, 4): row offsets of the 4 corners from the top-left one, in the kernel's order
    #: (low, low), (low, high), (high, low), (high, high).
    corner_offsets: torch.Tensor


def _layout(spatial_shapes: torch.Tensor, level_start_index: torch.Tensor, device: torch.device) -> _Layout:
    # One small host copy per call (the level sizes are needed to lay the maps out).
    numbers = torch.cat([spatial_shapes.reshape(-1), level_start_index.to(spatial_shapes.device)]).tolist()
    count = spatial_shapes.size(0)
    shapes = [(int(numbers[2 * i]), int(numbers[2 * i + 1])) for i in range(count)]
    starts = [int(s) for s in numbers[2 * count :]]
    levels, padded = [], 0
    for (h, w), start in zip(shapes, starts):
        levels.append((h, w, start, padded))
        padded += (h + 2) * (w + 2)

    def column(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.long, device=device).view(-1, 1)

    padded_width = column([w + 2 for _, w, _, _ in levels])
    offsets = torch.cat([torch.zeros_like(padded_width), torch.ones_like(padded_width)], dim=1)
    corner_offsets = torch.cat([offsets, offsets + padded_width], dim=1).view(-1, 1, 4)
    return _Layout(
        levels,
        padded,
        column([h for h, _, _, _ in levels]),
        column([w for _, w, _, _ in levels]),
        padded_width,
        column([p for _, _, _, p in levels]),
        corner_offsets,
    )


def _padded_maps(value: torch.Tensor, layout: _Layout, dtype: torch.dtype) -> torch.Tensor:
    """(batch, keys, heads, channels) → rows (batch · heads · padded keys, channels), each map framed by zeros."""
    batch, _, heads, channels = value.shape
    padded = value.new_zeros(batch, heads, layout.padded_keys, channels, dtype=dtype)
    for h, w, start, padded_start in layout.levels:
        interior = padded[:, :, padded_start : padded_start + (h + 2) * (w + 2)].view(
            batch, heads, h + 2, w + 2, channels
        )
        level = value[:, start : start + h * w].view(batch, h, w, heads, channels).permute(0, 3, 1, 2, 4)
        interior[:, :, 1 : h + 1, 1 : w + 1].copy_(level)
    return padded.view(-1, channels)


def _add_unpadded(grad_padded: torch.Tensor, layout: _Layout, grad_value: torch.Tensor) -> None:
    """The inverse layout of ``_padded_maps``, added into ``grad_value`` (the frame is dropped)."""
    batch, _, heads, channels = grad_value.shape
    maps = grad_padded.view(batch, heads, layout.padded_keys, channels)
    for h, w, start, padded_start in layout.levels:
        interior = maps[:, :, padded_start : padded_start + (h + 2) * (w + 2)].view(
            batch, heads, h + 2, w + 2, channels
        )
        level = grad_value[:, start : start + h * w].view(batch, h, w, heads, channels).permute(0, 3, 1, 2, 4)
        level.add_(interior[:, :, 1 : h + 1, 1 : w + 1])


class _Corners(NamedTuple):
    """The 4 bilinear corners of every sample of one chunk of queries, in the kernel's arithmetic."""

    rows: torch.Tensor  # (chunk, heads, levels, points, 4): rows of the padded matrix
    weights: torch.Tensor  # (chunk, heads, levels, points, 4): bilinear weights, 0 where the point is skipped
    lh: torch.Tensor  # (chunk, heads, levels, points): fractional parts, for the location gradient
    lw: torch.Tensor
    inside: torch.Tensor  # (chunk, heads, levels, points): the point is sampled at all


def _corners(loc: torch.Tensor, first_row: torch.Tensor, layout: _Layout) -> _Corners:
    """``loc``: (chunk, heads, levels, points, 2) in [0, 1]; ``first_row``: (chunk, heads, 1, 1) first
    row of each query's (batch, head) in the padded matrix."""
    dtype = loc.dtype
    height, width = layout.height, layout.width
    # The kernel: h_im = loc_h * spatial_h - 0.5 (a float product, then the half subtracted).
    h_im = loc[..., 1] * height.to(dtype) - 0.5
    w_im = loc[..., 0] * width.to(dtype) - 0.5
    inside = (h_im > -1) & (w_im > -1) & (h_im < height) & (w_im < width)
    # Skipped points get weight 0; park them at 0 so that their corners stay on the map.
    h_im = torch.where(inside, h_im, torch.zeros_like(h_im))
    w_im = torch.where(inside, w_im, torch.zeros_like(w_im))
    h_low = torch.floor(h_im)
    w_low = torch.floor(w_im)
    lh = h_im - h_low
    lw = w_im - w_low
    hh = 1 - lh
    hw = 1 - lw
    # The top-left corner (h_low, w_low) is at padded (h_low + 1, w_low + 1).
    top_left = first_row + layout.padded_start + (h_low.long() + 1) * layout.padded_width + (w_low.long() + 1)
    rows = top_left.unsqueeze(-1) + layout.corner_offsets
    weights = torch.stack([hh * hw, hh * lw, lh * hw, lh * lw], dim=-1) * inside.unsqueeze(-1).to(dtype)
    return _Corners(rows, weights, lh, lw, inside)


def _query_chunks(shapes: _Shapes) -> int:
    per_query = shapes.heads * shapes.levels * shapes.points * 4 * shapes.channels
    return max(1, _CHUNK_ELEMENTS // max(1, per_query))


def _flat_queries(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(batch, queries, …) → (batch · queries, …) in the compute dtype."""
    return tensor.reshape(-1, *tensor.shape[2:]).to(dtype)


def _first_rows(shapes: _Shapes, layout: _Layout, device: torch.device) -> torch.Tensor:
    """(batch · queries, heads, 1, 1): the first padded row of each query's (batch, head) maps."""
    heads = torch.arange(shapes.heads, device=device)
    batches = torch.arange(shapes.batch, device=device).repeat_interleave(shapes.queries)
    return ((batches.view(-1, 1) * shapes.heads + heads) * layout.padded_keys).view(-1, shapes.heads, 1, 1)


def ms_deform_attn_forward(
    value: torch.Tensor,
    value_spatial_shapes: torch.Tensor,
    value_level_start_index: torch.Tensor,
    sampling_locations: torch.Tensor,
    attention_weights: torch.Tensor,
    im2col_step: int,
) -> torch.Tensor:
    """The attention output, (batch, queries, heads · channels)."""
    name = "ms_deform_attn_forward"
    shapes = _check(
        name, value, value_spatial_shapes, value_level_start_index, sampling_locations, attention_weights, im2col_step
    )
    dtype = _compute_dtype(value)
    output = value.new_zeros(shapes.batch, shapes.queries, shapes.heads * shapes.channels)
    if output.numel() == 0:
        return output
    layout = _layout(value_spatial_shapes, value_level_start_index, value.device)
    padded = _padded_maps(value, layout, dtype)
    first_rows = _first_rows(shapes, layout, value.device)
    locations = _flat_queries(sampling_locations, dtype)
    weights = _flat_queries(attention_weights, dtype)
    out = output.view(-1, shapes.heads, shapes.channels)
    step = _query_chunks(shapes)
    for start in range(0, locations.size(0), step):
        chunk = slice(start, start + step)
        corners = _corners(locations[chunk], first_rows[chunk], layout)
        coefficients = corners.weights * weights[chunk].unsqueeze(-1)  # (chunk, heads, levels, points, 4)
        n, heads = coefficients.shape[:2]
        gathered = padded.index_select(0, corners.rows.reshape(-1)).view(n * heads, -1, shapes.channels)
        result = torch.bmm(coefficients.reshape(n * heads, 1, -1), gathered)
        out[chunk].copy_(result.view(n, heads, shapes.channels))
    return output


def ms_deform_attn_backward(
    value: torch.Tensor,
    value_spatial_shapes: torch.Tensor,
    value_level_start_index: torch.Tensor,
    sampling_locations: torch.Tensor,
    attention_weights: torch.Tensor,
    grad_output: torch.Tensor,
    grad_value: torch.Tensor,
    grad_sampling_loc: torch.Tensor,
    grad_attn_weight: torch.Tensor,
    im2col_step: int,
) -> None:
    """Adds the value gradient into ``grad_value``; writes the location and weight gradients.

    As the CUDA kernels do: ``grad_value`` is accumulated into (atomicAdd), the other two are
    overwritten when a head has at most 512 channels and accumulated into above that.
    """
    name = "ms_deform_attn_backward"
    shapes = _check(
        name, value, value_spatial_shapes, value_level_start_index, sampling_locations, attention_weights, im2col_step
    )
    expected = {
        "grad_output": (grad_output, (shapes.batch, shapes.queries, shapes.heads * shapes.channels)),
        "grad_value": (grad_value, tuple(value.shape)),
        "grad_sampling_loc": (grad_sampling_loc, tuple(sampling_locations.shape)),
        "grad_attn_weight": (grad_attn_weight, tuple(attention_weights.shape)),
    }
    for what, (tensor, shape) in expected.items():
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name}: `{what}` must have shape {shape}, got {tuple(tensor.shape)}.")
    if grad_output.numel() == 0:
        return
    dtype = _compute_dtype(value)
    layout = _layout(value_spatial_shapes, value_level_start_index, value.device)
    padded = _padded_maps(value, layout, dtype)
    grad_padded = torch.zeros_like(padded)
    first_rows = _first_rows(shapes, layout, value.device)
    locations = _flat_queries(sampling_locations, dtype)
    weights = _flat_queries(attention_weights, dtype)
    grad_out = grad_output.reshape(-1, shapes.heads, shapes.channels).to(dtype)
    grad_loc = torch.empty_like(locations)
    grad_weight = torch.empty_like(weights)
    height, width = layout.height.to(dtype), layout.width.to(dtype)
    step = _query_chunks(shapes)
    for start in range(0, locations.size(0), step):
        chunk = slice(start, start + step)
        corners = _corners(locations[chunk], first_rows[chunk], layout)
        attention = weights[chunk]  # (chunk, heads, levels, points)
        n, heads = attention.shape[:2]
        top_grad = grad_out[chunk].reshape(n * heads, shapes.channels, 1)
        rows = corners.rows.reshape(-1)

        # grad_value: every corner row receives bilinear weight × attention weight × output gradient.
        coefficients = (corners.weights * attention.unsqueeze(-1)).reshape(n * heads, -1, 1)
        grad_padded.index_add_(0, rows, (coefficients * top_grad.transpose(1, 2)).reshape(-1, shapes.channels))

        # Each corner's value · output gradient: the sample's value is Σ w_i v_i, its derivative in
        # y is Σ (∂w_i/∂y) v_i, in x Σ (∂w_i/∂x) v_i; both scaled by the attention weight.
        gathered = padded.index_select(0, rows).view(n * heads, -1, shapes.channels)
        dots = torch.bmm(gathered, top_grad).view(corners.weights.shape)  # (chunk, heads, levels, points, 4)
        v1, v2, v3, v4 = dots.unbind(-1)
        lh, lw = corners.lh, corners.lw
        hh, hw = 1 - lh, 1 - lw
        inside = corners.inside.to(dtype)
        grad_weight[chunk] = (corners.weights * dots).sum(-1)
        grad_h = (-hw * v1 - lw * v2 + hw * v3 + lw * v4) * inside
        grad_w = (-hh * v1 + hh * v2 - lh * v3 + lh * v4) * inside
        grad_loc[chunk, ..., 0] = width * grad_w * attention
        grad_loc[chunk, ..., 1] = height * grad_h * attention

    _add_unpadded(grad_padded, layout, grad_value)
    accumulate = shapes.channels > _THREADS_PER_BLOCK
    for target, result in ((grad_sampling_loc, grad_loc), (grad_attn_weight, grad_weight)):
        result = result.view(target.shape)
        if accumulate:
            target.add_(result)
        else:
            target.copy_(result)
