"""Which 3D boxes contain which points (``mmcv.ops.points_in_boxes_part/all/cpu``).

One test for all three (mmcv's ``check_pt_in_box3d``, see ``_points3d.points_in_boxes``):
boxes are ``[x, y, z, x_size, y_size, z_size, rz]`` with z the bottom centre; a point
is inside when ``|z - centre_z| <= z_size / 2`` and its box-local x and y lie strictly
within half the sizes. ``part`` writes the index of the first containing box (leaving
-1, as the caller fills it, where none does); ``all`` writes 1 for every containing box
(leaving the caller's 0 elsewhere); ``cpu`` writes 0 or 1 for every (box, point).
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, points_in_boxes, slabs

_TYPES = (torch.float16, torch.float32, torch.float64)


def _check(op: str, boxes: torch.Tensor, pts: torch.Tensor, batched: bool) -> None:
    dims = 3 if batched else 2
    if boxes.dim() != dims or pts.dim() != dims or boxes.size(-1) != 7 or pts.size(-1) != 3:
        shape = "(B, T, 7) and (B, M, 3)" if batched else "(T, 7) and (M, 3)"
        raise ValueError(
            f"mmcv op `{op}`: expected boxes and points of shapes {shape}, got {tuple(boxes.shape)} and {tuple(pts.shape)}."
        )
    if batched and boxes.size(0) != pts.size(0):
        raise ValueError(
            f"mmcv op `{op}`: boxes and points have different batch sizes ({boxes.size(0)}, {pts.size(0)})."
        )
    if boxes.dtype != pts.dtype:
        raise TypeError(f"mmcv op `{op}`: boxes are {boxes.dtype} but points are {pts.dtype}; use one type.")


@torch.no_grad()
def points_in_boxes_part_forward(boxes: torch.Tensor, pts: torch.Tensor, box_idx_of_points: torch.Tensor) -> None:
    """``box_idx_of_points`` (B, M): the first box containing each point; untouched where none does."""
    op = "points_in_boxes_part_forward"
    _check(op, boxes, pts, batched=True)
    check_float_types(op, _TYPES, boxes=boxes)
    num_boxes = boxes.size(1)
    if num_boxes == 0:
        return
    for part in slabs(pts.size(1), boxes.size(0) * num_boxes):
        inside, _, _ = points_in_boxes(pts[:, part], boxes)
        hit = inside.any(dim=1)
        first = inside.to(torch.uint8).argmax(dim=1)  # the first maximum: the lowest box index
        current = box_idx_of_points[:, part]
        box_idx_of_points[:, part] = torch.where(hit, first.to(current.dtype), current)


@torch.no_grad()
def points_in_boxes_all_forward(boxes: torch.Tensor, pts: torch.Tensor, box_idx_of_points: torch.Tensor) -> None:
    """``box_idx_of_points`` (B, M, T): 1 where the box contains the point; untouched elsewhere."""
    op = "points_in_boxes_all_forward"
    _check(op, boxes, pts, batched=True)
    check_float_types(op, _TYPES, boxes=boxes)
    if boxes.size(1) == 0:
        return
    for part in slabs(pts.size(1), boxes.size(0) * boxes.size(1)):
        inside, _, _ = points_in_boxes(pts[:, part], boxes)
        box_idx_of_points[:, part].masked_fill_(inside.transpose(1, 2), 1)


@torch.no_grad()
def points_in_boxes_cpu_forward(
    boxes_tensor: torch.Tensor, pts_tensor: torch.Tensor, pts_indices_tensor: torch.Tensor
) -> None:
    """``pts_indices_tensor`` (T, M): 1 where box t contains point m, else 0 (one batch item, float32)."""
    op = "points_in_boxes_cpu_forward"
    _check(op, boxes_tensor, pts_tensor, batched=False)
    check_float_types(op, (torch.float32,), boxes=boxes_tensor)
    if tuple(pts_indices_tensor.shape) != (boxes_tensor.size(0), pts_tensor.size(0)):
        raise ValueError(
            f"mmcv op `{op}`: pts_indices_tensor must be (boxes, points) = "
            f"{(boxes_tensor.size(0), pts_tensor.size(0))}, got {tuple(pts_indices_tensor.shape)}."
        )
    for part in slabs(pts_tensor.size(0), boxes_tensor.size(0)):
        inside, _, _ = points_in_boxes(pts_tensor[None, part], boxes_tensor[None])
        pts_indices_tensor[:, part] = inside[0].to(pts_indices_tensor.dtype)
