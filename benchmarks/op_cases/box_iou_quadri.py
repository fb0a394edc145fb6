"""box_iou_quadri and nms_quadri at detection sizes (500 x 500 quadrilaterals; NMS over 2000)."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch


def _quads(n: int, spread: float, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x, y = torch.rand(n, generator=gen) * spread, torch.rand(n, generator=gen) * spread
    w, h = torch.rand(n, generator=gen) * 60 + 4, torch.rand(n, generator=gen) * 60 + 4
    a = (torch.rand(n, generator=gen) - 0.5) * 3.1
    c, s = torch.cos(a), torch.sin(a)
    corners = []
    for dx, dy in ((-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5)):
        corners += [x + c * dx * w - s * dy * h, y + s * dx * w + c * dy * h]
    return (torch.stack(corners, 1) + torch.randn(n, 8, generator=gen)).contiguous()


def _grid(ext: Any) -> Callable[[], None]:
    q1, q2 = _quads(500, 400.0, 0), _quads(500, 400.0, 1)
    ious = torch.zeros(500 * 500)
    return lambda: ext.box_iou_quadri(q1, q2, ious, mode_flag=0, aligned=False)


def _nms(ext: Any) -> Callable[[], Any]:
    dets = _quads(2000, 1024.0, 2)
    scores = torch.rand(2000, generator=torch.Generator().manual_seed(3))
    order = scores.sort(0, descending=True)[1]
    return lambda: ext.nms_quadri(dets, scores, order, dets[order], 0.3, 0)


def cases() -> Iterator[tuple[str, Callable[[Any], Callable[[], Any]]]]:
    yield "box_iou_quadri 500x500 over a 400px image", _grid
    yield "nms_quadri 2000 quadrilaterals, 0.3", _nms
