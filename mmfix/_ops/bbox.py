"""mmcv's ``bbox_overlaps`` (ops/csrc/pytorch/cpu/bbox_overlaps_cpu.cpp and the CUDA kernel).

IoU (mode 0) or intersection over the first box's area (mode 1, "iof"), for every pair
(``aligned=False``: an (m, n) matrix) or row by row (``aligned=True``: m values), with
``offset`` (0 or 1) added to widths and heights. The two compiled kernels differ for
degenerate boxes: the CPU one divides by the area as it is, the CUDA one by
``max(area, offset)``; each device gets its own kernel's arithmetic (``KERNELS``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class _Kernel(NamedTuple):
    width_ceiling: float | None  # the CPU kernel clamps widths and heights to INT_MAX as a float
    floor_denominator: bool  # the CUDA kernel divides by fmaxf(denominator, offset)


#: Each device's compiled kernel (others compute as the CPU one).
KERNELS = {
    "cpu": _Kernel(width_ceiling=2147483648.0, floor_denominator=False),
    "cuda": _Kernel(width_ceiling=None, floor_denominator=True),
}

_MODES = {0: "iou", 1: "iof"}


def bbox_overlaps(bboxes1: Tensor, bboxes2: Tensor, ious: Tensor, mode: int, aligned: bool, offset: int) -> None:
    """Write the overlaps of ``bboxes1`` and ``bboxes2`` into ``ious``."""
    _check(bboxes1, bboxes2, ious, int(mode), bool(aligned), int(offset))
    offset = int(offset)
    kernel = KERNELS.get(bboxes1.device.type, KERNELS["cpu"])
    if aligned:
        a, b = bboxes1, bboxes2
    else:
        a, b = bboxes1[:, None, :], bboxes2[None, :, :]
    lt = torch.max(a[..., :2], b[..., :2])
    rb = torch.min(a[..., 2:], b[..., 2:])
    wh = (rb - lt + offset).clamp(0.0, kernel.width_ceiling)
    overlap = wh[..., 0] * wh[..., 1]
    area1 = (bboxes1[:, 2] - bboxes1[:, 0] + offset) * (bboxes1[:, 3] - bboxes1[:, 1] + offset)
    if not aligned:
        area1 = area1[:, None]
    if int(mode) == 0:
        area2 = (bboxes2[:, 2] - bboxes2[:, 0] + offset) * (bboxes2[:, 3] - bboxes2[:, 1] + offset)
        denominator = area1 + area2 - overlap
    else:
        denominator = area1
    if kernel.floor_denominator:
        denominator = denominator.clamp(min=float(offset))
    ious.copy_((overlap / denominator).reshape(ious.shape))


def _check(bboxes1: Tensor, bboxes2: Tensor, ious: Tensor, mode: int, aligned: bool, offset: int) -> None:
    if mode not in _MODES:
        raise ValueError(f"mmcv op `bbox_overlaps`: mode must be 0 (iou) or 1 (iof), got {mode!r}.")
    if offset not in (0, 1):
        raise ValueError(f"mmcv op `bbox_overlaps`: offset must be 0 or 1, got {offset!r}.")
    for name, boxes in (("bboxes1", bboxes1), ("bboxes2", bboxes2)):
        if boxes.dim() != 2 or boxes.shape[1] != 4:
            raise ValueError(
                f"mmcv op `bbox_overlaps` takes {name} of shape (N, 4) as (x1, y1, x2, y2), got {tuple(boxes.shape)}."
            )
    rows, cols = bboxes1.shape[0], bboxes2.shape[0]
    if aligned and rows != cols:
        raise ValueError(
            f"mmcv op `bbox_overlaps` with aligned=True pairs the boxes row by row: bboxes1 has {rows} rows, "
            f"bboxes2 {cols}. Pass as many of each, or aligned=False for all pairs."
        )
    expected = rows if aligned else rows * cols
    if ious.numel() != expected:
        raise ValueError(
            f"mmcv op `bbox_overlaps` writes {expected} values into `ious`, which has shape {tuple(ious.shape)}: "
            f"pass a tensor of shape ({rows},) for aligned=True or ({rows}, {cols}) for aligned=False."
        )
