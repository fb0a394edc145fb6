"""Voxelization (``mmcv.ops.Voxelization``): points to voxel coordinates, hard (capped) and dynamic.

The arithmetic is mmcv's CPU kernel's (``voxelization.cpp``), which its CUDA kernels
share: a point's voxel along each axis is ``floor((p - range_min) / voxel_size)`` in
float32 (double for double points), outside ``[0, grid)`` means -1 on every axis, the
grid is ``round((range_max - range_min) / voxel_size)`` (halves away from zero), and
coordinates come out as (z, y, x).

Hard voxelization numbers voxels in the order their first point appears, keeps the
first ``max_voxels`` voxels and, in each, the first ``max_points`` points in point order
(later points of a kept voxel are dropped, points of dropped voxels too). mmcv's
non-deterministic CUDA variant (``deterministic=False``) fills the same voxels in an
order its atomics decide; here both modes give the deterministic order, one of the
outcomes that variant allows (compiled mmcv has no CPU kernel for it).
"""

from __future__ import annotations

import math

import torch

from ._points3d import check_float_types

_POINT_TYPES = (torch.float16, torch.float32, torch.float64)
#: Grids up to this many cells number their voxels through a lookup table (32 MiB of int64).
_TABLE_CELLS = 1 << 22


def _settings(op: str, voxel_size: torch.Tensor, coors_range: torch.Tensor, ndim: int) -> tuple[list[float], list[int]]:
    """(range minima, grid sizes) exactly as the C++ derives them from the float32 settings."""
    if voxel_size.dtype != torch.float32 or coors_range.dtype != torch.float32:
        raise TypeError(
            f"mmcv op `{op}`: voxel_size and coors_range must be float32 tensors (the extension reads them as "
            f"float), got {voxel_size.dtype} and {coors_range.dtype}; mmcv's Voxelization passes "
            "torch.tensor(..., dtype=torch.float)."
        )
    if voxel_size.numel() < ndim or coors_range.numel() < 2 * ndim:
        raise ValueError(
            f"mmcv op `{op}`: NDim={ndim} needs {ndim} voxel sizes and {2 * ndim} range values "
            f"[min..., max...], got {voxel_size.numel()} and {coors_range.numel()}."
        )
    size = voxel_size.detach().flatten()[:ndim].cpu()
    bounds = coors_range.detach().flatten()[: 2 * ndim].cpu()
    extent = (bounds[ndim:] - bounds[:ndim]) / size  # float32, as the C++ computes it
    grid: list[int] = []
    for value in extent.tolist():
        if not math.isfinite(value) or abs(value) > 2**31:
            raise ValueError(
                f"mmcv op `{op}`: the voxel grid (coors_range {bounds.tolist()} / voxel_size {size.tolist()}) is "
                f"not a finite size; check that every voxel size is positive and the range max > min."
            )
        grid.append(int(math.copysign(math.floor(abs(value) + 0.5), value)))  # C round(): halves away from zero
    return bounds[:ndim].tolist(), grid


def _point_voxels(points: torch.Tensor, minima: list[float], size: torch.Tensor, grid: list[int]) -> torch.Tensor:
    """(N, NDim) voxel coordinates in reversed axis order (z, y, x), a row of -1 for points outside the grid."""
    ndim = len(grid)
    # Half points are widened to float (Half - float is float in C++); double points stay double.
    wide = torch.float64 if points.dtype == torch.float64 else torch.float32
    coords = points[:, :ndim].to(wide)
    low = torch.tensor(minima, dtype=wide, device=points.device)
    step = size.to(device=points.device, dtype=wide)
    cells = torch.floor((coords - low) / step)
    limit = torch.tensor(grid, dtype=wide, device=points.device)
    # Compared as floats: a NaN, an infinity or a value past int range fails as the C++ cast does.
    inside = ((cells >= 0) & (cells < limit)).all(dim=1, keepdim=True)
    cells = torch.where(inside, cells, torch.zeros((), dtype=wide, device=points.device))
    voxels = torch.where(inside, cells.to(torch.int32), torch.full((), -1, dtype=torch.int32, device=points.device))
    return voxels.flip(1)


def _voxel_keys(zyx: torch.Tensor, grid: list[int]) -> tuple[torch.Tensor, int]:
    """(a key per point that two points share exactly when their voxel is the same, the keys' bound).

    The flat cell index when the grid's cell count fits int64 (every voxel setting in use); past
    2^63 cells it would wrap and pool distant voxels, so the (z, y, x) rows are numbered
    lexicographically instead (``unique`` over rows: exact whatever the grid). Compiled mmcv's CPU
    kernel allocates a table of every cell and fails there ("Storage size calculation
    overflowed"); its CUDA kernel compares points' coordinates and answers as this does.
    """
    cells = math.prod(grid)  # a Python int: exact (each axis is below 2^31)
    if abs(cells) < 1 << 63:
        return (zyx[:, 0] * grid[1] + zyx[:, 1]) * grid[0] + zyx[:, 2], cells
    rows, inverse = torch.unique(zyx, dim=0, return_inverse=True)
    return inverse.reshape(-1), rows.size(0)


def _number_voxels(key: torch.Tensor, cells: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Voxels numbered in the order their first point appears.

    ``key`` is each point's flat voxel index. Returns each point's voxel number and, per
    voxel number, the position of its first point. A grid small enough for a lookup table
    (PointPillars' 432 x 496) is done with scatters; a fine one (SECOND's 1408 x 1600 x 40)
    through ``unique``, which sorts.
    """
    n = key.numel()
    positions = torch.arange(n, device=key.device)
    if cells <= _TABLE_CELLS:
        first = torch.full((cells,), n, dtype=torch.long, device=key.device)
        first.scatter_reduce_(0, key, positions, reduce="amin")
        starters = (first[key] == positions).nonzero().squeeze(1)  # in point order: voxel order
        table = torch.empty((cells,), dtype=torch.long, device=key.device)
        table[key[starters]] = torch.arange(starters.numel(), device=key.device)
        return table[key], starters
    unique_keys, inverse = torch.unique(key, return_inverse=True)
    first = torch.full((unique_keys.numel(),), n, dtype=torch.long, device=key.device)
    first.scatter_reduce_(0, inverse, positions, reduce="amin")
    numbering = torch.argsort(first)
    rank = torch.empty_like(numbering)
    rank[numbering] = torch.arange(numbering.numel(), device=key.device)
    return rank[inverse], first[numbering]


@torch.no_grad()
def dynamic_voxelize_forward(
    points: torch.Tensor,
    voxel_size: torch.Tensor,
    coors_range: torch.Tensor,
    coors: torch.Tensor,
    NDim: int = 3,
) -> None:
    """Each point's voxel coordinate (z, y, x), or -1s, written into ``coors`` (N, NDim) int32."""
    op = "dynamic_voxelize_forward"
    check_float_types(op, _POINT_TYPES, points=points)
    minima, grid = _settings(op, voxel_size, coors_range, NDim)
    if points.dim() != 2 or points.size(1) < NDim or tuple(coors.shape) != (points.size(0), NDim):
        raise ValueError(
            f"mmcv op `{op}`: expected points (N, >= {NDim}) and coors (N, {NDim}), got "
            f"{tuple(points.shape)} and {tuple(coors.shape)}."
        )
    size = voxel_size.detach().flatten()[:NDim].cpu()
    coors.copy_(_point_voxels(points, minima, size, grid))


@torch.no_grad()
def hard_voxelize_forward(
    points: torch.Tensor,
    voxel_size: torch.Tensor,
    coors_range: torch.Tensor,
    voxels: torch.Tensor,
    coors: torch.Tensor,
    num_points_per_voxel: torch.Tensor,
    voxel_num: torch.Tensor,
    max_points: int = 35,
    max_voxels: int = 20000,
    NDim: int = 3,
    deterministic: bool = True,
) -> None:
    """Points grouped into at most ``max_voxels`` voxels of at most ``max_points`` points.

    Writes the first ``voxel_num`` rows of ``voxels`` (M, max_points, C), ``coors`` (M, 3)
    and ``num_points_per_voxel`` (M,), and ``voxel_num`` (a 0-dim int64 tensor); slots
    past a voxel's points keep what the caller put there (mmcv passes zeros).
    """
    op = "hard_voxelize_forward"
    del deterministic  # both modes: the deterministic order (see the module docstring)
    if NDim != 3:
        raise ValueError(f"mmcv op `{op}`: only NDim=3 is supported (mmcv's kernels index a 3D grid), got {NDim}.")
    check_float_types(op, _POINT_TYPES, points=points)
    minima, grid = _settings(op, voxel_size, coors_range, NDim)
    if points.dim() != 2 or points.size(1) < NDim:
        raise ValueError(f"mmcv op `{op}`: expected points (N, >= 3), got {tuple(points.shape)}.")
    num_features = points.size(1)
    if voxels.dim() != 3 or voxels.size(2) < num_features or voxels.dtype != points.dtype:
        raise ValueError(
            f"mmcv op `{op}`: voxels must be (max_voxels, max_points, {num_features}) of the points' type "
            f"{points.dtype}, got {tuple(voxels.shape)} {voxels.dtype}."
        )
    device = points.device
    size = voxel_size.detach().flatten()[:NDim].cpu()
    point_voxels = _point_voxels(points, minima, size, grid)

    valid = point_voxels[:, 0] >= 0
    kept_points = valid.nonzero().squeeze(1)
    zyx = point_voxels[kept_points].long()
    voxel_of_point, starters = _number_voxels(*_voxel_keys(zyx, grid))
    found = starters.numel()

    count = found if max_voxels == -1 else min(found, max(max_voxels, 0))
    if count > voxels.size(0) or count > coors.size(0) or count > num_points_per_voxel.size(0):
        raise ValueError(
            f"mmcv op `{op}`: {count} voxels do not fit the output tensors ({voxels.size(0)} rows); "
            "allocate max_voxels rows, as mmcv's Voxelization does."
        )
    in_kept_voxel = voxel_of_point < count
    voxel_of_point = voxel_of_point[in_kept_voxel]
    source = kept_points[in_kept_voxel]

    # Each point's place in its voxel: its rank among the voxel's points, in point order.
    sorted_voxel, by_voxel = torch.sort(voxel_of_point, stable=True)
    points_in_voxel = torch.bincount(voxel_of_point, minlength=count)
    starts = torch.cumsum(points_in_voxel, 0) - points_in_voxel
    place = torch.empty_like(voxel_of_point)
    place[by_voxel] = torch.arange(voxel_of_point.numel(), device=device) - starts[sorted_voxel]
    if max_points == -1:
        capacity = int(points_in_voxel.max()) if points_in_voxel.numel() else 0
    else:
        capacity = max(max_points, 0)
    if capacity > voxels.size(1):
        raise ValueError(
            f"mmcv op `{op}`: voxels has room for {voxels.size(1)} points per voxel but max_points={max_points} "
            f"(up to {capacity} stored); allocate (max_voxels, max_points, C), as mmcv's Voxelization does."
        )
    stored = place < capacity

    if voxels.is_contiguous():
        slots = voxels.view(-1, voxels.size(2))
        slots[voxel_of_point[stored] * voxels.size(1) + place[stored], :num_features] = points[source[stored]]
    else:
        voxels[voxel_of_point[stored], place[stored], :num_features] = points[source[stored]]
    coors[:count] = point_voxels[kept_points[starters[:count]]].to(coors.dtype)
    num_points_per_voxel[:count] = points_in_voxel.clamp(max=capacity).to(num_points_per_voxel.dtype)
    voxel_num.fill_(count)
