"""CARAFE (content-aware reassembly of features): ``carafe_forward`` / ``_backward`` and the naive pair.

Compiled mmcv has only CUDA kernels (``carafe_cuda_kernel.cuh``, ``carafe_naive_cuda_kernel.cuh``).
Both compute the same upsampling: output pixel P of channel c (group g) is
``sum_{a,b} features[c, P_h // s + a - r, P_w // s + b - r] * masks[g*k*k + a*k + b, P]`` over the
k x k window (r = (k - 1) / 2), taps outside the image skipped; the mask gradient at P is
that tap's features times the output gradient summed over the group's channels, and the
feature gradient scatters each output gradient back through the same window.

Here the window is one fixed-size weighted gather (``_weighted_rows``: k*k rows of a zero-
padded channels-last copy of the features, weighted by the mask) per output pixel and
group, in chunks of output rows; its autograd is the backward.

What each function leaves in its arguments, as the CUDA launchers:

* ``carafe_naive_forward`` and ``carafe_forward`` overwrite ``output``;
* ``carafe_naive_backward`` ADDS into ``bottom_grad`` and ``mask_grad`` (atomicAdd), while
  ``carafe_backward`` overwrites them (its last step is a transpose into them);
* ``carafe_forward``'s ``rfeatures`` is not scratch: the CUDA launcher leaves the features
  there in NHWC layout (resized to (n, h, w, c)), mmcv's CARAFEFunction saves it and hands it
  to ``carafe_backward`` as ``rfeatures``, which reads the features from it. So it is filled
  the same way here, and ``carafe_backward`` reads its ``rfeatures`` as NHWC.
* The other ``r*`` buffers (``routput``, ``rmasks``; ``rtop_grad``, ``rbottom_grad_hs``,
  ``rbottom_grad``, ``rmask_grad``) are the CUDA kernels' NHWC working copies, which nothing
  reads afterwards: they are resized to the shapes the launchers give them, and their
  contents are left as they were (mmcv passes zeros) rather than spending a copy of the
  output on them.
"""

from __future__ import annotations

from typing import Iterator

import torch

from . import _deform_checks as check
from ._deform_im2col import compute_dtype
from ._weighted_rows import weighted_rows, weighted_rows_backward

#: Elements of gathered output and index built at once (32 MiB of float32 values).
ELEMENT_BUDGET = 1 << 23


class _Window:
    """The geometry of one call: features (n, c, h, w) upsampled by s with k x k windows in g groups."""

    def __init__(self, op: str, batch: int, channels: int, height: int, width: int, kernel_size: int, group_size: int,
                 scale_factor: int) -> None:  # fmt: skip
        check.positive(op, kernel_size=kernel_size, group_size=group_size, scale_factor=scale_factor)
        if kernel_size % 2 == 0:
            raise check.fail(op, f"kernel_size is {kernel_size}", "CARAFE's reassembly window has an odd size")
        if channels % group_size:
            raise check.fail(op, f"{channels} channels in {group_size} groups", "group_size must divide the channels")
        self.batch, self.channels, self.height, self.width = batch, channels, height, width
        self.k, self.groups, self.scale = kernel_size, group_size, scale_factor
        self.radius = (kernel_size - 1) // 2
        self.out_h, self.out_w = height * scale_factor, width * scale_factor
        self.per_group = channels // group_size
        self.mask_channels = group_size * kernel_size * kernel_size

    def check_masks(self, op: str, masks: torch.Tensor) -> None:
        expected = (self.batch, self.mask_channels, self.out_h, self.out_w)
        check.shape(op, "masks", masks, expected, "(batch, group_size * kernel_size**2, height * scale, width * scale)")

    def table(self, features_nhwc: torch.Tensor) -> torch.Tensor:
        """Rows (image, group, y + r, x + r) of the zero-padded features, channels of the group as columns."""
        r, n, g = self.radius, self.batch, self.groups
        table = features_nhwc.new_zeros(n, g, self.height + 2 * r, self.width + 2 * r, self.per_group)
        grouped = features_nhwc.view(n, self.height, self.width, g, self.per_group).permute(0, 3, 1, 2, 4)
        table[:, :, r : r + self.height, r : r + self.width].copy_(grouped)
        return table.view(-1, self.per_group)

    def features_from_table(self, table: torch.Tensor) -> torch.Tensor:
        """(n, c, h, w) from a table's interior."""
        r, n, g = self.radius, self.batch, self.groups
        padded = table.view(n, g, self.height + 2 * r, self.width + 2 * r, self.per_group)
        interior = padded[:, :, r : r + self.height, r : r + self.width]
        return interior.permute(0, 1, 4, 2, 3).reshape(n, self.channels, self.height, self.width)

    def row_chunks(self) -> Iterator[tuple[int, int]]:
        per_row = max(1, self.batch * self.out_w * (self.channels + 3 * self.mask_channels))
        rows = max(1, ELEMENT_BUDGET // per_row)
        for r0 in range(0, self.out_h, rows):
            yield r0, min(self.out_h, r0 + rows)

    def rows(self, r0: int, r1: int, device: torch.device) -> torch.Tensor:
        """Table rows of every tap, (n * R * W_out * groups, k*k), for output rows r0..r1."""
        n, g, k, s = self.batch, self.groups, self.k, self.scale
        padded_h, padded_w = self.height + 2 * self.radius, self.width + 2 * self.radius
        block = (torch.arange(n, device=device).view(n, 1) * g + torch.arange(g, device=device)) * (padded_h * padded_w)
        y = torch.div(torch.arange(r0, r1, device=device), s, rounding_mode="floor")
        x = torch.div(torch.arange(self.out_w, device=device), s, rounding_mode="floor")
        taps = (torch.arange(k, device=device).view(k, 1) * padded_w + torch.arange(k, device=device)).view(-1)
        top_left = (y * padded_w).view(1, -1, 1, 1, 1) + x.view(1, 1, -1, 1, 1) + block.view(n, 1, 1, g, 1)
        return (top_left + taps).view(-1, k * k)

    def weights(self, masks: torch.Tensor, r0: int, r1: int, dtype: torch.dtype) -> torch.Tensor:
        """The masks of output rows r0..r1 as (n * R * W_out * groups, k*k), in ``rows`` order."""
        return masks[:, :, r0:r1].to(dtype).permute(0, 2, 3, 1).reshape(-1, self.k * self.k)


def _forward(window: _Window, features_nhwc: torch.Tensor, masks: torch.Tensor, output: torch.Tensor) -> None:
    dtype = features_nhwc.dtype
    table = window.table(features_nhwc)
    for r0, r1 in window.row_chunks():
        gathered = weighted_rows(table, window.rows(r0, r1, masks.device), window.weights(masks, r0, r1, dtype))
        output[:, :, r0:r1].copy_(
            gathered.view(window.batch, r1 - r0, window.out_w, window.channels).permute(0, 3, 1, 2)
        )


def _backward(
    window: _Window, top_grad: torch.Tensor, features_nhwc: torch.Tensor, masks: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(d features (n, c, h, w), d masks (n, G*k*k, H, W)) in the compute dtype."""
    dtype = features_nhwc.dtype
    table = window.table(features_nhwc)
    d_table = torch.zeros_like(table)
    d_masks = masks.new_empty(masks.shape, dtype=dtype)
    k2 = window.k * window.k
    for r0, r1 in window.row_chunks():
        grad_rows = top_grad[:, :, r0:r1].to(dtype).permute(0, 2, 3, 1).reshape(-1, window.per_group)
        chunk_table, dots, _ = weighted_rows_backward(
            table, window.rows(r0, r1, masks.device), window.weights(masks, r0, r1, dtype), grad_rows
        )
        assert chunk_table is not None and dots is not None
        d_table += chunk_table
        rows = r1 - r0
        d_masks[:, :, r0:r1] = dots.view(window.batch, rows, window.out_w, window.groups * k2).permute(0, 3, 1, 2)
    return window.features_from_table(d_table), d_masks


def _window(op: str, features: torch.Tensor, kernel_size: int, group_size: int, scale_factor: int) -> _Window:
    check.dims(op, "features", features, 4, "(batch, channels, height, width)")
    n, c, h, w = features.shape
    return _Window(op, n, c, h, w, kernel_size, group_size, scale_factor)


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
    window = _window(op, features, kernel_size, group_size, scale_factor)
    window.check_masks(op, masks)
    target = check.view(op, "output", output, (window.batch, window.channels, window.out_h, window.out_w))
    dtype = compute_dtype(features.dtype)
    _forward(window, features.to(dtype).permute(0, 2, 3, 1), masks, target)


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
    window = _window(op, features, kernel_size, group_size, scale_factor)
    window.check_masks(op, masks)
    check.shape(
        op, "top_grad", top_grad, (window.batch, window.channels, window.out_h, window.out_w), "that of the output"
    )
    feature_target = check.view(op, "bottom_grad", bottom_grad, features.shape)
    mask_target = check.view(op, "mask_grad", mask_grad, masks.shape)
    dtype = compute_dtype(features.dtype)
    d_features, d_masks = _backward(window, top_grad, features.to(dtype).permute(0, 2, 3, 1), masks)
    feature_target += d_features
    mask_target += d_masks


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
    check.same_kind(op, features=features, masks=masks, rfeatures=rfeatures, output=output)
    window = _window(op, features, kernel_size, group_size, scale_factor)
    window.check_masks(op, masks)
    n, c, h, w = features.shape
    target = check.view(op, "output", output, (n, c, window.out_h, window.out_w))
    # The launcher's NHWC buffers: rfeatures holds the features (carafe_backward reads them there);
    # routput and rmasks are only resized (see the module docstring).
    rfeatures.resize_(n, h, w, c).copy_(features.permute(0, 2, 3, 1))
    routput.resize_(n, window.out_h, window.out_w, c)
    rmasks.resize_(n, window.out_h, window.out_w, window.mask_channels)
    dtype = compute_dtype(features.dtype)
    _forward(window, rfeatures.to(dtype), masks, target)


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
    check.same_kind(
        op, top_grad=top_grad, rfeatures=rfeatures, masks=masks, bottom_grad=bottom_grad, mask_grad=mask_grad
    )
    check.dims(op, "top_grad", top_grad, 4, "(batch, channels, height * scale, width * scale)")
    check.dims(op, "bottom_grad", bottom_grad, 4, "that of the features: (batch, channels, height, width)")
    n, c, h, w = bottom_grad.shape
    window = _Window(op, n, c, h, w, kernel_size, group_size, scale_factor)
    window.check_masks(op, masks)
    check.shape(op, "top_grad", top_grad, (n, c, window.out_h, window.out_w), "that of the output")
    # As the launcher: rfeatures is carafe_forward's NHWC copy of the features, whatever its shape says.
    features_nhwc = check.view(op, "rfeatures", rfeatures, (n, h, w, c))
    mask_target = check.view(op, "mask_grad", mask_grad, masks.shape)
    rtop_grad.resize_(n, window.out_h, window.out_w, c)
    rbottom_grad.resize_(n, h, w, c)
    rbottom_grad_hs.resize_(n, window.out_h, window.out_w, c)
    rmask_grad.resize_(n, window.out_h, window.out_w, window.mask_channels)
    dtype = compute_dtype(rfeatures.dtype)
    d_features, d_masks = _backward(window, top_grad, features_nhwc.to(dtype), masks)
    bottom_grad.copy_(d_features)
    mask_target.copy_(d_masks)
