"""``nms_quadri``: greedy NMS of quadrilaterals (x1, y1, ..., x4, y4), as ``mmcv.ops.nms_quadri`` calls it.

Everything ``nms_rotated`` says holds (ranking by ``scores.sort``, the CPU kernel's IoU to
the bit, ``>=`` on CPU and ``>`` elsewhere, the label column of ``multi_label`` skipped),
with ``single_box_iou_quadri`` as the overlap. float32 and float64 (the CPU kernel's
types); float16 (the CUDA kernel's) is computed in float32.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_checks as check
from ._greedy_nms import greedy_keep
from ._rotated_boxes import QUADRI, SUPPRESS_AT_EQUAL, suppression

_OP = "nms_quadri"
_LAYOUT = "(x1, y1, ..., x4, y4[, label])"


def nms_quadri(
    dets: Tensor, scores: Tensor, order: Tensor, dets_sorted: Tensor, iou_threshold: float, multi_label: int
) -> Tensor:
    columns = (9,) if multi_label else (8,)
    check.boxes(_OP, "dets", dets, columns, _LAYOUT)
    check.same_device(_OP, dets=dets, scores=scores)
    check.dtype(_OP, "dets", dets, (torch.float32, torch.float64, torch.float16), "mmcv's kernels take these")
    check.scores(_OP, "scores", scores, dets.shape[0])
    check.dtype(_OP, "scores", scores, (dets.dtype,), "the kernels require the dtype of `dets`")
    with torch.no_grad():
        if dets.shape[0] == 0:
            return torch.zeros(0, dtype=torch.long, device=dets.device)
        ranked = scores.sort(0, descending=True)[1]
        boxes = dets[ranked, :8]
        if boxes.dtype == torch.float16:
            boxes = boxes.float()
        # The kernels take the threshold as a C++ float.
        threshold = torch.tensor(float(iou_threshold), dtype=torch.float32).item()
        at_equal = SUPPRESS_AT_EQUAL.get(dets.device.type, False)
        kept = greedy_keep(boxes.shape[0], suppression(QUADRI, boxes, threshold, at_equal), boxes.device)
        return ranked[kept]
