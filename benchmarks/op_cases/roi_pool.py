"""RoIPool (compiled mmcv has no CPU kernel for it: mmfix's times only), box-head sizes."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch
from box_samples import fpn_rois

#: label, RoIs, output size, stride, channels, RoI sizes (pixels)
POOL_CASES = [
    ("stride 16 (C4), 512 RoIs, 1024 channels, 7x7", 512, 7, 16, 1024, (32.0, 512.0)),
    ("P2, 512 RoIs, 256 channels, 7x7", 512, 7, 4, 256, (16.0, 112.0)),
]


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], Any]]]]:
    for label, count, size, stride, channels, sizes in POOL_CASES:

        def inputs(count=count, size=size, stride=stride, channels=channels, sizes=sizes):
            g = torch.Generator().manual_seed(count)
            features = torch.randn(2, channels, -(-800 // stride), -(-1333 // stride), generator=g)
            rois = fpn_rois(count, sizes=sizes, seed=count)
            shape = (count, channels, size, size)
            return features, rois, shape

        def forward(ext: Any, inputs=inputs, size=size, stride=stride):
            features, rois, shape = inputs()
            output, argmax = torch.zeros(shape), torch.zeros(shape, dtype=torch.int32)
            return lambda: ext.roi_pool_forward(features, rois, output, argmax, size, size, 1.0 / stride)

        def backward(ext: Any, inputs=inputs, size=size, stride=stride):
            features, rois, shape = inputs()
            argmax = torch.zeros(shape, dtype=torch.int32)
            try:
                ext.roi_pool_forward(features, rois, torch.zeros(shape), argmax, size, size, 1.0 / stride)
            except RuntimeError:
                pass  # no CPU kernel: the runner then times mmfix alone
            grad_output, grad_input = torch.randn(shape), torch.zeros_like(features)
            return lambda: ext.roi_pool_backward(grad_output, rois, argmax, grad_input, size, size, 1.0 / stride)

        yield f"forward {label}", forward
        yield f"backward {label}", backward
