"""``nms_rotated``: greedy NMS of rotated boxes (x_ctr, y_ctr, w, h, angle in radians).

The extension call of ``mmcv.ops.nms_rotated`` (and of ``batched_nms`` with
``type='nms_rotated'``): returns the indices of the kept boxes, best first. As in mmcv
2.1.0's own kernels:

* boxes are ranked by ``scores.sort(0, descending=True)`` (the CPU kernel sorts itself;
  the CUDA kernel gets the same order from the wrapper), and ``order``/``dets_sorted``
  are otherwise unused;
* the overlap is ``single_box_iou_rotated(kept box, later box)``, bit for bit the CPU
  kernel's (``_rotated_boxes``), compared with the threshold rounded to float32;
* ``labels``/``multi_label`` separate nothing: with ``multi_label`` the wrapper appends
  the label as a sixth column, which both kernels skip (classes are kept apart by
  ``batched_nms``'s coordinate offsets instead);
* a box is suppressed at IoU >= threshold on CPU, as the CPU kernel does, and at
  IoU > threshold elsewhere, as the CUDA kernel does (the two differ only for an IoU
  exactly at the threshold, e.g. threshold 0 and boxes that do not meet).

float32 and float64 boxes are computed in their dtype (the CPU kernel takes both);
float16 (which the CUDA kernel takes) is computed in float32.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_checks as check
from ._greedy_nms import greedy_keep
from ._rotated_boxes import ROTATED, SUPPRESS_AT_EQUAL, suppression

_OP = "nms_rotated"
_LAYOUT = "(x_ctr, y_ctr, w, h, angle[, label])"


def nms_rotated(
    dets: Tensor,
    scores: Tensor,
    order: Tensor,
    dets_sorted: Tensor,
    labels: Tensor,
    iou_threshold: float,
    multi_label: int,
) -> Tensor:
    columns = (6,) if multi_label else (5,)
    check.boxes(_OP, "dets", dets, columns, _LAYOUT)
    check.same_device(_OP, dets=dets, scores=scores)
    check.dtype(_OP, "dets", dets, (torch.float32, torch.float64, torch.float16), "mmcv's kernels take these")
    check.scores(_OP, "scores", scores, dets.shape[0])
    check.dtype(_OP, "scores", scores, (dets.dtype,), "the kernels require the dtype of `dets`")
    with torch.no_grad():
        if dets.shape[0] == 0:
            return torch.zeros(0, dtype=torch.long, device=dets.device)
        ranked = scores.sort(0, descending=True)[1]
        boxes = dets[ranked, :5]
        if boxes.dtype == torch.float16:
            boxes = boxes.float()
        # The kernels take the threshold as a C++ float.
        threshold = torch.tensor(float(iou_threshold), dtype=torch.float32).item()
        at_equal = SUPPRESS_AT_EQUAL.get(dets.device.type, False)
        kept = greedy_keep(boxes.shape[0], suppression(ROTATED, boxes, threshold, at_equal), boxes.device)
        return ranked[kept]
