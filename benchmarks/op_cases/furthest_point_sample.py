"""Furthest point sampling at PointNet++ / VoteNet sizes (compiled mmcv has only a CUDA kernel)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import torch


def _case(batch: int, n: int, m: int) -> Callable[[ModuleType], Callable[[], Any]]:
    def make(ext: ModuleType) -> Callable[[], Any]:
        xyz = torch.rand(batch, n, 3, generator=torch.Generator().manual_seed(0)) * torch.tensor([6.0, 6.0, 3.0])

        def run() -> Any:
            idx = torch.zeros((batch, m), dtype=torch.int32)
            temp = torch.full((batch, n), 1e10)
            ext.furthest_point_sampling_forward(xyz, temp, idx, b=batch, n=n, m=m)
            return idx

        return run

    return make


def cases() -> Iterator[tuple[str, Callable[[ModuleType], Callable[[], Any]]]]:
    yield "1 x 16384 -> 4096", _case(1, 16384, 4096)
    yield "8 x 20000 -> 2048 (VoteNet's first layer)", _case(8, 20000, 2048)
    yield "8 x 1024 -> 512", _case(8, 1024, 512)
