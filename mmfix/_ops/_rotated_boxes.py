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
them exactly 0 (unless a box is so thin that an edge rounds to zero: see ``Reach``), so
only the others are computed; they are computed in chunks of pairs,
which bounds the memory whatever the number of boxes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
from torch import Tensor

from ._graham import hull_area
from ._greedy_nms import Suppresses

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


class Reach(NamedTuple):
    """Per box (N,): a circle holding everything its pair tests can touch, and how thin it may be.

    The kernel's corner test projects onto two edges of a box; an edge that rounds to zero
    length at the pair's coordinates turns it into an infinite strip, so a thin box can
    "contain" the corners of a box far away (and the kernel then reports an overlap, or an
    infinite IoU). Pairs are skipped only if neither box is that thin: ``edge`` is its
    shortest tested edge, ``size`` the magnitude of its coordinates."""

    x: Tensor
    y: Tensor
    radius: Tensor
    edge: Tensor
    size: Tensor

    def row(self, part: slice) -> Reach:
        return Reach(*(v[part, None] for v in self))

    def column(self) -> Reach:
        return Reach(*(v[None, :] for v in self))


#: An edge shorter than this many float epsilons of the pair's coordinates may round to zero.
_THIN = 256


def _skippable(first: Reach, second: Reach, margin: float) -> Tensor:
    """Pairs (broadcast) the kernel certainly gives 0: far apart and not thin (never for nan or inf)."""
    dx = first.x - second.x
    dy = first.y - second.y
    reach = (first.radius + second.radius) * _APART + margin
    apart = dx * dx + dy * dy > reach * reach
    scale = (first.size + second.size) * (_THIN * torch.finfo(first.x.dtype).eps)
    return apart & (first.edge > scale) & (second.edge > scale)


def circumradius(w: Tensor, h: Tensor) -> Tensor:
    return torch.sqrt(w * w + h * h) / 2


def rotated_reach(boxes: Tensor) -> Reach:
    x, y, w, h = boxes[:, 0], boxes[:, 1], boxes[:, 2].abs(), boxes[:, 3].abs()
    return Reach(x, y, circumradius(w, h), torch.minimum(w, h), x.abs() + y.abs() + w + h)


def quadri_reach(quads: Tensor) -> Reach:
    """Around the 4 corners and the region the corner test accepts.

    That test takes P as inside when 0 <= AP·AB <= |AB|² and 0 <= AP·AD <= |AD|² (A, B, D
    the corners 0, 1, 3): a parallelogram with sides perpendicular to AB and AD, which is
    the quadrilateral only for rectangles, and reaches far (or without end) when AB and AD
    are nearly parallel. Its corners are A + M⁻¹(a, b) for a in {0, |AB|²}, b in {0, |AD|²}."""
    xs, ys = quads[:, 0::2], quads[:, 1::2]
    abx, aby = xs[:, 1] - xs[:, 0], ys[:, 1] - ys[:, 0]
    adx, ady = xs[:, 3] - xs[:, 0], ys[:, 3] - ys[:, 0]
    det = abx * ady - aby * adx
    ab2, ad2 = abx * abx + aby * aby, adx * adx + ady * ady
    region_x = torch.stack((ab2 * ady, -ad2 * aby, ab2 * ady - ad2 * aby), 1) / det[:, None] + xs[:, :1]
    region_y = torch.stack((-ab2 * adx, ad2 * abx, -ab2 * adx + ad2 * abx), 1) / det[:, None] + ys[:, :1]
    cx, cy = xs.mean(1), ys.mean(1)
    all_x, all_y = torch.cat((xs, region_x), 1), torch.cat((ys, region_y), 1)
    radius = torch.sqrt((all_x - cx[:, None]) ** 2 + (all_y - cy[:, None]) ** 2).amax(1)
    size = xs.abs().amax(1) + ys.abs().amax(1)
    return Reach(cx, cy, radius, torch.sqrt(torch.minimum(ab2, ad2)), size)


def _iou(inter: Tensor, area1: Tensor, area2: Tensor, mode_flag: int) -> Tensor:
    base = area1 + area2 - inter if mode_flag == 0 else area1
    iou = inter / base
    empty = (area1.double() < _EMPTY_AREA) | (area2.double() < _EMPTY_AREA)
    return torch.where(empty, torch.zeros_like(iou), iou)


def rotated_iou_of_pairs(boxes1: Tensor, boxes2: Tensor, mode_flag: int) -> Tensor:
    """single_box_iou_rotated for each aligned pair of (P, 5) boxes, without the far-apart test."""
    x1, x2 = shifted_centres(boxes1[:, 0], boxes2[:, 0])
    y1, y2 = shifted_centres(boxes1[:, 1], boxes2[:, 1])
    w1, h1, w2, h2 = boxes1[:, 2], boxes1[:, 3], boxes2[:, 2], boxes2[:, 3]
    p1x, p1y = rotated_corners(x1, y1, w1, h1, boxes1[:, 4])
    p2x, p2y = rotated_corners(x2, y2, w2, h2, boxes2[:, 4])
    inter = quad_intersection_area(p1x, p1y, p2x, p2y)
    return _iou(inter, w1 * h1, w2 * h2, mode_flag)


def _quad_area(px: Tensor, py: Tensor) -> Tensor:
    """quadri_box_area: the two fan triangles from corner 0, each |cross|, summed, halved."""
    ux, uy = px - px[:, :1], py - py[:, :1]
    first = (ux[:, 1] * uy[:, 2] - ux[:, 2] * uy[:, 1]).abs()
    second = (ux[:, 2] * uy[:, 3] - ux[:, 3] * uy[:, 2]).abs()
    return (first + second) / 2


def quadri_iou_of_pairs(quads1: Tensor, quads2: Tensor, mode_flag: int) -> Tensor:
    """single_box_iou_quadri for each aligned pair of (P, 8) quadrilaterals, without the far-apart test."""

    def shift(column: int) -> Tensor:
        # The eight coordinates summed in the kernel's order in the boxes' dtype, then / 8.0 in double.
        total = quads1[:, column] + quads2[:, column]
        for k in (2, 4, 6):
            total = total + quads1[:, column + k]
            total = total + quads2[:, column + k]
        return total.double() / 8.0

    sx, sy = shift(0)[:, None], shift(1)[:, None]
    dtype = quads1.dtype
    p1x, p1y = (quads1[:, 0::2].double() - sx).to(dtype), (quads1[:, 1::2].double() - sy).to(dtype)
    p2x, p2y = (quads2[:, 0::2].double() - sx).to(dtype), (quads2[:, 1::2].double() - sy).to(dtype)
    inter = quad_intersection_area(p1x, p1y, p2x, p2y)
    return _iou(inter, _quad_area(p1x, p1y), _quad_area(p2x, p2y), mode_flag)


@dataclass(frozen=True)
class BoxKind:
    """How one kind of box is tested: its reach (for skipping pairs) and the kernel's IoU of pairs."""

    reach: Callable[[Tensor], Reach]
    iou_of_pairs: Callable[[Tensor, Tensor, int], Tensor]


ROTATED = BoxKind(rotated_reach, rotated_iou_of_pairs)
QUADRI = BoxKind(quadri_reach, quadri_iou_of_pairs)


def iou_pairs(kind: BoxKind, boxes1: Tensor, boxes2: Tensor, mode_flag: int = 0) -> Tensor:
    """IoU (or IoF) of each aligned pair of boxes, as the kernel computes it."""
    out = boxes1.new_zeros(boxes1.shape[0])
    if out.numel() == 0:
        return out
    near = ~_skippable(kind.reach(boxes1), kind.reach(boxes2), 0.0)
    index = near.nonzero().squeeze(1)
    for part in chunks(index.numel(), PAIR_CHUNK):
        rows = index[part]
        out[rows] = kind.iou_of_pairs(boxes1[rows], boxes2[rows], mode_flag)
    return out


def near_pairs(first: Reach, second: Reach, margin: float = 0.0) -> tuple[Tensor, Tensor]:
    """(i, j) of every pair of the (N,) and (M,) boxes that cannot be skipped, row-major."""
    columns = second.column()
    rows_per_chunk = max(1, GRID_CHUNK // max(1, second.x.shape[0]))
    found_i, found_j = [], []
    for part in chunks(first.x.shape[0], rows_per_chunk):
        i, j = (~_skippable(first.row(part), columns, margin)).nonzero(as_tuple=True)
        found_i.append(i + part.start)
        found_j.append(j)
    if not found_i:
        empty = torch.zeros(0, dtype=torch.long, device=first.x.device)
        return empty, empty
    return torch.cat(found_i), torch.cat(found_j)


def iou_grid(kind: BoxKind, boxes1: Tensor, boxes2: Tensor, mode_flag: int = 0) -> Tensor:
    """IoU (or IoF) of every pair of (N, ·) and (M, ·) boxes: (N * M,), row-major."""
    n, m = boxes1.shape[0], boxes2.shape[0]
    out = boxes1.new_zeros(n * m)
    i, j = near_pairs(kind.reach(boxes1), kind.reach(boxes2))
    for part in chunks(i.numel(), PAIR_CHUNK):
        rows, cols = i[part], j[part]
        out[rows * m + cols] = kind.iou_of_pairs(boxes1[rows], boxes2[cols], mode_flag)
    return out


#: Devices whose mmcv kernel (nms_rotated, nms_quadri) suppresses a box whose IoU equals the
#: threshold (the CPU kernels: ``>=``); elsewhere only above it (the CUDA kernels: ``>``).
SUPPRESS_AT_EQUAL = {"cpu": True}


def suppression(kind: BoxKind, boxes: Tensor, threshold: float, at_equal: bool) -> Suppresses:
    """Whether ranked box i suppresses ranked box j: IoU(i, j) against the threshold."""
    # Boxes that do not meet have IoU exactly 0 and are not computed: they suppress
    # only when 0 passes the threshold.
    far_suppresses = threshold <= 0.0 if at_equal else threshold < 0.0

    def suppresses(rows: Tensor, cols: Tensor, upper: bool) -> Tensor:
        first, second = boxes[rows], boxes[cols]
        out = torch.full((rows.numel(), cols.numel()), far_suppresses, dtype=torch.bool, device=boxes.device)
        i, j = near_pairs(kind.reach(first), kind.reach(second))
        if upper:
            ahead = i < j
            i, j = i[ahead], j[ahead]
        for part in chunks(i.numel(), PAIR_CHUNK):
            a, b = i[part], j[part]
            iou = kind.iou_of_pairs(first[a], second[b], 0)
            out[a, b] = iou >= threshold if at_equal else iou > threshold
        return out

    return suppresses
