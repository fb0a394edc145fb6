"""Dynamic scatter (``mmcv.ops.DynamicScatter``): point features reduced into their voxels.

As mmcv's CUDA kernel (``scatter_points_cuda.cu``; compiled mmcv has no CPU kernel):
a point with any negative coordinate belongs to no voxel; the voxels are the unique
coordinate rows, sorted (``unique_dim``); ``sum`` and ``mean`` add the features (mean
then divides by the count), ``max`` takes ``fmaxf`` of them (a NaN never wins). The
backward of ``max`` sends each voxel channel's gradient to the first point (lowest
index) whose feature equals the maximum; ``mean`` divides by the voxel's count.
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types

_REDUCE_TYPES = ("sum", "mean", "max")
_FEATURE_TYPES = (torch.float32, torch.float64)


def _check_reduce(op: str, reduce_type: str) -> None:
    if reduce_type not in _REDUCE_TYPES:
        raise ValueError(f"mmcv op `{op}`: reduce_type must be one of {', '.join(_REDUCE_TYPES)}, got {reduce_type!r}.")


@torch.no_grad()
def dynamic_point_to_voxel_forward(feats: torch.Tensor, coors: torch.Tensor, reduce_type: str) -> list[torch.Tensor]:
    """``[voxel_feats (M, C), voxel_coors (M, D), point2voxel_map (N,) int32, voxel_points_count (M,) int32]``."""
    op = "dynamic_point_to_voxel_forward"
    _check_reduce(op, reduce_type)
    check_float_types(op, _FEATURE_TYPES, feats=feats)
    if feats.dim() != 2 or coors.dim() != 2 or feats.size(0) != coors.size(0):
        raise ValueError(
            f"mmcv op `{op}`: expected feats (N, C) and coors (N, D) with the same N, got "
            f"{tuple(feats.shape)} and {tuple(coors.shape)}."
        )
    if feats.size(0) == 0:
        empty = coors.new_empty((0,), dtype=torch.int32)
        return [feats.clone().detach(), coors.clone().detach(), empty, empty.clone()]

    clean = coors.masked_fill(coors.lt(0).any(-1, True), -1)
    voxel_coors, point2voxel, counts = torch.unique(clean, dim=0, sorted=True, return_inverse=True, return_counts=True)
    if bool(voxel_coors[0, 0] < 0):  # the row of -1s: points in no voxel
        voxel_coors, counts, point2voxel = voxel_coors[1:], counts[1:], point2voxel - 1
    point2voxel = point2voxel.to(torch.int32)
    counts = counts.to(torch.int32)

    valid = point2voxel >= 0
    target = point2voxel[valid].long()
    source = feats[valid]
    num_voxels, channels = voxel_coors.size(0), feats.size(1)
    if reduce_type == "max":
        # fmaxf ignores NaN: a NaN feature never becomes the maximum.
        source = torch.where(torch.isnan(source), torch.full_like(source, float("-inf")), source)
        reduced = feats.new_full((num_voxels, channels), float("-inf"))
        reduced.scatter_reduce_(0, target.unsqueeze(1).expand_as(source), source, reduce="amax")
    else:
        reduced = feats.new_zeros((num_voxels, channels)).index_add_(0, target, source)
        if reduce_type == "mean":
            reduced /= counts.unsqueeze(-1).to(reduced.dtype)
    return [reduced, voxel_coors, point2voxel, counts]


@torch.no_grad()
def dynamic_point_to_voxel_backward(
    grad_feats: torch.Tensor,
    grad_reduced_feats: torch.Tensor,
    feats: torch.Tensor,
    reduced_feats: torch.Tensor,
    coors_idx: torch.Tensor,
    reduce_count: torch.Tensor,
    reduce_type: str,
) -> None:
    """The gradient of the points' features, written into ``grad_feats`` (N, C)."""
    op = "dynamic_point_to_voxel_backward"
    _check_reduce(op, reduce_type)
    check_float_types(op, _FEATURE_TYPES, grad_reduced_feats=grad_reduced_feats)
    grad_feats.fill_(0)
    num_points, num_voxels = feats.size(0), reduced_feats.size(0)
    if num_points == 0 or num_voxels == 0:
        return
    valid = coors_idx >= 0
    points = valid.nonzero().squeeze(1)
    voxel = coors_idx[points].long()
    if reduce_type == "sum":
        grad_feats[points] = grad_reduced_feats[voxel]
    elif reduce_type == "mean":
        grad_feats[points] = grad_reduced_feats[voxel] / reduce_count[voxel].unsqueeze(1).to(grad_feats.dtype)
    else:
        channels = feats.size(1)
        is_max = feats[points] == reduced_feats[voxel]
        candidate = torch.where(is_max, points.unsqueeze(1), torch.full_like(is_max, num_points, dtype=torch.long))
        winner = torch.full((num_voxels, channels), num_points, dtype=torch.long, device=feats.device)
        winner.scatter_reduce_(0, voxel.unsqueeze(1).expand_as(candidate), candidate, reduce="amin")
        has_winner = winner < num_points  # a voxel channel of NaNs has none (the kernel writes out of bounds)
        channel = torch.arange(channels, device=feats.device).expand_as(winner)
        grad_feats.view(-1)[(winner * channels + channel)[has_winner]] = grad_reduced_feats[has_winner].to(
            grad_feats.dtype
        )
