"""Grouping (``mmcv.ops.grouping_operation``): features gathered by neighbour indices, and its gradient.

As mmcv's CUDA kernels (compiled mmcv has no CPU kernel). The plain form gathers
``points[b, c, idx[b, p, s]]``; the stacked form gathers rows of the centre's batch
item, counting indices from the item's start. The stacked forward writes only where
``idx < end of the item`` (the kernel compares the item-relative index with the
item's absolute end, so an index just past the item reads into the next one, as there)
and leaves the caller's zeros elsewhere. The backwards add the gradients up (the
kernels' ``atomicAdd``).
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, check_size

_TYPES = (torch.float16, torch.float32, torch.float64)


@torch.no_grad()
def group_points_forward(
    points_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    out_tensor: torch.Tensor,
    b: int,
    c: int,
    n: int,
    npoints: int,
    nsample: int,
) -> None:
    """``out_tensor`` (B, C, npoints, nsample) = ``points_tensor`` (B, C, N) at ``idx_tensor`` (B, npoints, nsample)."""
    op = "group_points_forward"
    check_float_types(op, _TYPES, points_tensor=points_tensor)
    for name, given, actual in (
        ("b", b, points_tensor.size(0)),
        ("c", c, points_tensor.size(1)),
        ("n", n, points_tensor.size(2)),
    ):
        check_size(op, name, given, actual)
    check_size(op, "npoints", npoints, idx_tensor.size(1))
    check_size(op, "nsample", nsample, idx_tensor.size(2))
    flat = idx_tensor.reshape(b, 1, npoints * nsample).long().expand(b, c, npoints * nsample)
    out_tensor.copy_(points_tensor.gather(2, flat).view(b, c, npoints, nsample))


@torch.no_grad()
def group_points_backward(
    grad_out_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    grad_points_tensor: torch.Tensor,
    b: int,
    c: int,
    n: int,
    npoints: int,
    nsample: int,
) -> None:
    """``grad_points_tensor`` (B, C, N) += the gradient of the grouped features, added up by index."""
    op = "group_points_backward"
    check_float_types(op, _TYPES, grad_out_tensor=grad_out_tensor)
    check_size(op, "n", n, grad_points_tensor.size(2))
    for name, given, actual in (("b", b, grad_out_tensor.size(0)), ("c", c, grad_out_tensor.size(1))):
        check_size(op, name, given, actual)
    check_size(op, "npoints", npoints, idx_tensor.size(1))
    check_size(op, "nsample", nsample, idx_tensor.size(2))
    flat = idx_tensor.reshape(b, 1, npoints * nsample).long().expand(b, c, npoints * nsample)
    grad_points_tensor.scatter_add_(
        2, flat, grad_out_tensor.reshape(b, c, npoints * nsample).to(grad_points_tensor.dtype)
    )


def _stack_rows(
    op: str, idx: torch.Tensor, idx_batch_cnt: torch.Tensor, features_batch_cnt: torch.Tensor, b: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """For each index row: the first feature row of its batch item, and the item's end."""
    check_size(op, "b", b, idx_batch_cnt.numel())
    if features_batch_cnt.numel() != b:
        raise ValueError(
            f"mmcv op `{op}`: features_batch_cnt has {features_batch_cnt.numel()} items, idx_batch_cnt {b}."
        )
    rows_per_item = idx_batch_cnt.long()
    # The kernel's item search: a row past the counted ones belongs to the last item.
    row = torch.arange(idx.size(0), device=idx.device)
    item = torch.searchsorted(torch.cumsum(rows_per_item, 0), row, right=True).clamp(max=max(b - 1, 0))
    feature_counts = features_batch_cnt.long()
    starts = torch.cumsum(feature_counts, 0) - feature_counts
    return starts[item], (starts + feature_counts)[item]


@torch.no_grad()
def stack_group_points_forward(
    features_tensor: torch.Tensor,
    features_batch_cnt_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    idx_batch_cnt_tensor: torch.Tensor,
    out_tensor: torch.Tensor,
    b: int,
    c: int,
    m: int,
    nsample: int,
) -> None:
    """``out_tensor`` (M, C, nsample) from stacked features (N1+N2+..., C) and indices (M, nsample)."""
    op = "stack_group_points_forward"
    check_float_types(op, _TYPES, features_tensor=features_tensor)
    check_size(op, "c", c, features_tensor.size(1))
    check_size(op, "m", m, idx_tensor.size(0))
    check_size(op, "nsample", nsample, idx_tensor.size(1))
    if m == 0 or b == 0:
        return
    start, end = _stack_rows(op, idx_tensor, idx_batch_cnt_tensor, features_batch_cnt_tensor, b)
    local = idx_tensor.long()
    source = start.unsqueeze(1) + local
    # Written where the item-relative index is below the item's absolute end (the kernel's test),
    # and where the row exists at all (elsewhere the kernel reads outside the tensor).
    write = (local < end.unsqueeze(1)) & (source >= 0) & (source < features_tensor.size(0))
    gathered = features_tensor[source.clamp(0, max(features_tensor.size(0) - 1, 0))]  # (M, nsample, C)
    current = out_tensor.transpose(1, 2)
    out_tensor.copy_(torch.where(write.unsqueeze(2), gathered, current).transpose(1, 2))


@torch.no_grad()
def stack_group_points_backward(
    grad_out_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    idx_batch_cnt_tensor: torch.Tensor,
    features_batch_cnt_tensor: torch.Tensor,
    grad_features_tensor: torch.Tensor,
    b: int,
    c: int,
    m: int,
    n: int,
    nsample: int,
) -> None:
    """``grad_features_tensor`` (N, C) += the gradient of the stacked grouped features (M, C, nsample)."""
    op = "stack_group_points_backward"
    check_float_types(op, _TYPES, grad_out_tensor=grad_out_tensor)
    check_size(op, "c", c, grad_out_tensor.size(1))
    check_size(op, "m", m, idx_tensor.size(0))
    check_size(op, "n", n, grad_features_tensor.size(0))
    check_size(op, "nsample", nsample, idx_tensor.size(1))
    if m == 0 or b == 0:
        return
    start, _ = _stack_rows(op, idx_tensor, idx_batch_cnt_tensor, features_batch_cnt_tensor, b)
    target = (start.unsqueeze(1) + idx_tensor.long()).reshape(-1)
    grads = grad_out_tensor.transpose(1, 2).reshape(-1, c).to(grad_features_tensor.dtype)
    grad_features_tensor.index_add_(0, target, grads)
