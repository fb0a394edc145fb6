"""The intersection of rotated rectangles (and convex quadrilaterals), vectorised over box pairs.

The arithmetic is that of mmcv's ``box_iou_rotated_utils.hpp`` (detectron2's), operation
by operation in the boxes' dtype: every pair is shifted so that the midpoint of its two
centres is the origin, the corners come from ``cos``/``sin`` taken in double, and the
candidate vertices of the intersection are the 16 edge-edge crossings (``t`` in [0, 1] on
both edges, parallel edges skipped at |det| <= 1e-14) and the corners of each box inside
the other, in the kernel's order. ``_graham.hull_area`` then reproduces the kernel's
convex hull and area, so the results are the CPU kernel's to the bit (its quirks
included: see there).

Pairs whose circumscribed circles are clearly apart meet nowhere, and the kernel gives
them exactly 0, so only the others are computed; they are computed in chunks of pairs,
which bounds the memory whatever the number of boxes.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from ._graham import hull_area

#: Pairs computed at once: about 3 KiB of intermediates each (24 candidate vertices).
PAIR_CHUNK = 1 << 15
#: Elements of the cheap candidate test evaluated at once (rows × columns of a pair grid).
GRID_CHUNK = 1 << 22
#: Circles this far apart (relative) are apart by far more than float rounding.
_APART = 1.0 + 1e-3
_PARALLEL = 1e-14
_EMPTY_AREA = 1e-14

#: ``mode_flag`` of box_iou_rotated / box_iou_quadri: what the intersection is divided by.
MODES = {0: "iou", 1: "iof"}


def chunks(total: int, size: int) -> Iterator[slice]:
    for start in range(0, total, size):
        yield slice(start, min(start + size, total))


def _cross(ax: Tensor, ay: Tensor, bx: Tensor, by: Tensor) -> Tensor:
    # cross_2d(A, B) = A.x * B.y - B.x * A.y, in this order: the kernel's rounding.
    return ax * by - bx * ay


def _dot(ax: Tensor, ay: Tensor, bx: Tensor, by: Tensor) -> Tensor:
    return ax * bx + ay * by


def shifted_centres(x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor]:
    """Both coordinates less the midpoint of the pair, rounded as the kernel rounds them.

    ``(a + b) / 2.0`` sums in the boxes' dtype and halves in double; the difference is
    taken in double and stored back in the boxes' dtype."""
    shift = (x1 + x2).double() / 2.0
    return (x1.double() - shift).to(x1.dtype), (x2.double() - shift).to(x2.dtype)


def rotated_corners(cx: Tensor, cy: Tensor, w: Tensor, h: Tensor, angle: Tensor) -> tuple[Tensor, Tensor]:
    """The 4 corners (…, 4) of (cx, cy, w, h, angle) boxes, in get_rotated_vertices' order."""
    theta = angle.double()
    cos2 = torch.cos(theta).to(cx.dtype) * 0.5
    sin2 = torch.sin(theta).to(cx.dtype) * 0.5
    x0 = cx - sin2 * h - cos2 * w
    y0 = cy + cos2 * h - sin2 * w
    x1 = cx + sin2 * h - cos2 * w
    y1 = cy - cos2 * h - sin2 * w
    x2 = 2 * cx - x0
    y2 = 2 * cy - y0
    x3 = 2 * cx - x1
    y3 = 2 * cy - y1
    return torch.stack((x0, x1, x2, x3), -1), torch.stack((y0, y1, y2, y3), -1)


def _inside(px: Tensor, py: Tensor, qx: Tensor, qy: Tensor, ex: Tensor, ey: Tensor) -> Tensor:
    """Which points p (P, 4) lie in the rectangle with corners q and edge vectors e (P, 4)."""
    abx, aby = ex[:, :1], ey[:, :1]
    dax, day = ex[:, 3:], ey[:, 3:]
    ab_ab = _dot(abx, aby, abx, aby)
    ad_ad = _dot(dax, day, dax, day)
    apx = px - qx[:, :1]
    apy = py - qy[:, :1]
    ap_ab = _dot(apx, apy, abx, aby)
    ap_ad = -_dot(apx, apy, dax, day)
    return (ap_ab >= 0) & (ap_ad >= 0) & (ap_ab <= ab_ab) & (ap_ad <= ad_ad)


def quad_intersection_area(p1x: Tensor, p1y: Tensor, p2x: Tensor, p2y: Tensor) -> Tensor:
    """Area (P,) of the intersection of convex quadrilaterals with corners p1 and p2 (P, 4).

    The candidate vertices and their tests are get_intersection_points' (the corner test
    assumes rectangles, as the kernel's does)."""
    e1x = torch.roll(p1x, -1, 1) - p1x
    e1y = torch.roll(p1y, -1, 1) - p1y
    e2x = torch.roll(p2x, -1, 1) - p2x
    e2y = torch.roll(p2y, -1, 1) - p2y
    # Edge i of box 1 (dim 1) against edge j of box 2 (dim 2).
    ax, ay, vx, vy = p1x[:, :, None], p1y[:, :, None], e1x[:, :, None], e1y[:, :, None]
    bx, by, wx, wy = p2x[:, None, :], p2y[:, None, :], e2x[:, None, :], e2y[:, None, :]
    det = _cross(wx, wy, vx, vy)
    dx = bx - ax
    dy = by - ay
    t1 = _cross(wx, wy, dx, dy) / det
    t2 = _cross(vx, vy, dx, dy) / det
    crossing = (det.double().abs() > _PARALLEL) & (t1 >= 0) & (t1 <= 1) & (t2 >= 0) & (t2 <= 1)
    cross_x = ax + vx * t1
    cross_y = ay + vy * t1
    n = p1x.shape[0]
    xs = torch.cat((cross_x.reshape(n, 16), p1x, p2x), 1)
    ys = torch.cat((cross_y.reshape(n, 16), p1y, p2y), 1)
    valid = torch.cat(
        (crossing.reshape(n, 16), _inside(p1x, p1y, p2x, p2y, e2x, e2y), _inside(p2x, p2y, p1x, p1y, e1x, e1y)), 1
    )
    return hull_area(xs, ys, valid)


def _apart(x1: Tensor, y1: Tensor, r1: Tensor, x2: Tensor, y2: Tensor, r2: Tensor, margin: float) -> Tensor:
    """Pairs whose circumscribed circles are clearly apart (never true for nan or inf)."""
    dx = x1 - x2
    dy = y1 - y2
    reach = (r1 + r2) * _APART + margin
    return dx * dx + dy * dy > reach * reach


def circumradius(w: Tensor, h: Tensor) -> Tensor:
    return torch.sqrt(w * w + h * h) / 2


def rotated_iou_of_pairs(boxes1: Tensor, boxes2: Tensor, mode_flag: int) -> Tensor:
    """single_box_iou_rotated for each aligned pair of (P, 5) boxes, without the far-apart test."""
    x1, x2 = shifted_centres(boxes1[:, 0], boxes2[:, 0])
    y1, y2 = shifted_centres(boxes1[:, 1], boxes2[:, 1])
    w1, h1, w2, h2 = boxes1[:, 2], boxes1[:, 3], boxes2[:, 2], boxes2[:, 3]
    p1x, p1y = rotated_corners(x1, y1, w1, h1, boxes1[:, 4])
    p2x, p2y = rotated_corners(x2, y2, w2, h2, boxes2[:, 4])
    inter = quad_intersection_area(p1x, p1y, p2x, p2y)
    area1 = w1 * h1
    area2 = w2 * h2
    base = area1 + area2 - inter if mode_flag == 0 else area1
    iou = inter / base
    empty = (area1.double() < _EMPTY_AREA) | (area2.double() < _EMPTY_AREA)
    return torch.where(empty, torch.zeros_like(iou), iou)


def rotated_iou_pairs(boxes1: Tensor, boxes2: Tensor, mode_flag: int = 0) -> Tensor:
    """IoU (or IoF) of each aligned pair of (P, 5) rotated boxes, as box_iou_rotated's kernel."""
    out = boxes1.new_zeros(boxes1.shape[0])
    if out.numel() == 0:
        return out
    r1 = circumradius(boxes1[:, 2], boxes1[:, 3])
    r2 = circumradius(boxes2[:, 2], boxes2[:, 3])
    near = ~_apart(boxes1[:, 0], boxes1[:, 1], r1, boxes2[:, 0], boxes2[:, 1], r2, 0.0)
    index = near.nonzero().squeeze(1)
    for part in chunks(index.numel(), PAIR_CHUNK):
        rows = index[part]
        out[rows] = rotated_iou_of_pairs(boxes1[rows], boxes2[rows], mode_flag)
    return out


def near_pairs(boxes1: Tensor, boxes2: Tensor, margin: float = 0.0) -> tuple[Tensor, Tensor]:
    """(i, j) of every pair of (N, ≥4) and (M, ≥4) centred boxes whose circles may meet, row-major."""
    r1 = circumradius(boxes1[:, 2], boxes1[:, 3])
    r2 = circumradius(boxes2[:, 2], boxes2[:, 3])
    x2, y2 = boxes2[None, :, 0], boxes2[None, :, 1]
    rows_per_chunk = max(1, GRID_CHUNK // max(1, boxes2.shape[0]))
    found_i, found_j = [], []
    for part in chunks(boxes1.shape[0], rows_per_chunk):
        apart = _apart(boxes1[part, 0, None], boxes1[part, 1, None], r1[part, None], x2, y2, r2[None, :], margin)
        i, j = (~apart).nonzero(as_tuple=True)
        found_i.append(i + part.start)
        found_j.append(j)
    if not found_i:
        empty = torch.zeros(0, dtype=torch.long, device=boxes1.device)
        return empty, empty
    return torch.cat(found_i), torch.cat(found_j)


def rotated_iou_grid(boxes1: Tensor, boxes2: Tensor, mode_flag: int = 0) -> Tensor:
    """IoU (or IoF) of every pair of (N, 5) and (M, 5) rotated boxes: (N * M,), row-major."""
    n, m = boxes1.shape[0], boxes2.shape[0]
    out = boxes1.new_zeros(n * m)
    i, j = near_pairs(boxes1, boxes2)
    for part in chunks(i.numel(), PAIR_CHUNK):
        rows, cols = i[part], j[part]
        out[rows * m + cols] = rotated_iou_of_pairs(boxes1[rows], boxes2[cols], mode_flag)
    return out
