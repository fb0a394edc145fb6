"""NMS at the sizes MMDetection runs it: RPN proposals per level, per-class detections.

Boxes cluster around objects as a detector's outputs do (tests/box_samples.py); batched
cases shift each class (or FPN level) apart as mmcv's batched_nms does.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch
from box_samples import class_offset, detections

#: label, boxes, objects, classes (levels), IoU threshold
NMS_CASES = [
    ("1000 boxes, one class, iou 0.7 (RPN level)", 1000, 20, 1, 0.7),
    ("1000 boxes, 80 classes, iou 0.5 (RoI head)", 1000, 20, 80, 0.5),
    ("5000 boxes, 5 levels, iou 0.7 (RPN, batched)", 5000, 40, 5, 0.7),
    ("10000 boxes, one class, iou 0.7", 10000, 60, 1, 0.7),
    ("10000 boxes, 80 classes, iou 0.5", 10000, 60, 80, 0.5),
]


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], Any]]]]:
    for label, n, objects, classes, threshold in NMS_CASES:

        def make(ext: Any, n: int = n, objects: int = objects, classes: int = classes, threshold: float = threshold):
            boxes, scores, labels = detections(n, objects=objects, classes=classes, seed=n)
            boxes = class_offset(boxes, labels)
            return lambda: ext.nms(boxes, scores, iou_threshold=threshold, offset=0)

        yield f"nms {label}", make

    def soft(ext: Any) -> Callable[[], Any]:
        boxes, scores, labels = detections(1000, objects=20, classes=20, seed=3)
        boxes = class_offset(boxes, labels)
        dets = torch.zeros(1000, 5)
        return lambda: ext.softnms(
            boxes, scores, dets, iou_threshold=0.3, sigma=0.5, min_score=1e-3, method=1, offset=0
        )

    yield "softnms 1000 boxes, 20 classes, linear", soft

    def match(ext: Any) -> Callable[[], Any]:
        boxes, scores, _ = detections(1000, objects=20, seed=4)
        dets = torch.cat([boxes, scores[:, None]], 1)
        return lambda: ext.nms_match(dets, iou_threshold=0.5)

    yield "nms_match 1000 boxes, iou 0.5", match
