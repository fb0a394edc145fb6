"""nms_rotated over 2000 detections of a rotated-box head (MMRotate's nms_pre is 2000)."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch


def _detections(n: int, objects: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    centres = torch.rand(objects, 5, generator=gen)
    centres[:, :2] *= 1024
    centres[:, 2:4] = centres[:, 2:4] * 80 + 10
    centres[:, 4] = (centres[:, 4] - 0.5) * 3.1
    which = torch.randint(0, objects, (n,), generator=gen)
    dets = centres[which] + torch.randn(n, 5, generator=gen) * torch.tensor([6.0, 6.0, 5.0, 5.0, 0.1])
    dets[:, 2:4] = dets[:, 2:4].clamp(min=2)
    return dets, torch.rand(n, generator=gen)


def _nms(objects: int, threshold: float) -> Callable[[Any], Callable[[], Any]]:
    def make(ext: Any) -> Callable[[], Any]:
        dets, scores = _detections(2000, objects, 0)
        order = scores.sort(0, descending=True)[1]
        labels = torch.empty(0, dtype=torch.int)
        return lambda: ext.nms_rotated(dets, scores, order, dets[order], labels, threshold, 0)

    return make


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], Any]]]]:
    yield "2000 boxes, 100 objects, iou_threshold 0.1", _nms(100, 0.1)
    yield "2000 boxes, 300 objects, iou_threshold 0.5", _nms(300, 0.5)
    yield "2000 boxes, 1000 objects (few overlaps), 0.7", _nms(1000, 0.7)
