"""Which boxes hold which points: a KITTI-like sweep (20k points) against ground-truth-sized box sets."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import torch

from .voxelize import sweep


def boxes(count: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    centre = torch.stack(
        [
            torch.rand(count, generator=g) * 60 + 5,
            (torch.rand(count, generator=g) - 0.5) * 50,
            torch.full((count,), -1.7),
        ],
        1,
    )
    size = torch.tensor([3.9, 1.6, 1.56]) * (0.8 + 0.4 * torch.rand(count, 3, generator=g))
    angle = (torch.rand(count, 1, generator=g) - 0.5) * 2 * math.pi
    return torch.cat([centre, size, angle], 1).contiguous()


def _cpu(count: int) -> Callable[[ModuleType], Callable[[], Any]]:
    def make(ext: ModuleType) -> Callable[[], Any]:
        points, box = sweep()[:, :3].contiguous(), boxes(count)

        def run() -> Any:
            out = torch.zeros((count, points.size(0)), dtype=torch.int)
            ext.points_in_boxes_cpu_forward(box, points, out)
            return out

        return run

    return make


def _batched(name: str, count: int) -> Callable[[ModuleType], Callable[[], Any]]:
    def make(ext: ModuleType) -> Callable[[], Any]:
        points, box = sweep()[None, :, :3].contiguous(), boxes(count)[None]

        def run() -> Any:
            if name == "part":
                out = torch.full((1, points.size(1)), -1, dtype=torch.int)
            else:
                out = torch.zeros((1, points.size(1), count), dtype=torch.int)
            getattr(ext, f"points_in_boxes_{name}_forward")(box, points, out)
            return out

        return run

    return make


def cases() -> Iterator[tuple[str, Callable[[ModuleType], Callable[[], Any]]]]:
    yield "cpu kernel, 20k points x 20 boxes", _cpu(20)
    yield "cpu kernel, 20k points x 100 boxes", _cpu(100)
    yield "part, 20k points x 100 boxes", _batched("part", 100)
    yield "all, 20k points x 100 boxes", _batched("all", 100)
