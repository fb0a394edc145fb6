"""Greedy non-maximum suppression over boxes in rank order, blockwise, for any overlap test.

The kernels' rule: walk the boxes from the best; keep a box unless a box kept before it
overlaps it beyond the threshold. Here the boxes go in blocks of ``BLOCK``: first every
box of the block that a box kept in earlier blocks suppresses is dropped (one grid of
overlaps against the boxes kept so far, as the CPU kernel only ever compares kept boxes
with later ones), then the block is resolved on its own. Within a block, "kept" is the
unique solution of keep[j] = alive[j] and no kept i < j suppresses j; iterating that
equation from "all alive" fixes one more box per round at least, and usually all of
them in two or three rounds (chains of boxes that each suppress the next are what take
longer), so the work stays in tensor operations on any device.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

#: Boxes resolved together; a block's own overlap grid is BLOCK x BLOCK.
BLOCK = 256

#: ``suppresses(rows, cols, upper)``: (len(rows), len(cols)) bool, whether box ``rows[a]``
#: suppresses box ``cols[b]`` (positions in rank order, rows ranked before cols). With
#: ``upper`` the two are the same block and only a < b is asked (the rest may be False).
Suppresses = Callable[[Tensor, Tensor, bool], Tensor]


def _resolve_block(alive: Tensor, suppress: Tensor) -> Tensor:
    """keep[j] = alive[j] and not any(keep[i] and suppress[i, j] for i < j)."""
    suppress = torch.triu(suppress, diagonal=1)
    keep = alive
    for _ in range(alive.numel() + 1):
        hit = (suppress & keep.unsqueeze(1)).any(0)
        settled = alive & ~hit
        if torch.equal(settled, keep):
            break
        keep = settled
    return keep


def greedy_keep(count: int, suppresses: Suppresses, device: torch.device) -> Tensor:
    """The positions (ascending, long) that greedy NMS keeps among ``count`` ranked boxes."""
    kept = torch.zeros(0, dtype=torch.long, device=device)
    for start in range(0, count, BLOCK):
        block = torch.arange(start, min(start + BLOCK, count), device=device)
        alive = torch.ones(block.numel(), dtype=torch.bool, device=device)
        if kept.numel():
            alive = ~suppresses(kept, block, False).any(0)
        candidates = block[alive]
        if candidates.numel() == 0:
            continue
        keep = _resolve_block(torch.ones_like(candidates, dtype=torch.bool), suppresses(candidates, candidates, True))
        kept = torch.cat((kept, candidates[keep]))
    return kept
