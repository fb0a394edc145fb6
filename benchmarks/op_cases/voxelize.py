"""Voxelization of a KITTI-like LiDAR sweep (~20k points, 4 features) with PointPillars' and SECOND's settings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import torch

PILLARS = ([0.16, 0.16, 4.0], [0.0, -39.68, -3.0, 69.12, 39.68, 1.0], 32, 16000)
SECOND = ([0.05, 0.05, 0.1], [0.0, -40.0, -3.0, 70.4, 40.0, 1.0], 5, 16000)


def sweep(n: int = 20000, seed: int = 0) -> torch.Tensor:
    """Points denser near the sensor, in front of it, with a ground plane and some clutter above."""
    g = torch.Generator().manual_seed(seed)
    distance = 75 * torch.rand(n, generator=g) ** 2 + 2
    angle = (torch.rand(n, generator=g) - 0.5) * 1.6
    height = torch.where(
        torch.rand(n, generator=g) < 0.6,
        -1.7 + 0.05 * torch.randn(n, generator=g),
        -1.7 + 2.5 * torch.rand(n, generator=g),
    )
    xyz = torch.stack([distance * torch.cos(angle), distance * torch.sin(angle), height], 1)
    return torch.cat([xyz, torch.rand(n, 1, generator=g)], 1).contiguous()


def _hard(settings: tuple[list[float], list[float], int, int]) -> Callable[[ModuleType], Callable[[], Any]]:
    size, bounds, max_points, max_voxels = settings

    def make(ext: ModuleType) -> Callable[[], Any]:
        points = sweep()
        size_t, bounds_t = torch.tensor(size), torch.tensor(bounds)

        def run() -> Any:
            voxels = points.new_zeros((max_voxels, max_points, 4))
            coors = torch.zeros((max_voxels, 3), dtype=torch.int)
            count = torch.zeros((max_voxels,), dtype=torch.int)
            num = torch.zeros((), dtype=torch.long)
            ext.hard_voxelize_forward(
                points,
                size_t,
                bounds_t,
                voxels,
                coors,
                count,
                num,
                max_points=max_points,
                max_voxels=max_voxels,
                NDim=3,
                deterministic=True,
            )
            return num

        return run

    return make


def _dynamic(ext: ModuleType) -> Callable[[], Any]:
    points = sweep()
    size, bounds = torch.tensor(PILLARS[0]), torch.tensor(PILLARS[1])

    def run() -> Any:
        coors = torch.zeros((points.size(0), 3), dtype=torch.int)
        ext.dynamic_voxelize_forward(points, size, bounds, coors, NDim=3)
        return coors

    return run


def cases() -> Iterator[tuple[str, Callable[[ModuleType], Callable[[], Any]]]]:
    yield "hard, PointPillars (20k pts, 0.16 m pillars, 32 x 16000)", _hard(PILLARS)
    yield "hard, SECOND (20k pts, 0.05x0.05x0.1 m, 5 x 16000)", _hard(SECOND)
    yield "dynamic, PointPillars grid (20k pts)", _dynamic
