"""CARAFE upsampling in mmdet's FPN_CARAFE neck (Faster R-CNN, 1333x800 input, batch 2).

``upsample_cfg=dict(type='carafe', up_kernel=5, up_group=1, ...)``: 256 channels doubled in
size, from stride 8 to 4 (the largest level) and from stride 16 to 8. Compiled mmcv has no CPU
kernel for CARAFE, so only mmfix's times print.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

LEVELS = [("stride 8 -> 4, 2x256x100x168", 100, 168), ("stride 16 -> 8, 2x256x50x84", 50, 84)]
KERNEL, GROUP, SCALE = 5, 1, 2


def _tensors(height: int, width: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    masks = torch.rand(2, GROUP * KERNEL * KERNEL, height * SCALE, width * SCALE, generator=g)
    return {
        "features": torch.randn(2, 256, height, width, generator=g),
        "masks": masks / masks.sum(1, keepdim=True),  # CARAFEPack's softmax-normalised kernels
        "top_grad": torch.randn(2, 256, height * SCALE, width * SCALE, generator=g),
    }


def _forward(height: int, width: int) -> Callable[[Any], Callable[[], None]]:
    def make(ext: Any) -> Callable[[], None]:
        t = _tensors(height, width)
        output = torch.empty_like(t["top_grad"])

        def run() -> None:
            scratch = [torch.zeros_like(t["features"]), torch.zeros_like(output), torch.zeros_like(t["masks"])]
            ext.carafe_forward(t["features"], t["masks"], *scratch, output, kernel_size=KERNEL, group_size=GROUP,
                               scale_factor=SCALE)  # fmt: skip

        return run

    return make


def _backward(height: int, width: int) -> Callable[[Any], Callable[[], None]]:
    def make(ext: Any) -> Callable[[], None]:
        t = _tensors(height, width)
        rfeatures = t["features"].permute(0, 2, 3, 1).contiguous()

        def run() -> None:
            top = t["top_grad"]
            scratch = [
                torch.zeros_like(top),
                torch.zeros_like(top),
                torch.zeros_like(rfeatures),
                torch.zeros_like(t["masks"]),
            ]
            grads = [torch.zeros_like(t["features"]), torch.zeros_like(t["masks"])]
            ext.carafe_backward(top, rfeatures, t["masks"], *scratch, *grads, kernel_size=KERNEL, group_size=GROUP,
                                scale_factor=SCALE)  # fmt: skip

        return run

    return make


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], None]]]]:
    for label, height, width in LEVELS:
        yield f"forward, {label}", _forward(height, width)
        yield f"backward, {label}", _backward(height, width)
