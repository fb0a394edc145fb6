"""The area of the convex hull of up to 24 points, exactly as mmcv's CPU kernel computes it.

mmcv's ``convex_hull_graham`` (``box_iou_rotated_utils.hpp``, CPU branch) sorts the
points by angle around the lowest one with ``std::sort`` and a comparator that calls
two points "collinear" when their cross product is below 1e-6 and then orders them by
distance. That comparator is not a strict weak order: for a point within about 1e-6 of
another, the order ``std::sort`` leaves depends on its algorithm, and the Graham scan
that follows then keeps or drops vertices accordingly, so the area can be far from the
true one (about one pair of random boxes in a million, more for touching and nearly
identical boxes). mmfix reproduces the kernel, not the geometry: the same start point,
libstdc++'s sort step by step (insertion sort, introsort partitions above 16 points),
the same scan, and the same sequential fan sum, vectorised over the pairs with loops over
the (at most 24) point positions. Comparisons against the kernel's double constants are
made in double, as C++ makes them.
"""

from __future__ import annotations

import torch
from torch import Tensor

_COLLINEAR = 1e-6
_SAME_POINT = 1e-8
#: libstdc++'s _S_threshold: ranges up to this size are insertion-sorted only.
_INSERTION_ONLY = 16


def _before(ax: Tensor, ay: Tensor, bx: Tensor, by: Tensor) -> Tensor:
    """The std::sort comparator of convex_hull_graham: does A come before B."""
    turn = ax * by - bx * ay
    collinear = turn.double().abs() < _COLLINEAR
    return torch.where(collinear, ax * ax + ay * ay < bx * bx + by * by, turn > 0)


def _take(values: Tensor, index: Tensor) -> Tensor:
    return values.gather(1, index.unsqueeze(1)).squeeze(1)


def _swap(qx: Tensor, qy: Tensor, a: Tensor, b: Tensor, where: Tensor) -> None:
    """Swap positions a and b (P,) of the rows where ``where`` holds, in place."""
    a = torch.where(where, a, b)  # a no-op swap elsewhere
    ax, ay, bx, by = _take(qx, a), _take(qy, a), _take(qx, b), _take(qy, b)
    qx.scatter_(1, a.unsqueeze(1), bx.unsqueeze(1))
    qy.scatter_(1, a.unsqueeze(1), by.unsqueeze(1))
    qx.scatter_(1, b.unsqueeze(1), ax.unsqueeze(1))
    qy.scatter_(1, b.unsqueeze(1), ay.unsqueeze(1))


def _partition(qx: Tensor, qy: Tensor, first: Tensor, last: Tensor, active: Tensor) -> Tensor:
    """__unguarded_partition_pivot on [first, last) of the active rows; the cut (P,)."""
    width = qx.shape[1]

    def before(i: Tensor, j: Tensor) -> Tensor:
        return _before(_take(qx, i), _take(qy, i), _take(qx, j), _take(qy, j))

    # __move_median_to_first(first, first + 1, mid, last - 1)
    a, b, c = first + 1, first + (last - first) // 2, last - 1
    ab, bc, ac = before(a, b), before(b, c), before(a, c)
    median = torch.where(ab, torch.where(bc, b, torch.where(ac, c, a)), torch.where(ac, a, torch.where(bc, c, b)))
    _swap(qx, qy, first, median, active)
    pivot_x, pivot_y = _take(qx, first), _take(qy, first)
    lo, hi = first + 1, last.clone()
    running = active.clone()
    while bool(running.any()):
        # A comparator that is no order can run the unguarded scans off the range (undefined
        # behaviour in C++); the clamps keep the emulation in bounds.
        moving = running.clone()
        while bool(moving.any()):
            moving &= _before(_take(qx, lo), _take(qy, lo), pivot_x, pivot_y) & (lo < width - 1)
            lo = lo + moving.long()
        hi = hi - running.long()
        moving = running.clone()
        while bool(moving.any()):
            moving &= _before(pivot_x, pivot_y, _take(qx, hi), _take(qy, hi)) & (hi > 0)
            hi = hi - moving.long()
        running &= lo < hi
        _swap(qx, qy, lo, hi, running)
        lo = lo + running.long()
    return lo


def _introsort_partitions(qx: Tensor, qy: Tensor, count: Tensor) -> None:
    """The partitioning passes of std::sort on q[1:count] where it holds more than 16 points."""
    first = torch.ones_like(count)
    last = count.clone()
    active = last - first > _INSERTION_ONLY
    # Up to 23 points: each pass leaves at most one side above 16 (the loop of
    # __introsort_loop and its recursion on the right side); the depth limit is never reached.
    while bool(active.any()):
        cut = _partition(qx, qy, first, last, active)
        right_is_long = last - cut > _INSERTION_ONLY
        first = torch.where(active & right_is_long, cut, first)
        last = torch.where(active & ~right_is_long, cut, last)
        active &= last - first > _INSERTION_ONLY


def _insertion_sort(qx: Tensor, qy: Tensor, count: Tensor, width: int) -> None:
    """__final_insertion_sort on q[1:count]: guarded for the first 16 points, unguarded after.

    Position 0 holds the start point (0, 0), which no point comes before, so an unguarded
    walk stops there."""
    rows = qx.shape[0]
    for i in range(2, width):
        vx, vy = qx[:, i : i + 1], qy[:, i : i + 1]
        goes_before = _before(vx, vy, qx[:, :i], qy[:, :i])  # (P, i)
        positions = torch.arange(i, device=qx.device)
        pos = torch.where(goes_before, -1, positions).amax(1) + 1
        if i <= _INSERTION_ONLY:
            pos = torch.where(goes_before[:, 1], 1, pos)
        pos = torch.where(i < count, pos, i).unsqueeze(1)
        k = torch.arange(i + 1, device=qx.device).expand(rows, i + 1)
        source = torch.where(k < pos, k, torch.where(k == pos, i, k - 1))
        qx[:, : i + 1] = qx[:, : i + 1].gather(1, source)
        qy[:, : i + 1] = qy[:, : i + 1].gather(1, source)


def _start_point(xs: Tensor, ys: Tensor, valid: Tensor) -> Tensor:
    """The first point of least y, then least x (Step 1)."""
    inf = torch.full_like(ys, float("inf"))
    low_y = torch.where(valid, ys, inf).amin(1, keepdim=True)
    lowest = valid & (ys == low_y)
    low_x = torch.where(lowest, xs, inf).amin(1, keepdim=True)
    first = lowest & (xs == low_x)
    # No candidate at all (nan coordinates): position 0, as the kernel's t = 0.
    return first.to(torch.uint8).argmax(1)


def hull_area(xs: Tensor, ys: Tensor, valid: Tensor) -> Tensor:
    """polygon_area(convex_hull_graham(points)) of the valid points (P, K), in their order.

    The kernel returns 0 before the hull for 2 points or fewer, as this does."""
    count = valid.sum(1)
    zero = xs.new_zeros(())
    out = xs.new_zeros(xs.shape[0])
    if xs.shape[0] == 0:
        return out
    # The kernel's array holds the valid points first, in the order they were found.
    order = torch.argsort((~valid).to(torch.uint8), dim=1, stable=True)
    width = int(count.max())
    if width <= 2:
        return out
    order = order[:, :width]
    xs, ys = xs.gather(1, order), ys.gather(1, order)
    valid = torch.arange(width, device=xs.device) < count.unsqueeze(1)
    rows = torch.arange(xs.shape[0], device=xs.device)
    t = _start_point(xs, ys, valid)
    qx = xs - xs[rows, t].unsqueeze(1)
    qy = ys - ys[rows, t].unsqueeze(1)
    zeros = torch.zeros_like(t)
    _swap(qx, qy, zeros, t, torch.ones_like(valid[:, 0]))
    long_rows = (count - 1 > _INSERTION_ONLY).nonzero().squeeze(1)
    if long_rows.numel():
        px, py = qx[long_rows], qy[long_rows]
        _introsort_partitions(px, py, count[long_rows])
        qx[long_rows], qy[long_rows] = px, py
    _insertion_sort(qx, qy, count, width)

    # Step 4: the first point (after the start) not on top of it.
    dist = qx * qx + qy * qy
    apart = (dist.double() > _SAME_POINT) & valid
    apart[:, 0] = False
    k = torch.where(apart, torch.arange(width, device=xs.device), width).amin(1)
    # Step 5: the scan. The stack is a copy: the kernel's in-place writes only touch
    # positions it has already read.
    sx, sy = qx.clone(), qy.clone()
    has_k = k < count
    k_safe = k.clamp(max=width - 1)
    sx[:, 1] = qx[rows, k_safe]
    sy[:, 1] = qy[rows, k_safe]
    m = torch.full_like(count, 2)
    for i in range(2, width):
        active = (i > k) & (i < count)
        if not bool(active.any()):
            continue
        ix, iy = qx[:, i], qy[:, i]
        popping = active.clone()
        while True:
            below = (m - 2).clamp(min=0)
            top = (m - 1).clamp(min=0)
            bx, by = sx[rows, below], sy[rows, below]
            ax, ay = ix - bx, iy - by
            cx, cy = sx[rows, top] - bx, sy[rows, top] - by
            popping &= (m > 1) & (ax * cy - cx * ay >= 0)
            if not bool(popping.any()):
                break
            m = m - popping.long()
        target = torch.where(active, m, width - 1).clamp(max=width - 1)
        sx[rows, target] = torch.where(active, ix, sx[rows, target])
        sy[rows, target] = torch.where(active, iy, sy[rows, target])
        m = m + active.long()
    m = torch.where(has_k, m, 1)

    # polygon_area: |cross| of each fan triangle, summed in order, halved.
    area = xs.new_zeros(xs.shape[0])
    for i in range(1, width - 1):
        term = (sx[:, i] * sy[:, i + 1] - sx[:, i + 1] * sy[:, i]).abs()
        area = area + torch.where(i < m - 1, term, zero)
    return torch.where((count > 2) & (m > 2), area / 2, zero)
