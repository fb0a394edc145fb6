"""Box sets for the rotated-box op tests: random, clustered, and the degenerate pairs that matter.

All boxes are (x_ctr, y_ctr, w, h, angle) float32 rows unless said otherwise; every
generator takes a seeded ``torch.Generator`` so a failure names a reproducible case.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def random_boxes(gen: torch.Generator, n: int, spread: float = 10.0, size: tuple[float, float] = (0.1, 5.0)) -> Tensor:
    """Centres in [0, spread)², sides in [size), angles in (-3.5, 3.5) radians."""
    b = torch.rand(n, 5, generator=gen)
    b[:, :2] *= spread
    b[:, 2:4] = b[:, 2:4] * (size[1] - size[0]) + size[0]
    b[:, 4] = (b[:, 4] - 0.5) * 7
    return b


def clustered_boxes(gen: torch.Generator, n: int, clusters: int, jitter: float = 0.6, spread: float = 50.0) -> Tensor:
    """Detections as a head gives them: many overlapping boxes around a few objects."""
    centres = random_boxes(gen, clusters, spread=spread, size=(1.0, 8.0))
    which = torch.randint(0, clusters, (n,), generator=gen)
    b = centres[which].clone()
    noise = torch.randn(n, 5, generator=gen) * jitter
    b[:, :2] += noise[:, :2]
    b[:, 2:4] = (b[:, 2:4] * (1 + noise[:, 2:4] * 0.2)).clamp(min=0.05)
    b[:, 4] += noise[:, 4] * 0.3
    return b


def chain_boxes(n: int, step: float = 0.6) -> Tensor:
    """A row of unit boxes, each overlapping the next (IoU 0.25 at step 0.6) and no other."""
    b = torch.zeros(n, 5)
    b[:, 0] = torch.arange(n, dtype=torch.float32) * step
    b[:, 2:4] = 1.0
    b[:, 4] = 0.1
    return b


def degenerate_pairs(gen: torch.Generator, n: int) -> tuple[Tensor, Tensor]:
    """Aligned pairs (2 x (K, 5)) of every awkward kind, ``n`` of each.

    identical; nearly identical (1e-6 .. 1e-4 apart, where the kernel's hull goes wrong);
    the same rectangle written with w and h swapped and the angle turned by π/2, or turned
    by π; nested; touching along an edge and at a corner; squares and rectangles on a
    half-unit grid at multiples of π/4 (up to 18 candidate vertices); empty, tiny and
    negative sizes; neighbours far from the origin (batched_nms's class offsets)."""
    base = random_boxes(gen, n)
    pairs: list[tuple[Tensor, Tensor]] = []
    pairs.append((base, base.clone()))
    for scale in (1e-6, 1e-5, 1e-4):
        pairs.append((base, base + torch.randn(n, 5, generator=gen) * scale))
    swapped = base.clone()
    swapped[:, 2], swapped[:, 3] = base[:, 3], base[:, 2]
    swapped[:, 4] += math.pi / 2
    pairs.append((base, swapped))
    turned = base.clone()
    turned[:, 4] += math.pi
    pairs.append((base, turned))
    nested = base.clone()
    nested[:, 2:4] *= torch.rand(n, 2, generator=gen) * 0.9 + 0.05
    pairs.append((base, nested))
    touching = base.clone()
    cos, sin = torch.cos(base[:, 4]), torch.sin(base[:, 4])
    touching[:, 0] += base[:, 2] * cos
    touching[:, 1] += base[:, 2] * sin
    pairs.append((base, touching))
    corner = touching.clone()
    corner[:, 0] -= base[:, 3] * sin
    corner[:, 1] += base[:, 3] * cos
    pairs.append((base, corner))
    pairs.append(_grid_pairs(gen, 4 * n))
    tiny = base.clone()
    tiny[:, 2:4] = torch.tensor([[0.0, 1.0], [1e-8, 1e-7], [-1.0, 2.0], [-2.0, -1.5]]).repeat(n // 4 + 1, 1)[:n]
    pairs.append((base, tiny))
    far = base.clone()
    far[:, :2] += 1e4
    far_other = far + torch.randn(n, 5, generator=gen) * 0.5
    pairs.append((far, far_other))
    first = torch.cat([p[0] for p in pairs])
    second = torch.cat([p[1] for p in pairs])
    return first.contiguous(), second.contiguous()


def _grid_pairs(gen: torch.Generator, n: int) -> tuple[Tensor, Tensor]:
    b = torch.zeros(n, 5)
    b[:, :2] = torch.randint(-4, 5, (n, 2), generator=gen).float() * 0.5
    side = torch.randint(1, 5, (n,), generator=gen).float()
    square = torch.rand(n, generator=gen) < 0.5
    b[:, 2] = side
    b[:, 3] = torch.where(square, side, torch.randint(1, 5, (n,), generator=gen).float())
    b[:, 4] = torch.randint(-8, 9, (n,), generator=gen).float() * (math.pi / 4)
    other = b.clone()
    other[:, 4] += torch.randint(-4, 5, (n,), generator=gen).float() * (math.pi / 2)
    swap = torch.rand(n, generator=gen) < 0.5
    other[swap, 4] += math.pi / 2
    other[swap, 2], other[swap, 3] = b[swap, 3], b[swap, 2]
    other[:, :2] += torch.randint(-2, 3, (n, 2), generator=gen).float() * 0.5
    return b, other
