"""RoIAlign as MMDetection's RoI extractors run it: FPN levels of a batch of two 1333x800 images,
256 channels, 512-1000 RoIs of the sizes each level receives, 7x7 (box head) and 14x14 (mask head)."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch
from box_samples import fpn_rois

#: label, RoIs, output size, sampling ratio, stride, RoI sizes (pixels), pool mode
ALIGN_CASES = [
    ("P2, 512 RoIs, 7x7", 512, 7, 0, 4, (16.0, 112.0), 1),
    ("P2, 1000 RoIs, 7x7", 1000, 7, 0, 4, (16.0, 112.0), 1),
    ("P2, 512 RoIs, 14x14 (mask head)", 512, 14, 0, 4, (16.0, 112.0), 1),
    ("P2, 512 RoIs, 7x7, sampling_ratio 2", 512, 7, 2, 4, (16.0, 112.0), 1),
    ("P5, 512 RoIs, 7x7", 512, 7, 0, 32, (448.0, 1333.0), 1),
    ("P3, 256 RoIs, 7x7, max pooling", 256, 7, 2, 8, (112.0, 224.0), 0),
]


def _inputs(count: int, size: int, stride: int, sizes: tuple[float, float], pool_mode: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    height, width = -(-800 // stride), -(-1333 // stride)
    features = torch.randn(2, 256, height, width, generator=g)
    rois = fpn_rois(count, sizes=sizes, seed=seed)
    shape = (count, 256, size, size)
    argmax = [torch.zeros(shape) if pool_mode == 0 else torch.zeros(0) for _ in range(2)]
    return features, rois, shape, argmax


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], Any]]]]:
    for label, count, size, ratio, stride, sizes, mode in ALIGN_CASES:
        kwargs = dict(
            aligned_height=size,
            aligned_width=size,
            spatial_scale=1.0 / stride,
            sampling_ratio=ratio,
            pool_mode=mode,
            aligned=True,
        )

        def forward(ext: Any, count=count, size=size, stride=stride, sizes=sizes, mode=mode, kwargs=kwargs):
            features, rois, shape, argmax = _inputs(count, size, stride, sizes, mode, seed=count + size)
            output = torch.zeros(shape)
            return lambda: ext.roi_align_forward(features, rois, output, argmax[0], argmax[1], **kwargs)

        def backward(ext: Any, count=count, size=size, stride=stride, sizes=sizes, mode=mode, kwargs=kwargs):
            features, rois, shape, argmax = _inputs(count, size, stride, sizes, mode, seed=count + size)
            ext.roi_align_forward(features, rois, torch.zeros(shape), argmax[0], argmax[1], **kwargs)
            grad_output = torch.randn(shape)
            grad_input = torch.zeros_like(features)
            return lambda: ext.roi_align_backward(grad_output, rois, argmax[0], argmax[1], grad_input, **kwargs)

        yield f"forward {label}", forward
        yield f"backward {label}", backward
