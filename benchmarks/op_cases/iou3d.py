"""iou3d: BEV overlaps and 3D NMS as MMDetection3D's heads use them (nms_pre 4096 in FCAF3D-style heads).

Compiled mmcv has no CPU kernel for these, so only mmfix's time is printed.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch


def _boxes(n: int, objects: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    centres = torch.rand(objects, 7, generator=gen) * torch.tensor([70.0, 80.0, 3.0, 4.0, 4.0, 2.0, 6.28])
    centres[:, 3:6] += 0.5
    which = torch.randint(0, objects, (n,), generator=gen)
    boxes = centres[which] + torch.randn(n, 7, generator=gen) * torch.tensor([0.4, 0.4, 0.1, 0.2, 0.2, 0.1, 0.2])
    boxes[:, 3:6] = boxes[:, 3:6].clamp(min=0.2)
    return boxes.contiguous()


def _nms(name: str, objects: int, threshold: float) -> Callable[[Any], Callable[[], None]]:
    def make(ext: Any) -> Callable[[], None]:
        boxes = _boxes(4096, objects, 0)
        keep = torch.zeros(4096, dtype=torch.long)
        num_out = torch.zeros((), dtype=torch.long)
        return lambda: getattr(ext, name)(boxes, keep, num_out, nms_overlap_thresh=threshold)

    return make


def _overlap(ext: Any) -> Callable[[], None]:
    a, b = _boxes(500, 100, 1), _boxes(500, 100, 2)
    out = torch.zeros(500, 500)
    return lambda: ext.iou3d_boxes_overlap_bev_forward(a, b, out)


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], None]]]]:
    yield "boxes_overlap_bev 500x500", _overlap
    yield "nms3d 4096 boxes, 300 objects, 0.5", _nms("iou3d_nms3d_forward", 300, 0.5)
    yield "nms3d 4096 boxes, 60 objects, 0.25", _nms("iou3d_nms3d_forward", 60, 0.25)
    yield "nms3d_normal 4096 boxes, 300 objects, 0.5", _nms("iou3d_nms3d_normal_forward", 300, 0.5)
