"""box_iou_rotated at detection sizes: 500 x 500 boxes, spread over an image and crowded."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch


def _boxes(n: int, spread: float, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    b = torch.rand(n, 5, generator=gen)
    b[:, :2] *= spread
    b[:, 2:4] = b[:, 2:4] * 60 + 4
    b[:, 4] = (b[:, 4] - 0.5) * 3.2
    return b


def _grid(spread: float, mode_flag: int) -> Callable[[Any], Callable[[], None]]:
    def make(ext: Any) -> Callable[[], None]:
        b1, b2 = _boxes(500, spread, 0), _boxes(500, spread, 1)
        ious = torch.zeros(500 * 500)
        return lambda: ext.box_iou_rotated(b1, b2, ious, mode_flag=mode_flag, aligned=False)

    return make


def _aligned(ext: Any) -> Callable[[], None]:
    b1 = _boxes(20000, 1024.0, 2)
    b2 = b1 + torch.randn(20000, 5, generator=torch.Generator().manual_seed(3)) * 5
    ious = torch.zeros(20000)
    return lambda: ext.box_iou_rotated(b1, b2, ious, mode_flag=0, aligned=True)


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], None]]]]:
    yield "500x500 iou, boxes over a 1024px image", _grid(1024.0, 0)
    yield "500x500 iof, crowded (200px, most pairs meet)", _grid(200.0, 1)
    yield "20000 aligned pairs (assigner-style)", _aligned
