"""k nearest neighbours (``mmcv.ops.knn``).

mmcv's CUDA kernel (compiled mmcv has no CPU kernel) keeps, per centre, a max-heap of
``nsample`` (distance, index) pairs in float, starting as (1e10, 0) each; a point
replaces the heap's root when its squared distance (``dx*dx + dy*dy + dz*dz`` in the
inputs' type) is strictly smaller, and a final heap sort lists the pairs in ascending
distance. Without equal distances that is simply the ``nsample`` smallest distances,
ascending (padded with (1e10, 0) when fewer points are nearer than 1e10), which is how
most rows are computed here. Where equal distances meet in or at the edge of the kept
set (duplicate points, symmetric layouts), which of them are kept and in what order
depends on the heap's history; those rows replay the kernel's heap, vectorised across
rows, over the points that can enter it.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ._points3d import check_float_types, check_size, slabs, squared_distances

_TYPES = (torch.float16, torch.float32, torch.float64)
_EMPTY = 1e10  # the kernel's initial heap distance (exact in float32)
_MAX_NSAMPLE = 100  # the kernel's heap arrays hold 100 entries
_BLOCKS = 16  # prefix blocks for bounding which points can enter a replayed heap

_NAMES = ("xyz_tensor", "new_xyz_tensor", "idx_tensor", "dist2_tensor", "b", "n", "m", "nsample")
_NAMES_SIZES_FIRST = ("b", "n", "m", "nsample", "xyz_tensor", "new_xyz_tensor", "idx_tensor", "dist2_tensor")


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    # The extension binds knn_forward twice: tensors first (what mmcv calls) and sizes first.
    names = _NAMES_SIZES_FIRST if args and not isinstance(args[0], torch.Tensor) else _NAMES
    if len(args) > len(names):
        raise TypeError(f"knn_forward takes {len(names)} arguments, got {len(args)}")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in _NAMES or key in bound:
            raise TypeError(f"knn_forward got an unexpected or repeated argument {key!r}")
        bound[key] = value
    missing = [name for name in _NAMES if name not in bound]
    if missing:
        raise TypeError(f"knn_forward is missing arguments: {', '.join(missing)}")
    return bound


def _sift_down(values: torch.Tensor, indices: torch.Tensor, moving: torch.Tensor, size: int | torch.Tensor) -> None:
    """The kernel's ``reheap`` from the root, for the rows in ``moving``, over the first ``size`` slots."""
    rows = torch.arange(values.size(0), device=values.device)
    position = torch.zeros(values.size(0), dtype=torch.long, device=values.device)
    last = values.size(1) - 1
    bound = size if isinstance(size, torch.Tensor) else torch.full_like(position, size)
    for _ in range(max(1, math.ceil(math.log2(values.size(1) + 1)))):
        child = 2 * position + 1
        has_child = moving & (child < bound)
        right = child + 1
        v_child = values[rows, child.clamp(max=last)]
        v_right = values[rows, right.clamp(max=last)]
        take_right = (right < bound) & (v_right > v_child)
        child = torch.where(take_right, right, child)
        v_child = torch.where(take_right, v_right, v_child)
        # The kernel stops when the parent is strictly larger; on equal values it swaps.
        swap = has_child & ~(values[rows, position] > v_child)
        if not bool(swap.any()):
            break
        child = torch.where(swap, child, position)
        parent_value, parent_index = values[rows, position], indices[rows, position]
        values[rows, position] = torch.where(swap, v_child, parent_value)
        indices[rows, position] = torch.where(swap, indices[rows, child], parent_index)
        values[rows, child] = torch.where(swap, parent_value, values[rows, child])
        indices[rows, child] = torch.where(swap, parent_index, indices[rows, child])
        position = child
        moving = swap


def _replay(distances: torch.Tensor, stored: torch.Tensor, nsample: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's heap for a few rows: ``distances`` (R, N) as computed, ``stored`` their float32 values.

    Returns (values (R, nsample) float32 ascending, indices (R, nsample))."""
    rows, n = distances.shape
    device = distances.device
    wide = distances.double()
    stored_wide = stored.double()
    # A point can only enter if it is nearer than the heap's root, which never exceeds the
    # nsample-th smallest stored distance of any earlier prefix: bound each block by its prefix.
    block = max(1, math.ceil(n / _BLOCKS))
    limit = torch.full((rows, n), _EMPTY, dtype=torch.float64, device=device)
    for start in range(block, n, block):
        if start >= nsample:
            kth = torch.kthvalue(stored_wide[:, :start], nsample, dim=1).values.clamp(max=_EMPTY)
            limit[:, start : start + block] = kth.unsqueeze(1)
    candidate = wide < limit
    counts = candidate.sum(dim=1)
    steps = int(counts.max()) if rows else 0
    entries = candidate.nonzero()
    row_start = torch.cumsum(counts, 0) - counts
    slot = torch.arange(entries.size(0), device=device) - row_start[entries[:, 0]]
    order = torch.full((rows, max(steps, 1)), -1, dtype=torch.long, device=device)
    order[entries[:, 0], slot] = entries[:, 1]

    values = torch.full((rows, nsample), _EMPTY, dtype=torch.float64, device=device)
    indices = torch.zeros((rows, nsample), dtype=torch.long, device=device)
    everyone = torch.arange(rows, device=device)
    for t in range(steps):
        point = order[:, t]
        present = point >= 0
        safe = point.clamp(min=0)
        distance = wide[everyone, safe]
        enter = present & (distance < values[:, 0])
        values[:, 0] = torch.where(enter, stored_wide[everyone, safe], values[:, 0])
        indices[:, 0] = torch.where(enter, safe, indices[:, 0])
        _sift_down(values, indices, enter, nsample)
    # heap_sort: move the root to the end, shrink, re-heap.
    all_rows = torch.ones(rows, dtype=torch.bool, device=device)
    for end in range(nsample - 1, 0, -1):
        values[:, [0, end]] = values[:, [end, 0]]
        indices[:, [0, end]] = indices[:, [end, 0]]
        _sift_down(values, indices, all_rows.clone(), end)
    return values.float(), indices


@torch.no_grad()
def knn_forward(*args: Any, **kwargs: Any) -> None:
    """``idx_tensor`` / ``dist2_tensor`` (B, m, nsample): the nearest points of ``xyz_tensor`` (B, n, 3) to each centre."""
    op = "knn_forward"
    a = _arguments(args, kwargs)
    xyz, centres, idx, dist2 = a["xyz_tensor"], a["new_xyz_tensor"], a["idx_tensor"], a["dist2_tensor"]
    b, n, m, nsample = int(a["b"]), int(a["n"]), int(a["m"]), int(a["nsample"])
    check_float_types(op, _TYPES, xyz_tensor=xyz, new_xyz_tensor=centres)
    check_size(op, "b", b, xyz.size(0))
    check_size(op, "n", n, xyz.size(1))
    check_size(op, "m", m, centres.size(1))
    if not 0 < nsample < _MAX_NSAMPLE + 1:
        raise ValueError(
            f"mmcv op `{op}`: nsample must be in 1..{_MAX_NSAMPLE} (the kernel's heap size), got {nsample}."
        )
    if tuple(idx.shape) != (b, m, nsample) or tuple(dist2.shape) != (b, m, nsample):
        raise ValueError(f"mmcv op `{op}`: idx_tensor and dist2_tensor must be (b, m, nsample) = {(b, m, nsample)}.")
    keep = min(nsample + 1, n)
    for part in slabs(m, b * max(n, 1)):
        d = squared_distances(centres[:, part], xyz).reshape(-1, n)
        # The heap holds float32 values and compares the distance (of the inputs' type) with them.
        # (1e10 is exact in float and double and overflows to inf in half, where every finite distance is below it.)
        usable = d < torch.tensor(_EMPTY).to(d.dtype)
        stored = torch.where(usable, d.float(), torch.full((), float("inf"), device=d.device))
        values = torch.full((d.size(0), nsample), _EMPTY, dtype=torch.float32, device=d.device)
        indices = torch.zeros((d.size(0), nsample), dtype=torch.long, device=d.device)
        if keep:
            near, which = torch.topk(stored, keep, dim=1, largest=False, sorted=True)
            finite = near != float("inf")
            take = min(nsample, keep)
            values[:, :take] = torch.where(finite[:, :take], near[:, :take], values[:, :take])
            indices[:, :take] = torch.where(finite[:, :take], which[:, :take], indices[:, :take])
            tied = ((near[:, 1:] == near[:, :-1]) & finite[:, 1:]).any(dim=1)
            if bool(tied.any()):
                rows = tied.nonzero().squeeze(1)
                values[rows], indices[rows] = _replay(d[rows], stored[rows], nsample)
        shape = (b, -1, nsample)
        idx[:, part] = indices.view(shape).to(idx.dtype)
        dist2[:, part] = values.view(shape).to(dist2.dtype)
