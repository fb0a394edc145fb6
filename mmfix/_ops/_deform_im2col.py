"""The arithmetic shared by deformable convolution v1 (``deform_conv``) and v2 (``modulated_deform_conv``).

mmcv's kernels (``csrc/pytorch/cpu/deform_conv.cpp``, ``modulated_deform_conv.cpp``) build
a column matrix: for every output position, kernel tap and input channel, the input
bilinearly sampled at ``(h_out * stride - pad + i * dilation + offset_h, …)`` (times the
mask in v2), zero where the point lies outside ``(-1, H) x (-1, W)`` and for corners outside
the image; then one GEMM with the weight. The backward passes scatter the column gradient
back through the same bilinear weights (``col2im``), and sum the column gradient times the
derivative of the sample with respect to its coordinates over the channels of each
deformable group (``col2im_coord``), or times the sample itself for the mask.

Here the sampling is one fused gather over a zero-padded channels-last copy of the input
(``_weighted_rows``: four corner rows per sample, weighted by the bilinear weights): the
column matrix comes out position-major, ``(positions, taps x channels)``, and the GEMM takes
it transposed. Corner indices point into the padded image, so a corner outside the image
reads the zero border, exactly as the kernel's bounds tests give 0; a point outside the
sampling window gets weight 0 and the zero row. The backward takes the gradient of the
gather: the table part is ``col2im``, and the per-corner dot products ``s_k = sum_c
colgrad_c * v_k,c`` give both coordinate gradients (``sum_k dweight_k/dh * s_k``) and the
mask gradient (``sum_k weight_k * s_k``).

Memory stays bounded: images are processed ``im2col_step`` at a time as in mmcv, and within
that, rows of output positions in chunks whose column matrix stays under ``COLUMN_BUDGET``
elements (mmcv allocates the whole ``channels*k*k x step*H_out*W_out`` matrix at once).
Half inputs are computed in float32 and written back in half.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

import torch

from . import _torchvision
from ._weighted_rows import weighted_rows, weighted_rows_backward

#: Largest column matrix (elements) built at once: 64 MiB in float32.
COLUMN_BUDGET = 1 << 24


def c_div(a: int, b: int) -> int:
    """C's integer division (towards zero), as the kernels compute output sizes."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


@dataclass(frozen=True)
class Geometry:
    kernel_h: int
    kernel_w: int
    stride_h: int
    stride_w: int
    pad_h: int
    pad_w: int
    dilation_h: int
    dilation_w: int
    groups: int
    deform_groups: int

    @property
    def taps(self) -> int:
        return self.kernel_h * self.kernel_w

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        extent_h = self.dilation_h * (self.kernel_h - 1) + 1
        extent_w = self.dilation_w * (self.kernel_w - 1) + 1
        return (
            c_div(height + 2 * self.pad_h - extent_h, self.stride_h) + 1,
            c_div(width + 2 * self.pad_w - extent_w, self.stride_w) + 1,
        )


def torchvision_ops(tensor: torch.Tensor) -> Any:
    """torchvision.ops for the forward on this tensor's device, or None.

    torchvision's ``deform_conv2d`` computes the same forward (same sampling, offset and
    mask layouts, groups). Only its forward is used: its offset gradient differs from
    mmcv's for points exactly on the line -1 (mmcv gives 0 there, which a zero-offset 3x3
    conv with padding 1 hits at every border), and on CPU the gather here is as fast.
    """
    return _torchvision.ops() if tensor.is_cuda else None


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half (and bfloat16) are computed in float32, as the result is written back."""
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


# --- the sampling plan ------------------------------------------------------------------------


class _Plan(NamedTuple):
    rows: torch.Tensor  # (bags, 4) rows of the padded table: the corners (h_low|h_high) x (w_low|w_high)
    weight: torch.Tensor  # (bags, 4) bilinear weights (x mask), 0 outside the sampling window
    bilinear: torch.Tensor  # (bags, 4) the same without the mask (for the mask gradient)
    d_h: torch.Tensor  # (bags, 4) d weight / d h per corner (x mask), as get_coordinate_weight
    d_w: torch.Tensor  # (bags, 4) d weight / d w per corner (x mask)


def _plan(
    offset: torch.Tensor,
    mask: torch.Tensor | None,
    row0: int,
    height: int,
    width: int,
    geo: Geometry,
    with_grads: bool,
) -> _Plan:
    """Sampling points of one chunk: offset (B', dg*2*K, R, W_out), mask (B', dg*K, R, W_out).

    Bags are ordered (image, row, column, tap, deformable group), so that the gathered
    rows form the column matrix (positions, taps, channels) directly.
    """
    n, _, rows, cols = offset.shape
    dg, taps = geo.deform_groups, geo.taps
    device, dtype = offset.device, offset.dtype
    # Contiguous in bag order, so that everything computed from it is too.
    off = offset.view(n, dg, taps, 2, rows, cols).permute(0, 4, 5, 2, 1, 3).contiguous()  # (n, R, Wo, K, dg, 2)
    tap_i = torch.arange(geo.kernel_h, device=device).repeat_interleave(geo.kernel_w)
    tap_j = torch.arange(geo.kernel_w, device=device).repeat(geo.kernel_h)
    # h_in + i * dilation is an integer in the kernel, converted to float before the offset is added.
    base_h = (torch.arange(row0, row0 + rows, device=device) * geo.stride_h - geo.pad_h).view(rows, 1, 1)
    base_h = (base_h + (tap_i * geo.dilation_h).view(1, 1, taps)).to(dtype).unsqueeze(-1)  # (R, 1, K, 1)
    base_w = (torch.arange(cols, device=device) * geo.stride_w - geo.pad_w).view(1, cols, 1)
    base_w = (base_w + (tap_j * geo.dilation_w).view(1, 1, taps)).to(dtype).unsqueeze(-1)  # (1, Wo, K, 1)
    h = base_h + off[..., 0]
    w = base_w + off[..., 1]
    inside = (h > -1) & (w > -1) & (h < height) & (w < width)
    h_low = torch.where(inside, h, 0).floor_()
    w_low = torch.where(inside, w, 0).floor_()
    lh = h - h_low
    lw = w - w_low
    hh = 1 - lh
    hw = 1 - lw
    zero = torch.zeros((), dtype=dtype, device=device)
    bilinear = torch.where(inside.unsqueeze(-1), torch.stack((hh * hw, hh * lw, lh * hw, lh * lw), -1), zero)
    weight = bilinear
    if mask is not None:
        m = mask.view(n, dg, taps, rows, cols).permute(0, 3, 4, 2, 1).contiguous()  # (n, R, Wo, K, dg)
        weight = bilinear * m.unsqueeze(-1)
    padded_w = width + 2
    # Top-left corner in the padded image (h_low + 1, w_low + 1); points outside read row 0 (zero).
    top_left = (h_low.long() + 1) * padded_w + (w_low.long() + 1)
    blocks = torch.arange(n, device=device).view(n, 1, 1, 1, 1) * dg + torch.arange(dg, device=device)
    top_left = torch.where(inside, top_left, 0) + blocks * ((height + 2) * padded_w)
    corners = torch.tensor([0, 1, padded_w, padded_w + 1], device=device)
    index = (top_left.unsqueeze(-1) + corners).view(-1, 4)
    if not with_grads:
        return _Plan(index, weight.reshape(-1, 4), bilinear, bilinear, bilinear)
    # get_coordinate_weight: d/dh weighs the corners by -(w_low + 1 - w), -(w - w_low), +, +;
    # d/dw by -(h_low + 1 - h), +(h_low + 1 - h), -(h - h_low), +(h - h_low); 0 outside.
    aw = (w_low + 1) - w
    bw = w - w_low
    ah = (h_low + 1) - h
    bh = h - h_low
    d_h = torch.where(inside.unsqueeze(-1), torch.stack((-aw, -bw, aw, bw), -1), zero)
    d_w = torch.where(inside.unsqueeze(-1), torch.stack((-ah, ah, -bh, bh), -1), zero)
    if mask is not None:
        d_h = d_h * m.unsqueeze(-1)
        d_w = d_w * m.unsqueeze(-1)
    return _Plan(index, weight.reshape(-1, 4), bilinear, d_h, d_w)


def _table(images: torch.Tensor, deform_groups: int) -> torch.Tensor:
    """Channels-last, zero-padded copy of (n, C, H, W): rows (image, group, h + 1, w + 1), C/dg columns."""
    n, channels, height, width = images.shape
    per_group = channels // deform_groups
    table = images.new_zeros(n, deform_groups, height + 2, width + 2, per_group)
    table[:, :, 1:-1, 1:-1].copy_(images.view(n, deform_groups, per_group, height, width).permute(0, 1, 3, 4, 2))
    return table.view(-1, per_group)


def _untable(table: torch.Tensor, n: int, channels: int, height: int, width: int, deform_groups: int) -> torch.Tensor:
    """The (n, C, H, W) view of a table's interior (the inverse of ``_table``)."""
    per_group = channels // deform_groups
    padded = table.view(n, deform_groups, height + 2, width + 2, per_group)[:, :, 1:-1, 1:-1]
    return padded.permute(0, 1, 4, 2, 3).reshape(n, channels, height, width)


# --- chunking -----------------------------------------------------------------------------------


class _Chunk(NamedTuple):
    images: slice
    row0: int
    row1: int
    new_images: bool  # the first chunk of an image group: build its table


def _chunks(batch: int, step: int, out_h: int, out_w: int, row_elems: int) -> Iterator[_Chunk]:
    rows = max(1, COLUMN_BUDGET // max(1, step * out_w * row_elems))
    for b0 in range(0, batch, step):
        for r0 in range(0, out_h, rows):
            yield _Chunk(slice(b0, b0 + step), r0, min(out_h, r0 + rows), r0 == 0)


def _weight_matrices(weight: torch.Tensor, groups: int) -> list[torch.Tensor]:
    """Per group, the weight as (out/groups, taps * in/groups) in the columns' (tap, channel) order."""
    out_channels, per_group, kh, kw = weight.shape
    w = weight.permute(0, 2, 3, 1).reshape(out_channels, kh * kw, per_group)
    step = out_channels // groups
    return [w[g * step : (g + 1) * step].reshape(step, kh * kw * per_group) for g in range(groups)]


def _group_columns(columns: torch.Tensor, taps: int, groups: int, g: int) -> torch.Tensor:
    """Group g's part of a (n, L, taps * C) column matrix, as (n, L, taps * C/groups)."""
    n, positions, width = columns.shape
    if groups == 1:
        return columns
    per_group = width // taps // groups
    return columns.view(n, positions, taps, groups, per_group)[:, :, :, g].reshape(n, positions, taps * per_group)


# --- forward and backward -----------------------------------------------------------------------


def forward(
    input: torch.Tensor,
    weight: torch.Tensor,
    offset: torch.Tensor,
    mask: torch.Tensor | None,
    out: torch.Tensor,
    geo: Geometry,
    step: int,
) -> None:
    """``out`` (n, O, H_out, W_out) = the deformable convolution (no bias)."""
    dtype = compute_dtype(input.dtype)
    input, weight, offset = input.to(dtype), weight.to(dtype), offset.to(dtype)
    mask = None if mask is None else mask.to(dtype)
    batch, channels, height, width = input.shape
    out_h, out_w = out.shape[2:]
    taps, groups = geo.taps, geo.groups
    out_per_group = weight.shape[0] // groups
    matrices = _weight_matrices(weight, groups)
    table = input
    for chunk in _chunks(batch, step, out_h, out_w, taps * channels):
        if chunk.new_images:
            table = _table(input[chunk.images], geo.deform_groups)
        plan = _plan(
            offset[chunk.images, :, chunk.row0 : chunk.row1],
            None if mask is None else mask[chunk.images, :, chunk.row0 : chunk.row1],
            chunk.row0,
            height,
            width,
            geo,
            with_grads=False,
        )
        n = plan.weight.shape[0] // ((chunk.row1 - chunk.row0) * out_w * taps * geo.deform_groups)
        columns = weighted_rows(table, plan.rows, plan.weight).view(n, -1, taps * channels)
        for g, matrix in enumerate(matrices):
            result = torch.matmul(matrix, _group_columns(columns, taps, groups, g).transpose(1, 2))
            target = out[chunk.images, g * out_per_group : (g + 1) * out_per_group, chunk.row0 : chunk.row1]
            target.copy_(result.view(target.shape))


def weight_gradient(
    input: torch.Tensor,
    offset: torch.Tensor,
    mask: torch.Tensor | None,
    grad_output: torch.Tensor,
    geo: Geometry,
    step: int,
) -> torch.Tensor:
    """d loss / d weight, (O, C/groups, kh, kw), in the compute dtype."""
    dtype = compute_dtype(input.dtype)
    input, offset, grad_output = input.to(dtype), offset.to(dtype), grad_output.to(dtype)
    mask = None if mask is None else mask.to(dtype)
    batch, channels, height, width = input.shape
    out_channels, out_h, out_w = grad_output.shape[1:]
    taps, groups = geo.taps, geo.groups
    accumulators = _new_weight_accumulators(out_channels, channels, geo, input)
    table = input
    for chunk in _chunks(batch, step, out_h, out_w, taps * channels):
        if chunk.new_images:
            table = _table(input[chunk.images], geo.deform_groups)
        plan = _plan(
            offset[chunk.images, :, chunk.row0 : chunk.row1],
            None if mask is None else mask[chunk.images, :, chunk.row0 : chunk.row1],
            chunk.row0,
            height,
            width,
            geo,
            with_grads=False,
        )
        grad_rows = grad_output[chunk.images, :, chunk.row0 : chunk.row1]
        n = grad_rows.shape[0]
        columns = weighted_rows(table, plan.rows, plan.weight).view(n, -1, taps * channels)
        _accumulate_weight_gradient(accumulators, grad_rows, columns, taps, groups)
    return _weight_from_accumulators(accumulators, channels, geo)


class DataGradients(NamedTuple):
    input: torch.Tensor  # (n, C, H, W)
    offset: torch.Tensor  # (n, dg*2*K, H_out, W_out)
    mask: torch.Tensor | None  # (n, dg*K, H_out, W_out) when a mask was given
    weight: torch.Tensor | None  # (O, C/groups, kh, kw) when asked for


def data_gradients(
    input: torch.Tensor,
    weight: torch.Tensor,
    offset: torch.Tensor,
    mask: torch.Tensor | None,
    grad_output: torch.Tensor,
    geo: Geometry,
    step: int,
    with_weight: bool,
) -> DataGradients:
    """Gradients with respect to input, offset (and mask, and weight): col2im and col2im_coord."""
    dtype = compute_dtype(input.dtype)
    input, weight, offset = input.to(dtype), weight.to(dtype), offset.to(dtype)
    grad_output = grad_output.to(dtype)
    mask = None if mask is None else mask.to(dtype)
    batch, channels, height, width = input.shape
    out_channels, out_h, out_w = grad_output.shape[1:]
    taps, groups, dg = geo.taps, geo.groups, geo.deform_groups
    per_group_in = channels // groups
    out_per_group = out_channels // groups
    matrices = _weight_matrices(weight, groups)
    grad_input = torch.empty_like(input)
    grad_offset = torch.empty_like(offset)
    grad_mask = None if mask is None else torch.empty_like(mask)
    accumulators = _new_weight_accumulators(out_channels, channels, geo, input) if with_weight else None
    table = grad_table = input
    for chunk in _chunks(batch, step, out_h, out_w, taps * channels):
        if chunk.new_images:
            table = _table(input[chunk.images], dg)
            grad_table = torch.zeros_like(table)
        rows = chunk.row1 - chunk.row0
        plan = _plan(
            offset[chunk.images, :, chunk.row0 : chunk.row1],
            None if mask is None else mask[chunk.images, :, chunk.row0 : chunk.row1],
            chunk.row0,
            height,
            width,
            geo,
            with_grads=True,
        )
        grad_rows = grad_output[chunk.images, :, chunk.row0 : chunk.row1]
        n = grad_rows.shape[0]
        # The column gradient weight^T @ grad_output, in the gather's (position, tap, channel) order.
        if groups == 1:
            col_grad = torch.matmul(grad_rows.reshape(n, out_channels, -1).transpose(1, 2), matrices[0])
        else:
            col_grad = grad_rows.new_empty(n, rows * out_w, taps, groups, per_group_in)
            for g, matrix in enumerate(matrices):
                part = grad_rows[:, g * out_per_group : (g + 1) * out_per_group].reshape(n, out_per_group, -1)
                col_grad[:, :, :, g] = torch.matmul(part.transpose(1, 2), matrix).view(n, -1, taps, per_group_in)
        d_table, corner_dots, columns = weighted_rows_backward(
            table, plan.rows, plan.weight, col_grad.view(-1, channels // dg)
        )
        assert d_table is not None and corner_dots is not None
        if chunk.new_images:
            grad_table = d_table
        else:
            grad_table += d_table
        # (n, R, Wo, K, dg) -> the offset layout (n, dg, K, 2, R, Wo): h then w per tap.
        dots = corner_dots.view(plan.d_h.shape)
        d_offset = torch.stack(((plan.d_h * dots).sum(-1), (plan.d_w * dots).sum(-1)), -1)
        target = grad_offset[chunk.images, :, chunk.row0 : chunk.row1].view(n, dg, taps, 2, rows, out_w)
        target.copy_(d_offset.permute(0, 4, 3, 5, 1, 2))
        if grad_mask is not None:
            d_mask = (plan.bilinear * dots).sum(-1)
            grad_mask[chunk.images, :, chunk.row0 : chunk.row1].view(n, dg, taps, rows, out_w).copy_(
                d_mask.permute(0, 4, 3, 1, 2)
            )
        if accumulators is not None:
            _accumulate_weight_gradient(accumulators, grad_rows, columns.view(n, -1, taps * channels), taps, groups)
        last_chunk_of_images = chunk.row1 == out_h
        if last_chunk_of_images:
            grad_input[chunk.images] = _untable(grad_table, n, channels, height, width, dg)
    grad_weight = None if accumulators is None else _weight_from_accumulators(accumulators, channels, geo)
    return DataGradients(grad_input, grad_offset, grad_mask, grad_weight)


def _new_weight_accumulators(out_channels: int, channels: int, geo: Geometry, like: torch.Tensor) -> list[torch.Tensor]:
    groups = geo.groups
    return [like.new_zeros(out_channels // groups, geo.taps * (channels // groups)) for _ in range(groups)]


def _accumulate_weight_gradient(
    accumulators: list[torch.Tensor], grad_rows: torch.Tensor, columns: torch.Tensor, taps: int, groups: int
) -> None:
    """accumulator_g += grad_output_g (O/g, n*L) @ columns_g (n*L, taps*C/g)."""
    n, out_channels = grad_rows.shape[:2]
    out_per_group = out_channels // groups
    grad_flat = grad_rows.reshape(n, out_channels, -1)
    for g, acc in enumerate(accumulators):
        part = grad_flat[:, g * out_per_group : (g + 1) * out_per_group]
        cols = _group_columns(columns, taps, groups, g)
        acc.addmm_(part.transpose(0, 1).reshape(out_per_group, -1), cols.reshape(-1, cols.shape[-1]))


def _weight_from_accumulators(accumulators: list[torch.Tensor], channels: int, geo: Geometry) -> torch.Tensor:
    per_group = channels // geo.groups
    parts = [acc.view(acc.shape[0], geo.taps, per_group).transpose(1, 2) for acc in accumulators]
    return torch.cat(parts, 0).reshape(-1, per_group, geo.kernel_h, geo.kernel_w)
