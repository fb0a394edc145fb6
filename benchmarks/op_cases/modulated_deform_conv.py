"""DCNv2 (modulated deformable convolution) 3x3 layers of a ResNet-50 backbone, 1333x800, batch 2.

As mmdet's ``dcn=dict(type='DCNv2')`` configs: stages 2-4, no bias (a norm layer follows).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

from .deform_conv import LAYERS

KEYWORDS = dict(kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1, dilation_h=1, dilation_w=1, group=1,
                deformable_group=1, with_bias=False)  # fmt: skip


def _tensors(channels: int, height: int, width: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "input": torch.randn(2, channels, height, width, generator=g),
        "weight": torch.randn(channels, channels, 3, 3, generator=g) * 0.02,
        "offset": torch.randn(2, 18, height, width, generator=g) * 2,
        "mask": torch.rand(2, 9, height, width, generator=g),
        "grad_output": torch.randn(2, channels, height, width, generator=g),
    }


def _forward(channels: int, height: int, width: int) -> Callable[[Any], Callable[[], None]]:
    def make(ext: Any) -> Callable[[], None]:
        t = _tensors(channels, height, width)
        output, empty = torch.empty_like(t["grad_output"]), torch.empty(0)
        return lambda: ext.modulated_deform_conv_forward(
            t["input"], t["weight"], empty, empty, t["offset"], t["mask"], output, empty, **KEYWORDS
        )

    return make


def _backward(channels: int, height: int, width: int) -> Callable[[Any], Callable[[], None]]:
    def make(ext: Any) -> Callable[[], None]:
        t = _tensors(channels, height, width)
        empty = torch.empty(0)

        def run() -> None:
            grads = [torch.zeros_like(t[k]) for k in ("input", "weight")] + [empty]
            grads += [torch.zeros_like(t[k]) for k in ("offset", "mask")]
            ext.modulated_deform_conv_backward(
                t["input"],
                t["weight"],
                empty,
                empty,
                t["offset"],
                t["mask"],
                empty,
                *grads,
                t["grad_output"],
                **KEYWORDS,
            )

        return run

    return make


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], None]]]]:
    for label, channels, height, width in LAYERS:
        yield f"forward, {label}", _forward(channels, height, width)
        yield f"backward, {label}", _backward(channels, height, width)
