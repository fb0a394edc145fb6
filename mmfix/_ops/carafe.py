"""CARAFE (content-aware reassembly of features): ``carafe_forward`` / ``_backward`` and the naive pair.

Compiled mmcv has only CUDA kernels (``carafe_cuda_kernel.cuh``, ``carafe_naive_cuda_kernel.cuh``).
Both compute the same upsampling: output pixel P of channel c (group g) is
``sum_{a,b} features[c, P_h // s + a - r, P_w // s + b - r] * masks[g*k*k + a*k + b, P]`` over the
k x k window (r = (k - 1) / 2), taps outside the image skipped; the mask gradient at P is
that tap's features times the output gradient summed over the group's channels (0 for a
skipped tap), and the feature gradient gathers, for each feature pixel, the output
gradients of the k*k*s*s output pixels it fed, times the masks it fed them with.

Here both the forward and the feature gradient are fixed-size weighted gathers
(``_weighted_rows``) over channels-last (NHWC) tables whose rows are (pixel, group); the mask
gradient is the gather's weight gradient. A tap outside the image reads, with weight 0,
the row the window's centre reads (so a NaN or inf there gives the same result the kernel
gives), and its mask gradient is set to 0. Work goes image by image, in chunks of rows.

What each function leaves in its arguments, as the CUDA launchers:

* ``carafe_naive_forward`` and ``carafe_forward`` overwrite ``output``;
* ``carafe_naive_backward`` ADDS into ``bottom_grad`` and ``mask_grad`` (atomicAdd), while
  ``carafe_backward`` overwrites them (its last step is a transpose into them);
* the ``r*`` buffers are the CUDA kernels' NHWC working copies, resized as the launchers
  resize them. ``rfeatures`` (the features, NHWC) matters: mmcv's CARAFEFunction saves it
  and passes it to ``carafe_backward``, which reads the features there (as NHWC, whatever
  its shape says). ``rmasks``, ``rtop_grad``, ``rbottom_grad`` and ``rmask_grad`` are this
  implementation's tables and results, so they end up holding what the CUDA kernels leave
  in them (for float32 and float64; in half they are written from the float32 results).
  ``routput`` and ``rbottom_grad_hs`` (the CUDA kernels' high-resolution intermediates) are
  only resized: nothing reads them, and filling them would cost a copy of the output.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

import torch

from . import _deform_checks as check
from ._deform_im2col import compute_dtype
from ._weighted_rows import weighted_rows, weighted_rows_backward

#: Elements of gathered values, weights and indices built at once (32 MiB of float32).
ELEMENT_BUDGET = 1 << 23


class _Window(NamedTuple):
    """Features (batch, channels, height, width) upsampled by ``scale`` with k x k windows in groups."""

    batch: int
    channels: int
    height: int
    width: int
    k: int
    groups: int
    scale: int

    @property
    def radius(self) -> int:
        return (self.k - 1) // 2

    @property
    def out_h(self) -> int:
        return self.height * self.scale

    @property
    def out_w(self) -> int:
        return self.width * self.scale

    @property
    def per_group(self) -> int:
        return self.channels // self.groups

    @property
    def mask_channels(self) -> int:
        return self.groups * self.k * self.k


def _window(op: str, batch: int, channels: int, height: int, width: int, kernel_size: int, group_size: int,
            scale_factor: int) -> _Window:  # fmt: skip
    check.positive(op, kernel_size=kernel_size, group_size=group_size, scale_factor=scale_factor)
    if kernel_size % 2 == 0:
        raise check.fail(op, f"kernel_size is {kernel_size}", "CARAFE's reassembly window has an odd size")
    if channels % group_size:
        raise check.fail(op, f"{channels} channels in {group_size} groups", "group_size must divide the channels")
    return _Window(batch, channels, height, width, kernel_size, group_size, scale_factor)


def _check_masks(op: str, window: _Window, masks: torch.Tensor) -> None:
    expected = (window.batch, window.mask_channels, window.out_h, window.out_w)
    check.shape(op, "masks", masks, expected, "(batch, group_size * kernel_size**2, height * scale, width * scale)")


def _row_chunks(rows: int, elements_per_row: int) -> Iterator[tuple[int, int]]:
    step = max(1, ELEMENT_BUDGET // max(1, elements_per_row))
    for r0 in range(0, rows, step):
        yield r0, min(rows, r0 + step)


# --- the forward window: output pixels read k*k feature pixels ------------------------------------


def _taps(window: _Window, r0: int, r1: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """For output rows r0..r1 of one image: table rows (R*W_out*groups, k*k) and which taps are inside."""
    k, s, r, g = window.k, window.scale, window.radius, window.groups
    offsets = torch.arange(k, device=device) - r
    y = torch.div(torch.arange(r0, r1, device=device), s, rounding_mode="floor")
    x = torch.div(torch.arange(window.out_w, device=device), s, rounding_mode="floor")
    ty = y.view(-1, 1, 1, 1) + offsets.view(1, 1, k, 1)  # (R, 1, a, 1)
    tx = x.view(1, -1, 1, 1) + offsets.view(1, 1, 1, k)  # (1, W, 1, b)
    inside = (ty >= 0) & (ty < window.height) & (tx >= 0) & (tx < window.width)  # (R, W, a, b)
    centre = (y.view(-1, 1, 1, 1) * window.width + x.view(1, -1, 1, 1)).expand(inside.shape)
    pixel = torch.where(inside, ty * window.width + tx, centre).reshape(r1 - r0, window.out_w, 1, k * k)
    rows = pixel * g + torch.arange(g, device=device).view(1, 1, g, 1)
    return rows.view(-1, k * k), inside.reshape(r1 - r0, window.out_w, 1, k * k)


def _forward(window: _Window, features_nhwc: torch.Tensor, masks_nhwc: torch.Tensor, output: torch.Tensor) -> None:
    """output (NCHW) from NHWC features and masks."""
    k2, per_row = window.k * window.k, window.out_w * (window.channels + 3 * window.mask_channels)
    zero = torch.zeros((), dtype=masks_nhwc.dtype, device=masks_nhwc.device)
    for image in range(window.batch):
        table = features_nhwc[image].reshape(-1, window.per_group)
        weights = masks_nhwc[image].reshape(window.out_h, window.out_w * window.groups, k2)
        for r0, r1 in _row_chunks(window.out_h, per_row):
            rows, inside = _taps(window, r0, r1, features_nhwc.device)
            # The kernel skips taps outside the image, whatever their mask value.
            chunk_weights = torch.where(inside, weights[r0:r1].view(r1 - r0, window.out_w, window.groups, k2), zero)
            gathered = weighted_rows(table, rows, chunk_weights.view(-1, k2))
            output[image, :, r0:r1].copy_(gathered.view(r1 - r0, window.out_w, window.channels).permute(2, 0, 1))


def _mask_gradient(window: _Window, top_nhwc: torch.Tensor, features_nhwc: torch.Tensor, masks_nhwc: torch.Tensor,
                   mask_grad_nhwc: torch.Tensor) -> None:  # fmt: skip
    """mask_grad_nhwc[P, g*k*k + t] = <top grad at P, features at tap t>, over the group's channels; 0 outside."""
    k2, per_row = window.k * window.k, window.out_w * (window.channels + 3 * window.mask_channels)
    zero = torch.zeros((), dtype=mask_grad_nhwc.dtype, device=mask_grad_nhwc.device)
    for image in range(window.batch):
        table = features_nhwc[image].reshape(-1, window.per_group)
        weights = masks_nhwc[image].reshape(window.out_h, window.out_w * window.groups, k2)
        grads = top_nhwc[image].reshape(window.out_h, window.out_w * window.groups, window.per_group)
        for r0, r1 in _row_chunks(window.out_h, per_row):
            rows, inside = _taps(window, r0, r1, features_nhwc.device)
            _, dots, _ = weighted_rows_backward(
                table,
                rows,
                weights[r0:r1].reshape(-1, k2),
                grads[r0:r1].reshape(-1, window.per_group),
                need_table=False,
            )
            assert dots is not None
            dots = torch.where(inside, dots.view(r1 - r0, window.out_w, window.groups, k2), zero)
            mask_grad_nhwc[image, r0:r1] = dots.view(r1 - r0, window.out_w, window.mask_channels)


# --- the transposed window: feature pixels gather the k*k*s*s output pixels they fed ---------------


def _feature_gradient(window: _Window, top_nhwc: torch.Tensor, masks: torch.Tensor, grad_nhwc: torch.Tensor) -> None:
    """grad_nhwc (n, h, w, c): for each feature pixel, the output gradients it fed times the masks it fed them with.

    Entry (a, b, i, j) of feature pixel (y, x) is output pixel ((y - a + r) * s + i, (x - b + r) * s + j),
    which used it as tap (a, b); entries outside the output read, with weight 0, the output pixel
    (y * s, x * s) the centre tap feeds.
    """
    k, s, r, g = window.k, window.scale, window.radius, window.groups
    h, w, out_w = window.height, window.width, window.out_w
    device = top_nhwc.device
    entries = k * k * s * s
    ar_k = torch.arange(k, device=device)
    ar_s = torch.arange(s, device=device)
    per_row = w * g * (3 * entries) + w * window.channels
    for image in range(window.batch):
        table = top_nhwc[image].reshape(-1, window.per_group)
        blocks = masks[image].view(g, k, k, h, s, w, s)
        for y0, y1 in _row_chunks(h, per_row):
            weights = masks.new_zeros(y1 - y0, w, g, k, k, s, s)
            for a in range(k):
                lo, hi = max(y0, a - r), min(y1, a - r + h)
                for b in range(k):
                    x_lo, x_hi = max(0, b - r), min(w, b - r + w)
                    if lo < hi and x_lo < x_hi:
                        source = blocks[:, a, b, lo - a + r : hi - a + r, :, x_lo - b + r : x_hi - b + r, :]
                        weights[lo - y0 : hi - y0, x_lo:x_hi, :, a, b] = source.permute(1, 3, 0, 2, 4)
            src_y = torch.arange(y0, y1, device=device).view(-1, 1) - ar_k.view(1, k) + r  # (R, a)
            src_x = torch.arange(w, device=device).view(-1, 1) - ar_k.view(1, k) + r  # (W, b)
            py = (src_y.view(-1, k, 1) * s + ar_s.view(1, 1, s)).view(-1, 1, 1, k, 1, s, 1)  # (R, 1, 1, a, 1, i, 1)
            px = (src_x.view(-1, k, 1) * s + ar_s.view(1, 1, s)).view(1, w, 1, 1, k, 1, s)  # (1, W, 1, 1, b, 1, j)
            inside = (src_y.view(-1, 1, 1, k, 1, 1, 1) >= 0) & (src_y.view(-1, 1, 1, k, 1, 1, 1) < h)
            inside = inside & (src_x.view(1, w, 1, 1, k, 1, 1) >= 0) & (src_x.view(1, w, 1, 1, k, 1, 1) < w)
            ys = torch.arange(y0, y1, device=device).view(-1, 1, 1, 1, 1, 1, 1) * s
            xs = torch.arange(w, device=device).view(1, w, 1, 1, 1, 1, 1) * s
            pixel = torch.where(inside, py * out_w + px, ys * out_w + xs)
            rows = pixel * g + torch.arange(g, device=device).view(1, 1, g, 1, 1, 1, 1)
            gathered = weighted_rows(table, rows.view(-1, entries), weights.view(-1, entries))
            grad_nhwc[image, y0:y1] = gathered.view(y1 - y0, w, window.channels)


# --- the extension's functions --------------------------------------------------------------------


def carafe_naive_forward(
    features: torch.Tensor,
    masks: torch.Tensor,
    output: torch.Tensor,
    kernel_size: int,
    group_size: int,
    scale_factor: int,
) -> None:
    op = "carafe_naive_forward"
    check.same_kind(op, features=features, masks=masks, output=output)
    check.dims(op, "features", features, 4, "(batch, channels, height, width)")
    window = _window(op, *_dims(features), kernel_size, group_size, scale_factor)
    _check_masks(op, window, masks)
    target = check.view(op, "output", output, (window.batch, window.channels, window.out_h, window.out_w))
    dtype = compute_dtype(features.dtype)
    _forward(window, _nhwc(features, dtype), _nhwc(masks, dtype), target)


def carafe_naive_backward(
    top_grad: torch.Tensor,
    features: torch.Tensor,
    masks: torch.Tensor,
    bottom_grad: torch.Tensor,
    mask_grad: torch.Tensor,
    kernel_size: int,
    group_size: int,
    scale_factor: int,
) -> None:
    op = "carafe_naive_backward"
    check.same_kind(op, top_grad=top_grad, features=features, masks=masks, bottom_grad=bottom_grad, mask_grad=mask_grad)
    check.dims(op, "features", features, 4, "(batch, channels, height, width)")
    window = _window(op, *_dims(features), kernel_size, group_size, scale_factor)
    _check_masks(op, window, masks)
    check.shape(
        op, "top_grad", top_grad, (window.batch, window.channels, window.out_h, window.out_w), "that of the output"
    )
    feature_target = check.view(op, "bottom_grad", bottom_grad, features.shape)
    mask_target = check.view(op, "mask_grad", mask_grad, masks.shape)
    dtype = compute_dtype(features.dtype)
    top_nhwc, masks_nhwc = _nhwc(top_grad, dtype), _nhwc(masks, dtype)
    mask_grad_nhwc = masks_nhwc.new_empty(masks_nhwc.shape)
    _mask_gradient(window, top_nhwc, _nhwc(features, dtype), masks_nhwc, mask_grad_nhwc)
    grad_nhwc = top_nhwc.new_empty(window.batch, window.height, window.width, window.channels)
    _feature_gradient(window, top_nhwc, masks.to(dtype), grad_nhwc)
    feature_target += grad_nhwc.permute(0, 3, 1, 2)
    mask_target += mask_grad_nhwc.permute(0, 3, 1, 2)


def carafe_forward(
    features: torch.Tensor,
    masks: torch.Tensor,
    rfeatures: torch.Tensor,
    routput: torch.Tensor,
    rmasks: torch.Tensor,
    output: torch.Tensor,
    kernel_size: int,
    group_size: int,
    scale_factor: int,
) -> None:
    op = "carafe_forward"
    check.same_kind(op, features=features, masks=masks, rfeatures=rfeatures, rmasks=rmasks, output=output)
    check.dims(op, "features", features, 4, "(batch, channels, height, width)")
    window = _window(op, *_dims(features), kernel_size, group_size, scale_factor)
    _check_masks(op, window, masks)
    n, c, h, w = features.shape
    target = check.view(op, "output", output, (n, c, window.out_h, window.out_w))
    rfeatures.resize_(n, h, w, c).copy_(features.permute(0, 2, 3, 1))
    rmasks.resize_(n, window.out_h, window.out_w, window.mask_channels).copy_(masks.permute(0, 2, 3, 1))
    routput.resize_(n, window.out_h, window.out_w, c)
    dtype = compute_dtype(features.dtype)
    _forward(window, rfeatures.to(dtype), rmasks.to(dtype), target)


def carafe_backward(
    top_grad: torch.Tensor,
    rfeatures: torch.Tensor,
    masks: torch.Tensor,
    rtop_grad: torch.Tensor,
    rbottom_grad_hs: torch.Tensor,
    rbottom_grad: torch.Tensor,
    rmask_grad: torch.Tensor,
    bottom_grad: torch.Tensor,
    mask_grad: torch.Tensor,
    kernel_size: int,
    group_size: int,
    scale_factor: int,
) -> None:
    op = "carafe_backward"
    check.same_kind(op, top_grad=top_grad, rfeatures=rfeatures, masks=masks, rtop_grad=rtop_grad, rbottom_grad=rbottom_grad,
                    rmask_grad=rmask_grad, bottom_grad=bottom_grad, mask_grad=mask_grad)  # fmt: skip
    check.dims(op, "top_grad", top_grad, 4, "(batch, channels, height * scale, width * scale)")
    check.dims(op, "bottom_grad", bottom_grad, 4, "that of the features: (batch, channels, height, width)")
    n, c, h, w = bottom_grad.shape
    window = _window(op, n, c, h, w, kernel_size, group_size, scale_factor)
    _check_masks(op, window, masks)
    check.shape(op, "top_grad", top_grad, (n, c, window.out_h, window.out_w), "that of the output")
    features_nhwc = check.view(op, "rfeatures", rfeatures, (n, h, w, c))  # carafe_forward's NHWC copy
    mask_target = check.view(op, "mask_grad", mask_grad, masks.shape)
    rtop_grad.resize_(n, window.out_h, window.out_w, c).copy_(top_grad.permute(0, 2, 3, 1))
    rbottom_grad_hs.resize_(n, window.out_h, window.out_w, c)
    rbottom_grad.resize_(n, h, w, c)
    rmask_grad.resize_(n, window.out_h, window.out_w, window.mask_channels)
    dtype = compute_dtype(top_grad.dtype)
    same = dtype == top_grad.dtype
    top_nhwc = rtop_grad.to(dtype)
    mask_grad_nhwc = rmask_grad if same else rmask_grad.to(dtype)
    _mask_gradient(window, top_nhwc, features_nhwc.to(dtype), _nhwc(masks, dtype), mask_grad_nhwc)
    grad_nhwc = rbottom_grad if same else rbottom_grad.to(dtype)
    _feature_gradient(window, top_nhwc, masks.to(dtype), grad_nhwc)
    if not same:
        rmask_grad.copy_(mask_grad_nhwc)
        rbottom_grad.copy_(grad_nhwc)
    bottom_grad.copy_(rbottom_grad.permute(0, 3, 1, 2))
    mask_target.copy_(rmask_grad.permute(0, 3, 1, 2))


def _dims(features: torch.Tensor) -> tuple[int, int, int, int]:
    n, c, h, w = features.shape
    return n, c, h, w


def _nhwc(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return tensor.to(dtype).permute(0, 2, 3, 1).contiguous()
