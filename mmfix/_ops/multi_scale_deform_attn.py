"""mmcv's multi-scale deformable attention: ``ms_deform_attn_forward`` / ``_backward``.

Deformable DETR, DINO, Mask2Former's pixel decoder and MMPose's ED-Pose call it through
``MultiScaleDeformableAttention`` when the value is on CUDA (on CPU mmcv uses its own
``multi_scale_deformable_attn_pytorch``); compiled mmcv has no CPU kernel.

For every (batch, query, head, level, point) the kernel samples the head's value map of that
level bilinearly at ``(loc_x · W - 0.5, loc_y · H - 0.5)``, corners outside the map reading
zero, skips points with ``y ≤ -1``, ``x ≤ -1``, ``y ≥ H`` or ``x ≥ W`` altogether (their
gradients are zero too), and sums the samples weighted by the attention weights. Here each
sample is written as 4 corner rows of the value (a ``(batch · key · head, channel)`` matrix
with one zero row appended for corners off the map) and a coefficient (bilinear weight ×
attention weight): the forward is a gather and a weighted sum, the backward a scatter-add
of the same coefficients (``grad_value``) and dot products of the corner rows with the
output gradient (``grad_attn_weight``, ``grad_sampling_loc``). The coordinates are computed
with the kernel's own float arithmetic, so samples land exactly where the kernel's do.

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


class _Corners(NamedTuple):
    """The 4 bilinear corners of every sample of one chunk of queries, in the kernel's arithmetic."""

    rows: torch.Tensor  # (chunk, heads, levels, points, 4): row of the padded value matrix
    weights: torch.Tensor  # (chunk, heads, levels, points, 4): bilinear weight, 0 where the point is skipped
    lh: torch.Tensor  # (chunk, heads, levels, points): fractional parts, for the location gradient
    lw: torch.Tensor
    inside: torch.Tensor  # (chunk, heads, levels, points): the point is sampled at all


def _corners(
    loc: torch.Tensor,
    batch_of_query: torch.Tensor,
    spatial_shapes: torch.Tensor,
    level_start_index: torch.Tensor,
    shapes: _Shapes,
) -> _Corners:
    """``loc``: (chunk, heads, levels, points, 2) locations in [0, 1] of each query of the chunk."""
    dtype = loc.dtype
    height = spatial_shapes[:, 0].view(1, 1, -1, 1)
    width = spatial_shapes[:, 1].view(1, 1, -1, 1)
    # The kernel: h_im = loc_h * spatial_h - 0.5 (a float product, then the half subtracted).
    h_im = loc[..., 1] * height.to(dtype) - 0.5
    w_im = loc[..., 0] * width.to(dtype) - 0.5
    inside = (h_im > -1) & (w_im > -1) & (h_im < height) & (w_im < width)
    # Points outside are skipped; park them at 0 so the integer corners stay small.
    h_im = torch.where(inside, h_im, torch.zeros_like(h_im))
    w_im = torch.where(inside, w_im, torch.zeros_like(w_im))
    h_low_f = torch.floor(h_im)
    w_low_f = torch.floor(w_im)
    lh = h_im - h_low_f
    lw = w_im - w_low_f
    hh = 1 - lh
    hw = 1 - lw
    h_low = h_low_f.long()
    w_low = w_low_f.long()

    # Corner order as in the kernel: (low, low), (low, high), (high, low), (high, high).
    ys = torch.stack([h_low, h_low, h_low + 1, h_low + 1], dim=-1)
    xs = torch.stack([w_low, w_low + 1, w_low, w_low + 1], dim=-1)
    weights = torch.stack([hh * hw, hh * lw, lh * hw, lh * lw], dim=-1)
    on_map = (ys >= 0) & (ys < height.unsqueeze(-1)) & (xs >= 0) & (xs < width.unsqueeze(-1)) & inside.unsqueeze(-1)
    heads = torch.arange(shapes.heads, device=loc.device).view(1, -1, 1, 1, 1)
    key = level_start_index.view(1, 1, -1, 1, 1) + ys * width.unsqueeze(-1) + xs
    rows = (batch_of_query.view(-1, 1, 1, 1, 1) * shapes.keys + key) * shapes.heads + heads
    zero_row = shapes.batch * shapes.keys * shapes.heads  # the appended row of zeros
    rows = torch.where(on_map, rows, torch.full_like(rows, zero_row))
    weights = weights * inside.unsqueeze(-1).to(dtype)
    return _Corners(rows, weights, lh, lw, inside)


def _padded_value(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``value`` as a (batch · keys · heads + 1, channels) matrix whose last row is zero."""
    flat = value.reshape(-1, value.size(-1)).to(dtype)
    return torch.cat([flat, flat.new_zeros(1, flat.size(1))])


def _query_chunks(shapes: _Shapes) -> int:
    per_query = shapes.heads * shapes.levels * shapes.points * 4 * shapes.channels
    return max(1, _CHUNK_ELEMENTS // max(1, per_query))


def _flat_queries(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(batch, queries, …) → (batch · queries, …) in the compute dtype."""
    return tensor.reshape(-1, *tensor.shape[2:]).to(dtype)


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
    padded = _padded_value(value, dtype)
    spatial_shapes = value_spatial_shapes.to(value.device)
    start_index = value_level_start_index.to(value.device)
    locations = _flat_queries(sampling_locations, dtype)
    weights = _flat_queries(attention_weights, dtype)
    batch_of_query = torch.arange(shapes.batch, device=value.device).repeat_interleave(shapes.queries)
    out = output.view(-1, shapes.heads, shapes.channels)
    step = _query_chunks(shapes)
    for start in range(0, locations.size(0), step):
        chunk = slice(start, start + step)
        corners = _corners(locations[chunk], batch_of_query[chunk], spatial_shapes, start_index, shapes)
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
    padded = _padded_value(value, dtype)
    grad_padded = torch.zeros_like(padded)
    spatial_shapes = value_spatial_shapes.to(value.device)
    start_index = value_level_start_index.to(value.device)
    locations = _flat_queries(sampling_locations, dtype)
    weights = _flat_queries(attention_weights, dtype)
    grad_out = grad_output.reshape(-1, shapes.heads, shapes.channels).to(dtype)
    batch_of_query = torch.arange(shapes.batch, device=value.device).repeat_interleave(shapes.queries)
    grad_loc = torch.empty_like(locations)
    grad_weight = torch.empty_like(weights)
    height = spatial_shapes[:, 0].to(dtype).view(1, 1, -1, 1)
    width = spatial_shapes[:, 1].to(dtype).view(1, 1, -1, 1)
    step = _query_chunks(shapes)
    for start in range(0, locations.size(0), step):
        chunk = slice(start, start + step)
        corners = _corners(locations[chunk], batch_of_query[chunk], spatial_shapes, start_index, shapes)
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

    grad_value.add_(grad_padded[:-1].view(value.shape))
    accumulate = shapes.channels > _THREADS_PER_BLOCK
    for target, result in ((grad_sampling_loc, grad_loc), (grad_attn_weight, grad_weight)):
        result = result.view(target.shape)
        if accumulate:
            target.add_(result)
        else:
            target.copy_(result)
