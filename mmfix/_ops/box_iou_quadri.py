"""``box_iou_quadri``: IoU / IoF of quadrilaterals (x1, y1, ..., x4, y4), as ``mmcv.ops.box_iou_quadri`` calls it.

``ious`` receives the N * M values, row-major (or the N values of aligned pairs). The
arithmetic is mmcv's ``single_box_iou_quadri`` (``_rotated_boxes``): the pair is shifted
by the mean of its eight corners, the areas are fan sums from corner 0, and the
intersection uses the rotated boxes' candidate vertices and hull, so the results are the
CPU kernel's to the bit. As in mmcv, corners are expected in order around the quadrilateral,
and "a corner inside the other quadrilateral" is tested against the parallelogram its
corners 0, 1 and 3 span (exact for rectangles and parallelograms). float32 only, as the kernel.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_checks as check
from ._rotated_boxes import MODES, QUADRI, iou_grid, iou_pairs

_OP = "box_iou_quadri"
_LAYOUT = "(x1, y1, x2, y2, x3, y3, x4, y4)"


def box_iou_quadri(boxes1: Tensor, boxes2: Tensor, ious: Tensor, mode_flag: int, aligned: bool) -> None:
    check.boxes(_OP, "boxes1", boxes1, (8,), _LAYOUT)
    check.boxes(_OP, "boxes2", boxes2, (8,), _LAYOUT)
    mode = check.choice(_OP, "mode_flag", mode_flag, {k: repr(v) for k, v in MODES.items()})
    check.same_device(_OP, boxes1=boxes1, boxes2=boxes2, ious=ious)
    for name, value in (("boxes1", boxes1), ("boxes2", boxes2), ("ious", ious)):
        check.dtype(_OP, name, value, (torch.float32,), "mmcv's kernel reads float32 on every device")
    rows, cols = boxes1.shape[0], boxes2.shape[0]
    with torch.no_grad():
        if aligned:
            if rows != cols:
                check.numel(_OP, "boxes2", boxes2, rows * 8, f"aligned=True with {rows} boxes in boxes1")
            check.numel(_OP, "ious", ious, rows, "aligned=True (one value per pair)")
            values = iou_pairs(QUADRI, boxes1, boxes2, mode)
        else:
            check.numel(_OP, "ious", ious, rows * cols, f"aligned=False with {rows} x {cols} boxes")
            values = iou_grid(QUADRI, boxes1, boxes2, mode)
        ious.copy_(values.view(ious.shape))
