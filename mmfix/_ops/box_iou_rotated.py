"""``box_iou_rotated``: IoU / IoF of rotated boxes (x_ctr, y_ctr, w, h, angle in radians).

The extension call of ``mmcv.ops.box_iou_rotated`` (which flips the angle for
``clockwise=False`` before calling it): ``ious`` receives the N * M values, row-major
(or the N values of aligned pairs). The values are those of mmcv's CPU kernel to the
bit (see ``_rotated_boxes``); the kernel takes float32 only, on CPU and CUDA alike.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_checks as check
from ._rotated_boxes import MODES, ROTATED, iou_grid, iou_pairs

_OP = "box_iou_rotated"
_LAYOUT = "(x_ctr, y_ctr, w, h, angle)"


def box_iou_rotated(boxes1: Tensor, boxes2: Tensor, ious: Tensor, mode_flag: int, aligned: bool) -> None:
    check.boxes(_OP, "boxes1", boxes1, (5,), _LAYOUT)
    check.boxes(_OP, "boxes2", boxes2, (5,), _LAYOUT)
    mode = check.choice(_OP, "mode_flag", mode_flag, {k: repr(v) for k, v in MODES.items()})
    check.same_device(_OP, boxes1=boxes1, boxes2=boxes2, ious=ious)
    for name, value in (("boxes1", boxes1), ("boxes2", boxes2), ("ious", ious)):
        check.dtype(_OP, name, value, (torch.float32,), "mmcv's kernel reads float32 on every device")
    rows, cols = boxes1.shape[0], boxes2.shape[0]
    with torch.no_grad():
        if aligned:
            if rows != cols:
                check.numel(_OP, "boxes2", boxes2, rows * 5, f"aligned=True with {rows} boxes in boxes1")
            check.numel(_OP, "ious", ious, rows, "aligned=True (one value per pair)")
            values = iou_pairs(ROTATED, boxes1, boxes2, mode)
        else:
            check.numel(_OP, "ious", ious, rows * cols, f"aligned=False with {rows} x {cols} boxes")
            values = iou_grid(ROTATED, boxes1, boxes2, mode)
        ious.copy_(values.view(ious.shape))
