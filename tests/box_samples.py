"""Realistic boxes for the box-op tests and benchmarks: detector outputs around objects, FPN RoIs.

Detections cluster around objects (a detector proposes many jittered boxes per object)
with some background boxes; scores are uniform, or quantised to make ties. RoIs are sized
as MMDetection's RoI extractor assigns them to a level (16 to 112 pixels on P2, stride 4).
"""

from __future__ import annotations

import torch
from torch import Tensor


def detections(
    n: int,
    *,
    objects: int = 20,
    classes: int = 1,
    seed: int = 0,
    image: tuple[int, int] = (1333, 800),
    jitter: float = 0.15,
    background: float = 0.3,
    ties: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """(boxes (n, 4) x1y1x2y2, scores (n,), labels (n,)) as float32 / int64."""
    g = torch.Generator().manual_seed(seed)
    width, height = image
    extent = torch.tensor([width, height], dtype=torch.float32)
    centre = torch.rand(max(objects, 1), 2, generator=g) * extent
    size = torch.exp(torch.empty(max(objects, 1), 2).uniform_(3.0, 5.5, generator=g))
    which = torch.randint(0, max(objects, 1), (n,), generator=g)
    c = centre[which] + torch.randn(n, 2, generator=g) * size[which] * jitter
    s = size[which] * torch.exp(torch.randn(n, 2, generator=g) * jitter)
    loose = torch.rand(n, generator=g) < background
    k = int(loose.sum())
    c[loose] = torch.rand(k, 2, generator=g) * extent
    s[loose] = torch.exp(torch.empty(k, 2).uniform_(2.5, 6.0, generator=g))
    boxes = torch.cat([c - s / 2, c + s / 2], 1)
    scores = torch.rand(n, generator=g)
    if ties:
        scores = (scores * 8).floor() / 8
    labels = torch.randint(0, max(classes, 1), (n,), generator=g)
    return boxes, scores, labels


def class_offset(boxes: Tensor, labels: Tensor) -> Tensor:
    """mmcv's batched_nms shift: each class moved beyond the others (max coordinate + 1 per class)."""
    return boxes + labels[:, None].to(boxes) * (boxes.max() + 1)


def fpn_rois(
    count: int,
    *,
    batch: int = 2,
    image: tuple[int, int] = (1333, 800),
    sizes: tuple[float, float] = (16.0, 112.0),
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """(count, 5) RoIs (batch index, x1, y1, x2, y2) in image pixels, log-uniform sizes in ``sizes``."""
    g = torch.Generator().manual_seed(seed)
    width, height = image
    centre = torch.rand(count, 2, generator=g) * torch.tensor([width, height], dtype=torch.float32)
    low, high = torch.log(torch.tensor(sizes[0])), torch.log(torch.tensor(sizes[1]))
    wh = torch.exp(torch.rand(count, 2, generator=g) * (high - low) + low)
    index = torch.randint(0, batch, (count, 1), generator=g).float()
    return torch.cat([index, centre - wh / 2, centre + wh / 2], 1).to(dtype)
