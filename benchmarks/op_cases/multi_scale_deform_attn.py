"""Multi-scale deformable attention at Deformable DETR's size: batch 2 of 1333×800, 4 levels, 8 heads, 4 points."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Iterator

import torch

BATCH, HEADS, CHANNELS, POINTS = 2, 8, 32, 4
#: The levels of a 1333×800 image at strides 8, 16, 32, 64 (ResNet C3–C5 plus one extra).
LEVELS = [(100, 167), (50, 84), (25, 42), (13, 21)]


def _inputs(queries: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    spatial = torch.tensor(LEVELS, dtype=torch.long)
    areas = spatial[:, 0] * spatial[:, 1]
    start = torch.cat([areas.new_zeros(1), areas.cumsum(0)[:-1]])
    keys = int(areas.sum())
    queries = queries or keys  # 0: the encoder, every key is a query
    value = torch.randn(BATCH, keys, HEADS, CHANNELS, generator=generator)
    loc = torch.rand(BATCH, queries, HEADS, len(LEVELS), POINTS, 2, generator=generator)
    weight = torch.rand(BATCH, queries, HEADS, len(LEVELS), POINTS, generator=generator).softmax(-1)
    return value, spatial, start, loc, weight


def _make(queries: int, backward: bool) -> Callable[[ModuleType], Callable[[], Any]]:
    def make(ext: ModuleType) -> Callable[[], Any]:
        value, spatial, start, loc, weight = _inputs(queries)
        grad_output = torch.randn(BATCH, loc.size(1), HEADS * CHANNELS)
        grads = torch.zeros_like(value), torch.zeros_like(loc), torch.zeros_like(weight)

        def run() -> None:
            ext.ms_deform_attn_forward(value, spatial, start, loc, weight, im2col_step=64)
            if backward:
                ext.ms_deform_attn_backward(value, spatial, start, loc, weight, grad_output, *grads, im2col_step=64)

        return run

    return make


def cases() -> Iterator[tuple[str, Callable[[ModuleType], Callable[[], Any]]]]:
    yield "encoder fwd, 2×22k queries", _make(0, backward=False)
    yield "encoder fwd+bwd, 2×22k queries", _make(0, backward=True)
    yield "decoder fwd+bwd, 2×300 queries", _make(300, backward=True)
