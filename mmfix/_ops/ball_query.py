"""Ball query (``mmcv.ops.ball_query``, plain and stacked batches).

As mmcv's CUDA kernels (compiled mmcv has no CPU kernel): for each centre, the first
``nsample`` points in index order whose squared distance ``d2`` (``dx*dx + dy*dy + dz*dz``
in the inputs' type) passes the radius test; the remaining slots repeat the first
point found. The plain query's test is ``d2 == 0 or min_r**2 <= d2 < max_r**2`` (radii
squared in float32) and a centre with no point keeps what the caller put in its row
(zeros); the stacked query's test is ``d2 < r**2``, its indices count from the start
of the centre's batch item, and a centre with no point gets -1 in its first slot.
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, check_size, first_indices, slabs, squared_distances

_TYPES = (torch.float16, torch.float32, torch.float64)


def _f32(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float32)


def _write_neighbours(idx_rows: torch.Tensor, mask: torch.Tensor, nsample: int, empty_value: int | None) -> None:
    """Fill ``idx_rows`` (R, nsample) from ``mask`` (R, n) with the kernel's padding rule."""
    positions, found = first_indices(mask, nsample)
    any_found = found[:, :1] if found.size(1) else mask.new_zeros((mask.size(0), 1))
    padded = positions.new_zeros((mask.size(0), nsample))
    if positions.size(1):
        first = positions[:, :1]
        padded[:] = first
        padded[:, : positions.size(1)] = torch.where(found, positions, first)
    updated = torch.where(any_found, padded.to(idx_rows.dtype), idx_rows)
    if empty_value is not None and nsample > 0:
        updated[:, 0] = torch.where(any_found[:, 0], updated[:, 0], torch.full_like(updated[:, 0], empty_value))
    idx_rows.copy_(updated)


@torch.no_grad()
def ball_query_forward(
    new_xyz_tensor: torch.Tensor,
    xyz_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    b: int,
    n: int,
    m: int,
    min_radius: float,
    max_radius: float,
    nsample: int,
) -> None:
    """``idx_tensor`` (B, m, nsample): neighbours of each centre of ``new_xyz_tensor`` (B, m, 3) in ``xyz_tensor`` (B, n, 3)."""
    op = "ball_query_forward"
    check_float_types(op, _TYPES, new_xyz_tensor=new_xyz_tensor, xyz_tensor=xyz_tensor)
    check_size(op, "b", b, xyz_tensor.size(0))
    check_size(op, "n", n, xyz_tensor.size(1))
    check_size(op, "m", m, new_xyz_tensor.size(1))
    if tuple(idx_tensor.shape) != (b, m, nsample):
        raise ValueError(
            f"mmcv op `{op}`: idx_tensor must be (b, m, nsample) = {(b, m, nsample)}, got {tuple(idx_tensor.shape)}."
        )
    # The kernel squares the radii in float32 and compares the distance (of the points' type) with them.
    max_r2 = _f32(max_radius) * _f32(max_radius)
    min_r2 = _f32(min_radius) * _f32(min_radius)
    wide = torch.promote_types(xyz_tensor.dtype, torch.float32)
    max_r2, min_r2 = max_r2.to(device=xyz_tensor.device, dtype=wide), min_r2.to(device=xyz_tensor.device, dtype=wide)
    for part in slabs(m, b * n):
        d2 = squared_distances(new_xyz_tensor[:, part], xyz_tensor).to(wide)
        mask = (d2 == 0) | ((d2 >= min_r2) & (d2 < max_r2))
        count = b * (part.stop - part.start)
        rows = idx_tensor[:, part].reshape(count, nsample).clone()  # (a view when b == 1: written back below)
        _write_neighbours(rows, mask.reshape(count, n), nsample, empty_value=None)
        idx_tensor[:, part] = rows.view(b, part.stop - part.start, nsample)


@torch.no_grad()
def stack_ball_query_forward(
    new_xyz_tensor: torch.Tensor,
    new_xyz_batch_cnt: torch.Tensor,
    xyz_tensor: torch.Tensor,
    xyz_batch_cnt: torch.Tensor,
    idx_tensor: torch.Tensor,
    max_radius: float,
    nsample: int,
) -> None:
    """``idx_tensor`` (M1+M2+..., nsample): neighbours within each batch item of stacked points."""
    op = "stack_ball_query_forward"
    check_float_types(op, _TYPES, new_xyz_tensor=new_xyz_tensor, xyz_tensor=xyz_tensor)
    centres_per_item = [int(c) for c in new_xyz_batch_cnt.tolist()]
    points_per_item = [int(c) for c in xyz_batch_cnt.tolist()]
    if len(centres_per_item) != len(points_per_item):
        raise ValueError(
            f"mmcv op `{op}`: new_xyz_batch_cnt and xyz_batch_cnt name different batch sizes "
            f"({len(centres_per_item)}, {len(points_per_item)})."
        )
    if sum(centres_per_item) != new_xyz_tensor.size(0) or sum(points_per_item) != xyz_tensor.size(0):
        raise ValueError(
            f"mmcv op `{op}`: the batch counts ({sum(centres_per_item)} centres, {sum(points_per_item)} points) "
            f"do not add up to the stacked tensors ({new_xyz_tensor.size(0)}, {xyz_tensor.size(0)})."
        )
    if tuple(idx_tensor.shape) != (new_xyz_tensor.size(0), nsample):
        raise ValueError(f"mmcv op `{op}`: idx_tensor must be (M, nsample), got {tuple(idx_tensor.shape)}.")
    radius2 = (_f32(max_radius) * _f32(max_radius)).to(
        device=xyz_tensor.device, dtype=torch.promote_types(xyz_tensor.dtype, torch.float32)
    )
    centre_start = point_start = 0
    for centres, points in zip(centres_per_item, points_per_item):
        item_points = xyz_tensor[None, point_start : point_start + points]
        for part in slabs(centres, points):
            rows = slice(centre_start + part.start, centre_start + part.stop)
            d2 = squared_distances(new_xyz_tensor[None, rows], item_points)[0]
            _write_neighbours(idx_tensor[rows], d2.to(radius2.dtype) < radius2, nsample, empty_value=-1)
        centre_start += centres
        point_start += points
