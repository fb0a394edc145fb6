"""DCN (deformable convolution v1) 3x3 layers of a ResNet-50 backbone on a 1333x800 image, batch 2.

mmdet's DCN configs (``dcn=dict(type='DCN'), stage_with_dcn=(False, True, True, True)``)
put one 3x3 deformable conv in each bottleneck of stages 2-4: 128 channels at stride 8,
256 at stride 16, 512 at stride 32. Offsets are a few pixels, as a trained offset conv gives.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

#: (label, channels, height, width) of the feature map (1344x800 after padding to 32).
LAYERS = [
    ("stride 8, 2x128x168x100", 128, 168, 100),
    ("stride 16, 2x256x84x50", 256, 84, 50),
    ("stride 32, 2x512x42x25", 512, 42, 25),
]


def _tensors(channels: int, height: int, width: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "input": torch.randn(2, channels, height, width, generator=g),
        "weight": torch.randn(channels, channels, 3, 3, generator=g) * 0.02,
        "offset": torch.randn(2, 18, height, width, generator=g) * 2,
        "grad_output": torch.randn(2, channels, height, width, generator=g),
    }


KEYWORDS = dict(
    kW=3, kH=3, dW=1, dH=1, padW=1, padH=1, dilationW=1, dilationH=1, group=1, deformable_group=1, im2col_step=2
)


def _forward(channels: int, height: int, width: int) -> Callable[[Any], Callable[[], None]]:
    def make(ext: Any) -> Callable[[], None]:
        t = _tensors(channels, height, width)
        output, empty = torch.empty_like(t["grad_output"]), torch.empty(0)
        return lambda: ext.deform_conv_forward(t["input"], t["weight"], t["offset"], output, empty, empty, **KEYWORDS)

    return make


def _backward(channels: int, height: int, width: int) -> Callable[[Any], Callable[[], None]]:
    def make(ext: Any) -> Callable[[], None]:
        t = _tensors(channels, height, width)
        empty = torch.empty(0)

        def run() -> None:
            grad_input, grad_offset = torch.zeros_like(t["input"]), torch.zeros_like(t["offset"])
            ext.deform_conv_backward_input(
                t["input"], t["offset"], t["grad_output"], grad_input, grad_offset, t["weight"], empty, **KEYWORDS
            )
            grad_weight = torch.zeros_like(t["weight"])
            ext.deform_conv_backward_parameters(
                t["input"], t["offset"], t["grad_output"], grad_weight, empty, empty, scale=1.0, **KEYWORDS
            )

        return run

    return make


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], None]]]]:
    for label, channels, height, width in LAYERS:
        yield f"forward, {label}", _forward(channels, height, width)
        yield f"backward, {label}", _backward(channels, height, width)
