"""``prroi_pool_forward`` / ``_backward`` / ``_coor_backward``: Precise RoI Pooling (PrRoIPool).

Each output bin is the exact integral of the bilinearly interpolated feature map over the
bin, divided by its area (0 for an empty bin); grid points outside the map count as 0.
``rois`` are (batch index, x1, y1, x2, y2) scaled by ``spatial_scale``, with no offset
and no minimum size. mmcv's CUDA kernels (float32 only; no CPU kernel) integrate cell by
cell; the integral is separable, so here it is ``A_y · feature · A_xᵀ`` per RoI with
``A`` the integrals of the hat functions of the grid points over each bin's extent (the
kernel's per-cell weights summed per grid point: the same values up to rounding).

* ``prroi_pool_backward`` adds ``grad / area · A_y[h] · A_x[w]`` into ``grad_input``;
* ``prroi_pool_coor_backward`` adds the derivative with respect to the four coordinates
  into ``grad_rois`` (the kernel's formulas: the integrals of the map along the bin's
  edges against the output value), and sets ``grad_rois[r, 0] = 0`` for RoIs with any
  nonzero ``grad / area``.

RoIs are processed in chunks so the (RoIs, C, bins, W) intermediates stay bounded.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_checks as check

#: Elements of one chunk's intermediates (RoIs × C × bins × W), 64 MiB in float32.
_CHUNK_ELEMENTS = 1 << 24
_FLOAT_ONLY = "mmcv's CUDA kernels read float32"


def _antiderivative(u: Tensor) -> Tensor:
    return u - 0.5 * u * u


def _hat_integrals(start: Tensor, end: Tensor, size: int) -> Tensor:
    """(R, P, size): the integral over [start, end] of each grid point's hat function (R, P)."""
    grid = torch.arange(size, device=start.device, dtype=start.dtype)
    a, b = start[..., None], end[..., None]
    first, last = torch.floor(a), torch.ceil(b)
    # Grid point w as the left corner of cell w ...
    as_left = (grid >= first) & (grid < last)
    u0, u1 = torch.maximum(a, grid) - grid, torch.minimum(b, grid + 1) - grid
    left = torch.where(as_left, _antiderivative(u1) - _antiderivative(u0), 0.0)
    # ... and as the right corner of cell w - 1.
    as_right = (grid - 1 >= first) & (grid - 1 < last)
    x0, x1 = torch.maximum(a, grid - 1), torch.minimum(b, grid)
    right = torch.where(as_right, _antiderivative(grid - x0) - _antiderivative(grid - x1), 0.0)
    return left + right


def _hats_at(position: Tensor, size: int) -> Tensor:
    """(R, P, size): the bilinear weights of the grid points at a coordinate (R, P)."""
    grid = torch.arange(size, device=position.device, dtype=position.dtype)
    return (1.0 - (position[..., None] - grid).abs()).clamp(min=0.0)


class _Bins:
    """Every bin's extent (R, PH) and (R, PW), as the kernels compute them."""

    def __init__(self, rois: Tensor, pooled_height: int, pooled_width: int, spatial_scale: float) -> None:
        scale = torch.tensor(spatial_scale, dtype=torch.float32).item()
        x1, y1, x2, y2 = (rois[:, i] * scale for i in range(1, 5))
        bin_w = torch.clamp(x2 - x1, min=0.0) / pooled_width
        bin_h = torch.clamp(y2 - y1, min=0.0) / pooled_height
        pw = torch.arange(pooled_width, device=rois.device, dtype=rois.dtype)
        ph = torch.arange(pooled_height, device=rois.device, dtype=rois.dtype)
        self.x1 = x1[:, None] + bin_w[:, None] * pw
        self.y1 = y1[:, None] + bin_h[:, None] * ph
        self.x2 = self.x1 + bin_w[:, None]
        self.y2 = self.y1 + bin_h[:, None]
        self.area = torch.clamp(bin_w * bin_h, min=0.0)  # (R,)
        self.batch = rois[:, 0].to(torch.int64)


def _check(op: str, input_shape: tuple[int, ...], rois: Tensor, pooled_height: int, pooled_width: int) -> None:
    if len(input_shape) != 4:
        check._fail(op, f"the feature map must be (N, C, H, W); got shape {input_shape}.")
    check.boxes(op, "rois", rois, (5,), "(batch index, x1, y1, x2, y2)")
    check.dtype(op, "rois", rois, (torch.float32,), _FLOAT_ONLY)
    if int(pooled_height) < 1 or int(pooled_width) < 1:
        check._fail(op, f"the output size must be at least 1×1; got {pooled_height}×{pooled_width}.")


def _chunks(rois: int, per_roi: int) -> list[slice]:
    step = max(1, _CHUNK_ELEMENTS // max(1, per_roi))
    return [slice(i, min(i + step, rois)) for i in range(0, rois, step)]


def _out_shape(rois: Tensor, channels: int, pooled_height: int, pooled_width: int) -> tuple[int, int, int, int]:
    return (rois.shape[0], channels, pooled_height, pooled_width)


def _expect(op: str, name: str, t: Tensor, shape: tuple[int, ...]) -> None:
    check.dtype(op, name, t, (torch.float32,), _FLOAT_ONLY)
    if tuple(t.shape) != tuple(shape):
        check._fail(op, f"`{name}` must have shape {tuple(shape)}; got {tuple(t.shape)}.")


def prroi_pool_forward(
    input: Tensor, rois: Tensor, output: Tensor, pooled_height: int, pooled_width: int, spatial_scale: float
) -> None:
    op = "prroi_pool_forward"
    _check(op, tuple(input.shape), rois, pooled_height, pooled_width)
    check.dtype(op, "input", input, (torch.float32,), _FLOAT_ONLY)
    _, channels, height, width = input.shape
    _expect(op, "output", output, _out_shape(rois, channels, pooled_height, pooled_width))
    check.same_device(op, input=input, rois=rois, output=output)
    if output.numel() == 0:
        return
    with torch.no_grad():
        bins = _Bins(rois, pooled_height, pooled_width, spatial_scale)
        a_x = _hat_integrals(bins.x1, bins.x2, width)
        a_y = _hat_integrals(bins.y1, bins.y2, height)
        for part in _chunks(rois.shape[0], channels * max(pooled_height * width, height * pooled_width)):
            features = input[bins.batch[part]]  # (r, C, H, W)
            rows = torch.einsum("rph,rchw->rcpw", a_y[part], features)
            integral = torch.einsum("rcpw,rqw->rcpq", rows, a_x[part])
            area = bins.area[part, None, None, None]
            output[part] = torch.where(area == 0, 0.0, integral / torch.where(area == 0, 1.0, area))


def _scaled_grads(grad_output: Tensor, bins: _Bins) -> Tensor:
    area = bins.area[:, None, None, None]
    return torch.where(area == 0, 0.0, grad_output / torch.where(area == 0, 1.0, area))


def prroi_pool_backward(
    grad_output: Tensor, rois: Tensor, grad_input: Tensor, pooled_height: int, pooled_width: int, spatial_scale: float
) -> None:
    op = "prroi_pool_backward"
    _check(op, tuple(grad_input.shape), rois, pooled_height, pooled_width)
    check.dtype(op, "grad_input", grad_input, (torch.float32,), _FLOAT_ONLY)
    _, channels, height, width = grad_input.shape
    _expect(op, "grad_output", grad_output, _out_shape(rois, channels, pooled_height, pooled_width))
    check.same_device(op, grad_output=grad_output, rois=rois, grad_input=grad_input)
    if grad_output.numel() == 0:
        return
    with torch.no_grad():
        bins = _Bins(rois, pooled_height, pooled_width, spatial_scale)
        a_x = _hat_integrals(bins.x1, bins.x2, width)
        a_y = _hat_integrals(bins.y1, bins.y2, height)
        grads = _scaled_grads(grad_output, bins)
        for part in _chunks(rois.shape[0], channels * max(pooled_height * width, height * width)):
            columns = torch.einsum("rcpq,rqw->rcpw", grads[part], a_x[part])
            spread = torch.einsum("rph,rcpw->rchw", a_y[part], columns)
            grad_input.index_add_(0, bins.batch[part], spread)


def prroi_pool_coor_backward(
    output: Tensor,
    grad_output: Tensor,
    input: Tensor,
    rois: Tensor,
    grad_rois: Tensor,
    pooled_height: int,
    pooled_width: int,
    spatial_scale: float,
) -> None:
    op = "prroi_pool_coor_backward"
    _check(op, tuple(input.shape), rois, pooled_height, pooled_width)
    check.dtype(op, "input", input, (torch.float32,), _FLOAT_ONLY)
    _, channels, height, width = input.shape
    shape = _out_shape(rois, channels, pooled_height, pooled_width)
    _expect(op, "output", output, shape)
    _expect(op, "grad_output", grad_output, shape)
    _expect(op, "grad_rois", grad_rois, tuple(rois.shape))
    check.same_device(op, output=output, grad_output=grad_output, input=input, rois=rois, grad_rois=grad_rois)
    if grad_output.numel() == 0:
        return
    with torch.no_grad():
        scale = torch.tensor(spatial_scale, dtype=torch.float32).item()
        bins = _Bins(rois, pooled_height, pooled_width, spatial_scale)
        a_x = _hat_integrals(bins.x1, bins.x2, width)
        a_y = _hat_integrals(bins.y1, bins.y2, height)
        scaled = _scaled_grads(grad_output, bins)
        bin_w, bin_h = bins.x2 - bins.x1, bins.y2 - bins.y1  # (R, PW), (R, PH)
        ph = torch.arange(pooled_height, device=rois.device, dtype=rois.dtype)[:, None]
        pw = torch.arange(pooled_width, device=rois.device, dtype=rois.dtype)[None, :]
        for part in _chunks(rois.shape[0], channels * max(pooled_height * width, height * pooled_width)):
            features = input[bins.batch[part]]
            rows = torch.einsum("rph,rchw->rcpw", a_y[part], features)  # integrated over each bin's rows
            cols = torch.einsum("rchw,rqw->rchq", features, a_x[part])  # integrated over each bin's columns
            # The integrals of the map along the bins' left/right and top/bottom edges.
            left = torch.einsum("rcpw,rqw->rcpq", rows, _hats_at(bins.x1[part], width))
            right = torch.einsum("rcpw,rqw->rcpq", rows, _hats_at(bins.x2[part], width))
            top = torch.einsum("rph,rchq->rcpq", _hats_at(bins.y1[part], height), cols)
            bottom = torch.einsum("rph,rchq->rcpq", _hats_at(bins.y2[part], height), cols)
            out = output[part]
            height_of_bin = bin_h[part][:, None, :, None]
            width_of_bin = bin_w[part][:, None, None, :]
            area = bins.area[part, None, None, None]
            safe_area = torch.where(area == 0, 1.0, area)
            d_x1 = (-left + height_of_bin * out) / safe_area * scale
            d_y1 = (-top + width_of_bin * out) / safe_area * scale
            d_x2 = (right - height_of_bin * out) / safe_area * scale
            d_y2 = (bottom - width_of_bin * out) / safe_area * scale
            g = grad_output[part]
            active = scaled[part] != 0  # the kernel skips elements with grad / area == 0
            g = torch.where(active, g, 0.0)
            grads = torch.stack(
                (
                    ((d_x1 * (1.0 - pw / pooled_width) + d_x2 * (1.0 - (pw + 1) / pooled_width)) * g).sum((1, 2, 3)),
                    ((d_y1 * (1.0 - ph / pooled_height) + d_y2 * (1.0 - (ph + 1) / pooled_height)) * g).sum((1, 2, 3)),
                    ((d_x2 * (pw + 1) / pooled_width + d_x1 * pw / pooled_width) * g).sum((1, 2, 3)),
                    ((d_y2 * (ph + 1) / pooled_height + d_y1 * ph / pooled_height) * g).sum((1, 2, 3)),
                ),
                1,
            )
            grad_rois[part, 1:] += grads
            touched = active.flatten(1).any(1)
            grad_rois[part, 0] = torch.where(touched, 0.0, grad_rois[part, 0])
