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

#: Largest column matrix (elements) built at once: 32 MiB in float32. The backward holds about
#: three matrices of this size at a time (column gradient, gathered columns, the gather's
#: bookkeeping); GEMMs of this many rows run at full speed.
COLUMN_BUDGET = 1 << 23


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
    # Corners in the padded image, from the top left (h_low + 1, w_low + 1); all four corners of a
    # point outside read the block's zero corner (0, 0), so even an inf or NaN pixel adds nothing.
    block = torch.arange(n, device=device).view(n, 1, 1, 1, 1) * dg + torch.arange(dg, device=device)
    block_start = block * ((height + 2) * padded_w)
    top_left = block_start + (h_low.long() + 1) * padded_w + (w_low.long() + 1)
    corners = torch.tensor([0, 1, padded_w, padded_w + 1], device=device)
    index = torch.where(inside.unsqueeze(-1), top_left.unsqueeze(-1) + corners, block_start.unsqueeze(-1)).view(-1, 4)
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
    first: bool  # the first chunk of its image group
    last: bool  # the last chunk of its image group


class _Call:
    """One call's tensors in the compute dtype, cut into chunks of images and output rows.

    Each chunk's work is a method call, so its temporaries (columns, column gradient,
    gather bookkeeping) are freed before the next chunk allocates its own.
    """

    def __init__(
        self,
        input: torch.Tensor,
        offset: torch.Tensor,
        mask: torch.Tensor | None,
        out_size: tuple[int, int],
        geo: Geometry,
        step: int,
    ) -> None:
        self.dtype = compute_dtype(input.dtype)
        self.input = input.to(self.dtype)
        self.offset = offset.to(self.dtype)
        self.mask = None if mask is None else mask.to(self.dtype)
        self.geo = geo
        self.step = step
        self.batch, self.channels, self.height, self.width = input.shape
        self.out_h, self.out_w = out_size
        self._table: torch.Tensor | None = None

    @property
    def row_elements(self) -> int:
        return self.geo.taps * self.channels

    def chunks(self) -> Iterator[_Chunk]:
        rows = max(1, COLUMN_BUDGET // max(1, self.step * self.out_w * self.row_elements))
        for b0 in range(0, self.batch, self.step):
            for r0 in range(0, self.out_h, rows):
                r1 = min(self.out_h, r0 + rows)
                yield _Chunk(slice(b0, b0 + self.step), r0, r1, r0 == 0, r1 == self.out_h)

    def table(self, chunk: _Chunk) -> torch.Tensor:
        if chunk.first or self._table is None:
            self._table = _table(self.input[chunk.images], self.geo.deform_groups)
        return self._table

    def plan(self, chunk: _Chunk, with_grads: bool) -> _Plan:
        rows = slice(chunk.row0, chunk.row1)
        mask = None if self.mask is None else self.mask[chunk.images, :, rows]
        offset = self.offset[chunk.images, :, rows]
        return _plan(offset, mask, chunk.row0, self.height, self.width, self.geo, with_grads)

    def columns(self, chunk: _Chunk, plan: _Plan) -> torch.Tensor:
        """The chunk's column matrix, (images, positions, taps * channels)."""
        n = len(range(self.batch)[chunk.images])
        return weighted_rows(self.table(chunk), plan.rows, plan.weight).view(n, -1, self.row_elements)


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
    call = _Call(input, offset, mask, (out.shape[2], out.shape[3]), geo, step)
    matrices = _weight_matrices(weight.to(call.dtype), geo.groups)
    for chunk in call.chunks():
        _forward_chunk(call, chunk, matrices, out)


def _forward_chunk(call: _Call, chunk: _Chunk, matrices: list[torch.Tensor], out: torch.Tensor) -> None:
    columns = call.columns(chunk, call.plan(chunk, with_grads=False))
    out_per_group = matrices[0].shape[0]
    for g, matrix in enumerate(matrices):
        result = torch.matmul(matrix, _group_columns(columns, call.geo.taps, call.geo.groups, g).transpose(1, 2))
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
    call = _Call(input, offset, mask, (grad_output.shape[2], grad_output.shape[3]), geo, step)
    grad_output = grad_output.to(call.dtype)
    accumulators = _new_weight_accumulators(grad_output.shape[1], call)
    for chunk in call.chunks():
        columns = call.columns(chunk, call.plan(chunk, with_grads=False))
        _accumulate_weight_gradient(accumulators, _rows(grad_output, chunk), columns, call.geo)
        del columns
    return _weight_from_accumulators(accumulators, call)


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
    call = _Call(input, offset, mask, (grad_output.shape[2], grad_output.shape[3]), geo, step)
    grad_output = grad_output.to(call.dtype)
    matrices = _weight_matrices(weight.to(call.dtype), geo.groups)
    grads = DataGradients(
        torch.empty_like(call.input),
        torch.empty_like(call.offset),
        None if call.mask is None else torch.empty_like(call.mask),
        None,
    )
    accumulators = _new_weight_accumulators(grad_output.shape[1], call) if with_weight else None
    grad_table = None
    for chunk in call.chunks():
        d_table = _data_chunk(call, chunk, matrices, _rows(grad_output, chunk), grads, accumulators)
        if grad_table is None or chunk.first:
            grad_table = d_table
        else:
            grad_table += d_table
        del d_table
        if chunk.last:
            n = len(range(call.batch)[chunk.images])
            grads.input[chunk.images] = _untable(
                grad_table, n, call.channels, call.height, call.width, geo.deform_groups
            )
    if accumulators is not None:
        grads = grads._replace(weight=_weight_from_accumulators(accumulators, call))
    return grads


def _rows(tensor: torch.Tensor, chunk: _Chunk) -> torch.Tensor:
    return tensor[chunk.images, :, chunk.row0 : chunk.row1]


def _data_chunk(
    call: _Call,
    chunk: _Chunk,
    matrices: list[torch.Tensor],
    grad_rows: torch.Tensor,
    grads: DataGradients,
    accumulators: list[torch.Tensor] | None,
) -> torch.Tensor:
    """One chunk's gradients: writes grad offset (and mask, and accumulates the weight's); returns d table."""
    geo = call.geo
    taps, groups, dg = geo.taps, geo.groups, geo.deform_groups
    n, out_channels, rows, out_w = grad_rows.shape
    plan = call.plan(chunk, with_grads=True)
    # The column gradient weight^T @ grad_output, in the gather's (position, tap, channel) order.
    if groups == 1:
        col_grad = torch.matmul(grad_rows.reshape(n, out_channels, -1).transpose(1, 2), matrices[0])
    else:
        out_per_group, per_group_in = out_channels // groups, call.channels // groups
        col_grad = grad_rows.new_empty(n, rows * out_w, taps, groups, per_group_in)
        for g, matrix in enumerate(matrices):
            part = grad_rows[:, g * out_per_group : (g + 1) * out_per_group].reshape(n, out_per_group, -1)
            col_grad[:, :, :, g] = torch.matmul(part.transpose(1, 2), matrix).view(n, -1, taps, per_group_in)
    d_table, corner_dots, columns = weighted_rows_backward(
        call.table(chunk), plan.rows, plan.weight, col_grad.view(-1, call.channels // dg)
    )
    del col_grad
    assert d_table is not None and corner_dots is not None
    # (n, R, Wo, K, dg) -> the offset layout (n, dg, K, 2, R, Wo): h then w per tap.
    dots = corner_dots.view(plan.d_h.shape)
    d_offset = torch.stack(((plan.d_h * dots).sum(-1), (plan.d_w * dots).sum(-1)), -1)
    _rows(grads.offset, chunk).view(n, dg, taps, 2, rows, out_w).copy_(d_offset.permute(0, 4, 3, 5, 1, 2))
    if grads.mask is not None:
        d_mask = (plan.bilinear * dots).sum(-1)
        _rows(grads.mask, chunk).view(n, dg, taps, rows, out_w).copy_(d_mask.permute(0, 4, 3, 1, 2))
    if accumulators is not None:
        _accumulate_weight_gradient(accumulators, grad_rows, columns.view(n, -1, call.row_elements), geo)
    return d_table


def _new_weight_accumulators(out_channels: int, call: _Call) -> list[torch.Tensor]:
    groups = call.geo.groups
    width = call.geo.taps * (call.channels // groups)
    return [call.input.new_zeros(out_channels // groups, width) for _ in range(groups)]


def _accumulate_weight_gradient(
    accumulators: list[torch.Tensor], grad_rows: torch.Tensor, columns: torch.Tensor, geo: Geometry
) -> None:
    """accumulator_g += grad_output_g (O/g, n*L) @ columns_g (n*L, taps*C/g)."""
    n, out_channels = grad_rows.shape[:2]
    out_per_group = out_channels // geo.groups
    grad_flat = grad_rows.reshape(n, out_channels, -1)
    for g, acc in enumerate(accumulators):
        part = grad_flat[:, g * out_per_group : (g + 1) * out_per_group]
        cols = _group_columns(columns, geo.taps, geo.groups, g)
        acc.addmm_(part.transpose(0, 1).reshape(out_per_group, -1), cols.reshape(-1, cols.shape[-1]))


def _weight_from_accumulators(accumulators: list[torch.Tensor], call: _Call) -> torch.Tensor:
    geo = call.geo
    per_group = call.channels // geo.groups
    parts = [acc.view(acc.shape[0], geo.taps, per_group).transpose(1, 2) for acc in accumulators]
    return torch.cat(parts, 0).reshape(-1, per_group, geo.kernel_h, geo.kernel_w)
