"""roi_align_rotated as MMRotate's RoI extractor calls it: 1000 RoIs x 256 channels x 7x7, sample_num 2."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch


def _inputs(num_rois: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    features = torch.randn(2, 256, 200, 336, generator=gen)  # stride 4 of a 800 x 1344 batch of 2
    rois = torch.zeros(num_rois, 6)
    rois[:, 0] = torch.randint(0, 2, (num_rois,), generator=gen).float()
    rois[:, 1] = torch.rand(num_rois, generator=gen) * 1344
    rois[:, 2] = torch.rand(num_rois, generator=gen) * 800
    rois[:, 3:5] = torch.rand(num_rois, 2, generator=gen) * 200 + 8
    rois[:, 5] = (torch.rand(num_rois, generator=gen) - 0.5) * 3.1
    return features, rois


_PARAMS = {
    "pooled_height": 7,
    "pooled_width": 7,
    "spatial_scale": 0.25,
    "sampling_ratio": 2,
    "aligned": True,
    "clockwise": True,
}


def _forward(ext: Any) -> Callable[[], None]:
    features, rois = _inputs(1000)
    output = torch.zeros(1000, 256, 7, 7)
    return lambda: ext.roi_align_rotated_forward(features, rois, output, **_PARAMS)


def _forward_backward(ext: Any) -> Callable[[], None]:
    features, rois = _inputs(1000)
    output = torch.zeros(1000, 256, 7, 7)
    grad_output = torch.randn(1000, 256, 7, 7)
    grad_input = torch.zeros_like(features)

    def run() -> None:
        ext.roi_align_rotated_forward(features, rois, output, **_PARAMS)
        ext.roi_align_rotated_backward(grad_output, rois, grad_input, **_PARAMS)

    return run


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], None]]]]:
    yield "forward 1000 RoIs x 256 ch x 7x7, sample 2", _forward
    yield "forward+backward, same", _forward_backward
