"""``iou3d_*``: MMDetection3D's BEV overlap and 3D NMS (``mmcv.ops.iou3d``).

Boxes are (x, y, z, dx, dy, dz, heading), float32, one per row. In mmcv 2.1.0 these are
CUDA kernels only (compiled mmcv has no CPU version: "implementation for device cpu not
found"); this is their arithmetic (``_bev_overlap``) on any device:

* ``iou3d_boxes_overlap_bev_forward`` writes the BEV intersection *area* of every pair
  into ``ans_iou`` (N, M) — ``boxes_overlap_bev`` and ``boxes_iou3d`` divide it;
* ``iou3d_nms3d_forward`` / ``iou3d_nms3d_normal_forward``: greedy NMS over boxes the
  wrapper has already sorted by score, suppressing at BEV IoU (rotated, or axis-aligned
  with the heading ignored) strictly above the threshold; ``keep[:num_out]`` receives the
  kept positions in ascending order and ``num_out`` their number, the rest of ``keep`` is
  left as it was.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from . import _rotated_checks as check
from ._bev_overlap import iou_of_pairs, near_pairs, normal_iou_grid, overlap_grid
from ._greedy_nms import Suppresses, greedy_keep
from ._rotated_boxes import PAIR_CHUNK, chunks

_LAYOUT = "(x, y, z, dx, dy, dz, heading)"
_FLOAT_ONLY = "mmcv's CUDA kernel reads float32"


def _boxes(op: str, name: str, value: Tensor) -> None:
    check.boxes(op, name, value, (7,), _LAYOUT)
    check.dtype(op, name, value, (torch.float32,), _FLOAT_ONLY)


def iou3d_boxes_overlap_bev_forward(boxes_a: Tensor, boxes_b: Tensor, ans_iou: Tensor) -> None:
    op = "iou3d_boxes_overlap_bev_forward"
    _boxes(op, "boxes_a", boxes_a)
    _boxes(op, "boxes_b", boxes_b)
    check.same_device(op, boxes_a=boxes_a, boxes_b=boxes_b, ans_iou=ans_iou)
    check.dtype(op, "ans_iou", ans_iou, (torch.float32,), _FLOAT_ONLY)
    check.numel(op, "ans_iou", ans_iou, boxes_a.shape[0] * boxes_b.shape[0], "one value per pair of boxes")
    with torch.no_grad():
        ans_iou.copy_(overlap_grid(boxes_a, boxes_b).view(ans_iou.shape))


def _rotated_suppression(boxes: Tensor, threshold: float) -> Suppresses:
    far_suppresses = threshold < 0.0  # boxes too far apart for any overlap have IoU 0

    def suppresses(rows: Tensor, cols: Tensor, upper: bool) -> Tensor:
        first, second = boxes[rows], boxes[cols]
        out = torch.full((rows.numel(), cols.numel()), far_suppresses, dtype=torch.bool, device=boxes.device)
        i, j = near_pairs(first, second)
        if upper:
            ahead = i < j
            i, j = i[ahead], j[ahead]
        for part in chunks(i.numel(), PAIR_CHUNK):
            a, b = i[part], j[part]
            out[a, b] = iou_of_pairs(first[a], second[b]) > threshold
        return out

    return suppresses


def _normal_suppression(boxes: Tensor, threshold: float) -> Suppresses:
    def suppresses(rows: Tensor, cols: Tensor, upper: bool) -> Tensor:
        return normal_iou_grid(boxes[rows], boxes[cols]) > threshold

    return suppresses


def _nms(
    op: str,
    suppression: Callable[[Tensor, float], Suppresses],
    boxes: Tensor,
    keep: Tensor,
    num_out: Tensor,
    nms_overlap_thresh: float,
) -> None:
    _boxes(op, "boxes", boxes)
    check.same_device(op, boxes=boxes, keep=keep)
    check.dtype(op, "keep", keep, (torch.int64,), "the kept indices are written as int64")
    check.numel(op, "keep", keep, boxes.shape[0], "one slot per box")
    check.numel(op, "num_out", num_out, 1, "the number of kept boxes")
    with torch.no_grad():
        # The kernels take the threshold as a C++ float.
        threshold = torch.tensor(float(nms_overlap_thresh), dtype=torch.float32).item()
        kept = greedy_keep(boxes.shape[0], suppression(boxes, threshold), boxes.device)
        keep.view(-1)[: kept.numel()] = kept
        num_out.fill_(kept.numel())


def iou3d_nms3d_forward(boxes: Tensor, keep: Tensor, num_out: Tensor, nms_overlap_thresh: float) -> None:
    _nms("iou3d_nms3d_forward", _rotated_suppression, boxes, keep, num_out, nms_overlap_thresh)


def iou3d_nms3d_normal_forward(boxes: Tensor, keep: Tensor, num_out: Tensor, nms_overlap_thresh: float) -> None:
    _nms("iou3d_nms3d_normal_forward", _normal_suppression, boxes, keep, num_out, nms_overlap_thresh)
