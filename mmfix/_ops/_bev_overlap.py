"""The bird's-eye-view overlap of 3D boxes as mmcv's iou3d CUDA kernel computes it (OpenPCDet's).

Boxes are (x, y, z, dx, dy, dz, heading); only x, y, dx, dy and the heading (counter-
clockwise, as box_iou_rotated's angle) count. ``box_overlap`` of
``iou3d_cuda_kernel.cuh``, step by step in float32, vectorised over box pairs:

* corners: (x ± dx/2, y ± dy/2) rotated about the centre by ``cos``/``sin`` of the heading;
* candidates: the 16 proper crossings of an edge of a with an edge of b (a bounding-box
  test, then strictly opposite sides: touching edges do not count), the crossing point
  from the kernel's formula (its line-line fallback when |s5 - s1| <= EPS = 1e-8); then,
  for each corner k, b's corner k if inside a, a's corner k if inside b — "inside" with a
  MARGIN of 1e-2, so a corner up to 0.01 outside the other box counts as inside, and
  boxes less than 0.01 apart can overlap a little;
* their mean (summed in order) is the centre; the kernel's bubble sort is a stable sort
  by ``atan2`` about it; the area is the fan sum from the first point, in order, halved.

Where edges of the two boxes are collinear (boxes sharing an edge, nested boxes with the
same heading) the crossing tests decide on rounding noise and the kernel can add a point
far off the true outline: the area it returns is then not the true one (shared-edge pairs
at random headings: about 1 in 20), and which pairs go wrong, and how, depends on the last
bit of every operation. So this follows the GPU's arithmetic (``_cuda_float``): the
products nvcc fuses into multiply-adds, libdevice's ``sinf``/``cosf``, and the two cross
products the compiler shares (``s5 = -s2``, neither fused). Only ``atan2f`` (the order of
points at equal angles about the centre) is PyTorch's.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_boxes
from ._cuda_float import cosf, mul_add, mul_sub, sinf
from ._rotated_boxes import PAIR_CHUNK, chunks

EPS = 1e-8
MARGIN = 1e-2
#: Circles further apart than this (absolute, on top of the relative 1e-3) cannot have a
#: candidate point: no crossing, and no corner within MARGIN of the other box.
FAR_MARGIN = 0.05


def corners(boxes: Tensor) -> tuple[Tensor, Tensor]:
    """The 4 BEV corners (P, 4) of (P, 7) boxes, in the kernel's order."""
    cx, cy = boxes[:, 0:1], boxes[:, 1:2]
    half_x, half_y = boxes[:, 3:4] / 2, boxes[:, 4:5] / 2
    x1, y1, x2, y2 = cx - half_x, cy - half_y, cx + half_x, cy + half_y
    px = torch.cat((x1, x2, x2, x1), 1)
    py = torch.cat((y1, y1, y2, y2), 1)
    cos, sin = cosf(boxes[:, 6:7]), sinf(boxes[:, 6:7])
    ux, uy = px - cx, py - cy
    return mul_sub(ux, cos, uy, sin) + cx, mul_add(ux, sin, uy, cos) + cy


def _inside(boxes: Tensor, px: Tensor, py: Tensor) -> Tensor:
    """check_in_box2d: are the points (P, 4) inside the boxes (P, 7), with MARGIN."""
    cx, cy = boxes[:, 0:1], boxes[:, 1:2]
    cos, sin = cosf(-boxes[:, 6:7]), sinf(-boxes[:, 6:7])
    ux, uy = px - cx, py - cy
    rot_x = mul_sub(ux, cos, uy, sin)  # ux * cos + uy * (-sin), compiled as a subtraction
    rot_y = mul_add(ux, sin, uy, cos)
    return (rot_x.abs() < boxes[:, 3:4] / 2 + MARGIN) & (rot_y.abs() < boxes[:, 4:5] / 2 + MARGIN)


def _side(ax: Tensor, ay: Tensor, bx: Tensor, by: Tensor, ox: Tensor, oy: Tensor) -> Tensor:
    # cross(p1, p2, p0) = (p1.x - p0.x) * (p2.y - p0.y) - (p2.x - p0.x) * (p1.y - p0.y)
    return mul_sub(ax - ox, by - oy, bx - ox, ay - oy)


def _crossings(ax: Tensor, ay: Tensor, bx: Tensor, by: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """intersection() of each edge of a (dim 1) with each edge of b (dim 2): x, y, found (P, 4, 4)."""
    p0x, p0y = ax[:, :, None], ay[:, :, None]
    p1x, p1y = torch.roll(ax, -1, 1)[:, :, None], torch.roll(ay, -1, 1)[:, :, None]
    q0x, q0y = bx[:, None, :], by[:, None, :]
    q1x, q1y = torch.roll(bx, -1, 1)[:, None, :], torch.roll(by, -1, 1)[:, None, :]
    boxes_meet = (
        (torch.minimum(p0x, p1x) <= torch.maximum(q0x, q1x))
        & (torch.minimum(q0x, q1x) <= torch.maximum(p0x, p1x))
        & (torch.minimum(p0y, p1y) <= torch.maximum(q0y, q1y))
        & (torch.minimum(q0y, q1y) <= torch.maximum(p0y, p1y))
    )
    s1 = _side(q0x, q0y, p1x, p1y, p0x, p0y)
    s3 = _side(p0x, p0y, q1x, q1y, q0x, q0y)
    s4 = _side(q1x, q1y, p1x, p1y, q0x, q0y)
    # s2 = cross(p1, q1, p0) and s5 = cross(q1, p1, p0) have the same two products: the
    # compiler computes them once, rounded, and fuses neither, so s5 is exactly -s2.
    first = (p1x - p0x) * (q1y - p0y)
    second = (q1x - p0x) * (p1y - p0y)
    s2, s5 = first - second, second - first
    found = boxes_meet & (s1 * s2 > 0) & (s3 * s4 > 0)
    gap = s5 - s1
    x = mul_sub(s5, q0x, s1, q1x) / gap
    y = mul_sub(s5, q0y, s1, q1y) / gap
    # Nearly parallel: the kernel intersects the two lines in general form instead.
    a0, b0, c0 = p0y - p1y, p1x - p0x, mul_sub(p0x, p1y, p1x, p0y)
    a1, b1, c1 = q0y - q1y, q1x - q0x, mul_sub(q0x, q1y, q1x, q0y)
    d = mul_sub(a0, b1, a1, b0)
    steep = gap.abs() > EPS
    x = torch.where(steep, x, mul_sub(b0, c1, b1, c0) / d)
    y = torch.where(steep, y, mul_sub(a1, c0, a0, c1) / d)
    return x, y, found


def overlap_of_pairs(boxes_a: Tensor, boxes_b: Tensor) -> Tensor:
    """box_overlap (the BEV intersection area) of each aligned pair of (P, 7) float32 boxes."""
    n = boxes_a.shape[0]
    ax, ay = corners(boxes_a)
    bx, by = corners(boxes_b)
    cross_x, cross_y, found = _crossings(ax, ay, bx, by)
    b_in_a, a_in_b = _inside(boxes_a, bx, by), _inside(boxes_b, ax, ay)
    # The kernel's order: crossings (edge of a, then edge of b), then per corner k: b's, a's.
    xs = torch.cat((cross_x.reshape(n, 16), torch.stack((bx, ax), 2).reshape(n, 8)), 1)
    ys = torch.cat((cross_y.reshape(n, 16), torch.stack((by, ay), 2).reshape(n, 8)), 1)
    valid = torch.cat((found.reshape(n, 16), torch.stack((b_in_a, a_in_b), 2).reshape(n, 8)), 1)
    zero = xs.new_zeros(())
    xs = torch.where(valid, xs, zero)
    ys = torch.where(valid, ys, zero)
    count = valid.sum(1)
    centre_x = xs.new_zeros(n)
    centre_y = xs.new_zeros(n)
    for k in range(xs.shape[1]):  # summed in order, as the kernel does
        centre_x = centre_x + xs[:, k]
        centre_y = centre_y + ys[:, k]
    centre_x = centre_x / count.to(xs.dtype)
    centre_y = centre_y / count.to(xs.dtype)
    angle = torch.atan2(ys - centre_y[:, None], xs - centre_x[:, None])
    key = torch.where(valid, angle, torch.full_like(angle, float("inf")))
    order = torch.sort(key, dim=1, stable=True)[1]
    xs, ys = xs.gather(1, order), ys.gather(1, order)
    x0, y0 = xs[:, :1], ys[:, :1]
    ux, uy = xs - x0, ys - y0
    terms = mul_sub(ux[:, :-1], uy[:, 1:], uy[:, :-1], ux[:, 1:])
    area = xs.new_zeros(n)
    for k in range(terms.shape[1]):  # the first cnt - 1 terms, in order
        area = area + torch.where(k < count - 1, terms[:, k], zero)
    return area.abs() / 2


def iou_of_pairs(boxes_a: Tensor, boxes_b: Tensor) -> Tensor:
    """iou_bev: the overlap over the union (at least EPS) of aligned (P, 7) pairs."""
    overlap = overlap_of_pairs(boxes_a, boxes_b)
    union = mul_add(boxes_a[:, 3], boxes_a[:, 4], boxes_b[:, 3], boxes_b[:, 4]) - overlap
    return overlap / torch.fmax(union, union.new_tensor(EPS))


def near_pairs(boxes_a: Tensor, boxes_b: Tensor) -> tuple[Tensor, Tensor]:
    """(i, j) of the pairs of (N, 7) and (M, 7) boxes that may have a candidate point, row-major."""
    return _rotated_boxes.near_pairs(_reach(boxes_a), _reach(boxes_b), margin=FAR_MARGIN)


def _reach(boxes: Tensor) -> _rotated_boxes.Reach:
    # This kernel tests corners by rotating them into the box's frame: no thin-box strips.
    radius = _rotated_boxes.circumradius(boxes[:, 3], boxes[:, 4])
    never_thin = torch.full_like(radius, float("inf"))
    return _rotated_boxes.Reach(boxes[:, 0], boxes[:, 1], radius, never_thin, torch.zeros_like(radius))


def overlap_grid(boxes_a: Tensor, boxes_b: Tensor) -> Tensor:
    """box_overlap of every pair: (N, M); pairs too far apart for any candidate are 0, as in the kernel."""
    out = boxes_a.new_zeros(boxes_a.shape[0], boxes_b.shape[0])
    i, j = near_pairs(boxes_a, boxes_b)
    for part in chunks(i.numel(), PAIR_CHUNK):
        rows, cols = i[part], j[part]
        out[rows, cols] = overlap_of_pairs(boxes_a[rows], boxes_b[cols])
    return out


def normal_iou_grid(boxes_a: Tensor, boxes_b: Tensor) -> Tensor:
    """iou_normal of every pair (N, M): the axis-aligned IoU, the heading ignored."""
    a, b = boxes_a[:, None, :], boxes_b[None, :, :]
    left = torch.fmax(a[..., 0] - a[..., 3] / 2, b[..., 0] - b[..., 3] / 2)
    right = torch.fmin(a[..., 0] + a[..., 3] / 2, b[..., 0] + b[..., 3] / 2)
    top = torch.fmax(a[..., 1] - a[..., 4] / 2, b[..., 1] - b[..., 4] / 2)
    bottom = torch.fmin(a[..., 1] + a[..., 4] / 2, b[..., 1] + b[..., 4] / 2)
    zero = boxes_a.new_zeros(())
    inter = torch.fmax(right - left, zero) * torch.fmax(bottom - top, zero)
    union = a[..., 3] * a[..., 4] + b[..., 3] * b[..., 4] - inter
    return inter / torch.fmax(union, union.new_tensor(EPS))
