"""RoI-aware 3D pooling (``mmcv.ops.RoIAwarePool3d``, PartA2): point features pooled into each box's voxel grid.

As mmcv's CUDA kernels (compiled mmcv has no CPU kernel):

* a point inside a box (the ``points_in_boxes`` test) falls in voxel
  ``int((local + size / 2) / (size / out))`` per axis (z from the box's bottom), each
  clamped to ``[0, out - 1]``, in the inputs' type;
* each voxel records its first ``max_pts_each_voxel - 1`` points in point order:
  ``pts_idx_of_voxels[..., 0]`` is the count, ``[..., 1:count + 1]`` the indices;
* ``max`` pooling takes, per channel, the first recorded point with the largest value
  (strictly larger wins; NaN and -inf never do); ``argmax`` is -1 for a voxel with no
  such point, whose pooled value keeps the caller's zero; ``avg`` divides the float sum
  by the count;
* the backwards send ``grad_out`` to the argmax point, or ``grad_out / max(count, 1)``
  to every recorded point.
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, points_in_boxes, slabs

_TYPES = (torch.float16, torch.float32, torch.float64)
_MAX_POOL, _AVG_POOL = 0, 1


def _check_method(op: str, pool_method: int) -> None:
    if pool_method not in (_MAX_POOL, _AVG_POOL):
        raise ValueError(f"mmcv op `{op}`: pool_method must be 0 (max) or 1 (avg), got {pool_method}.")


def _voxel_of_points(
    rois: torch.Tensor, pts: torch.Tensor, grid: tuple[int, int, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(box, point, flat voxel) of every point inside each box, sorted by box then point."""
    inside, local_x, local_y = points_in_boxes(pts[None], rois[None])
    inside, local_x, local_y = inside[0], local_x[0], local_y[0]
    box, point = inside.nonzero(as_tuple=True)
    local_x, local_y = local_x[box, point], local_y[box, point]
    roi = rois[box]
    local_z = pts[point, 2] - roi[:, 2]
    cells = []
    for local, size, out in ((local_x, roi[:, 3], grid[0]), (local_y, roi[:, 4], grid[1])):
        cells.append(((local + size / 2) / (size / out)).trunc())
    cells.append((local_z / (roi[:, 5] / grid[2])).trunc())
    flat = torch.zeros_like(box)
    for cell, out in zip(cells, grid):
        # int() truncates toward zero; inside the box the value is >= 0 (a rounding -0.x truncates to 0).
        flat = flat * out + cell.clamp(0, out - 1).long()
    return box, point, flat


@torch.no_grad()
def roiaware_pool3d_forward(
    rois: torch.Tensor,
    pts: torch.Tensor,
    pts_feature: torch.Tensor,
    argmax: torch.Tensor,
    pts_idx_of_voxels: torch.Tensor,
    pooled_features: torch.Tensor,
    pool_method: int,
) -> None:
    """Pool ``pts_feature`` (P, C) of ``pts`` (P, 3) into ``pooled_features`` (N, ox, oy, oz, C) per box of ``rois`` (N, 7)."""
    op = "roiaware_pool3d_forward"
    _check_method(op, pool_method)
    check_float_types(op, _TYPES, rois=rois, pts=pts, pts_feature=pts_feature)
    num_boxes, _, _, _, max_pts = pts_idx_of_voxels.shape
    grid = (pts_idx_of_voxels.size(1), pts_idx_of_voxels.size(2), pts_idx_of_voxels.size(3))
    if max(grid) >= 256:
        raise ValueError(
            f"mmcv op `{op}`: out_size {grid} is too large: mmcv's kernel encodes each voxel index in 8 bits, "
            "so every side must be below 256."
        )
    channels = pts_feature.size(1)
    voxels_per_box = grid[0] * grid[1] * grid[2]
    counter = pts_idx_of_voxels.view(num_boxes * voxels_per_box, max_pts)
    pooled = pooled_features.view(num_boxes * voxels_per_box, channels)
    winners = argmax.view(num_boxes * voxels_per_box, channels)
    if pool_method == _MAX_POOL:
        winners.fill_(-1)
    num_points = pts.size(0)
    # A slab of boxes holds (boxes x points) tests and (boxes x voxels x channels) maxima.
    for boxes in slabs(num_boxes, max(num_points, voxels_per_box * channels, 1)):
        rows = slice(boxes.start * voxels_per_box, boxes.stop * voxels_per_box)
        box, point, flat = _voxel_of_points(rois[boxes], pts, grid)
        voxel = box * voxels_per_box + flat  # within this slab of boxes
        # Each point's rank among its voxel's points, in point order (pairs come sorted by box, point).
        sorted_voxel, by_voxel = torch.sort(voxel, stable=True)
        starts = torch.ones_like(sorted_voxel, dtype=torch.bool)
        starts[1:] = sorted_voxel[1:] != sorted_voxel[:-1]
        position = torch.arange(voxel.numel(), device=voxel.device)
        group_start = torch.cummax(torch.where(starts, position, 0), 0).values
        rank = torch.empty_like(voxel)
        rank[by_voxel] = position - group_start
        recorded = rank < max_pts - 1
        voxel, point, rank = voxel[recorded], point[recorded], rank[recorded]
        slab_counter = counter[rows]
        slab_counter[voxel, rank + 1] = point.to(counter.dtype)
        counts = torch.bincount(voxel, minlength=slab_counter.size(0))
        slab_counter[:, 0] = counts.to(counter.dtype)
        if voxel.numel() == 0:
            continue
        features = pts_feature[point]
        if pool_method == _MAX_POOL:
            _max_pool(features, voxel, point, pooled[rows], winners[rows], num_points)
        else:
            sums = torch.zeros((slab_counter.size(0), channels), dtype=torch.float32, device=pts.device)
            sums.index_add_(0, voxel, features.float())
            filled = (counts > 0).nonzero().squeeze(1)
            averages = sums[filled] / counts[filled].unsqueeze(1).float()
            pooled[rows][filled] = averages.to(pooled.dtype)


def _max_pool(
    features: torch.Tensor,
    voxel: torch.Tensor,
    point: torch.Tensor,
    pooled: torch.Tensor,
    winners: torch.Tensor,
    num_points: int,
) -> None:
    # Strictly-larger-wins from -inf: NaN and -inf never win.
    usable = torch.where(torch.isnan(features), torch.full_like(features, float("-inf")), features)
    best = torch.full((pooled.size(0), features.size(1)), float("-inf"), dtype=features.dtype, device=features.device)
    index = voxel.unsqueeze(1).expand_as(usable)
    best.scatter_reduce_(0, index, usable, reduce="amax")
    is_best = (usable == best[voxel]) & (usable > float("-inf"))
    candidate = torch.where(is_best, point.unsqueeze(1), torch.full_like(index, num_points))
    first = torch.full(best.shape, num_points, dtype=torch.long, device=features.device)
    first.scatter_reduce_(0, index, candidate, reduce="amin")  # recorded in point order: the first is the lowest
    found = first < num_points
    winners.copy_(torch.where(found, first.to(winners.dtype), winners))
    pooled.copy_(torch.where(found, best.to(pooled.dtype), pooled))


@torch.no_grad()
def roiaware_pool3d_backward(
    pts_idx_of_voxels: torch.Tensor,
    argmax: torch.Tensor,
    grad_out: torch.Tensor,
    grad_in: torch.Tensor,
    pool_method: int,
) -> None:
    """``grad_in`` (P, C) += the gradient of the pooled features ``grad_out`` (N, ox, oy, oz, C)."""
    op = "roiaware_pool3d_backward"
    _check_method(op, pool_method)
    check_float_types(op, _TYPES, grad_out=grad_out)
    channels = grad_out.size(-1)
    grads = grad_out.reshape(-1, channels)
    if pool_method == _MAX_POOL:
        winners = argmax.reshape(-1, channels).long()
        has = winners >= 0
        channel = torch.arange(channels, device=grad_out.device).expand_as(winners)
        grad_in.view(-1).index_add_(0, (winners * channels + channel)[has], grads[has].to(grad_in.dtype))
        return
    counter = pts_idx_of_voxels.reshape(-1, pts_idx_of_voxels.size(-1))
    counts = counter[:, 0].long()
    # cur_grad = 1 / fmaxf(float(count), 1) in float, times grad_out (widened as C++ widens it).
    share = 1.0 / counts.float().clamp(min=1.0)
    wide = torch.promote_types(grad_out.dtype, torch.float32)
    slot = torch.arange(1, counter.size(1), device=counter.device)
    for rows in slabs(counter.size(0), (counter.size(1) - 1) * channels):
        recorded = slot.unsqueeze(0) <= counts[rows].unsqueeze(1)
        voxel, place = recorded.nonzero(as_tuple=True)
        voxel = voxel + rows.start
        contribution = grads[voxel].to(wide) * share[voxel].to(wide).unsqueeze(1)
        grad_in.index_add_(0, counter[voxel, place + 1].long(), contribution.to(grad_in.dtype))
