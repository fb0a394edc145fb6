"""Weighted sums of table rows, and their gradients: the sampling core of the deformable ops.

Deformable convolution, CARAFE and deformable RoI pooling all compute, for many
output points, ``sum_k weight_k * table[index_k]`` over a few rows of a
channels-last table (bilinear corners of a sampling point, or the taps of a
reassembly kernel), then backpropagate into the table (scatter-add) and into the
weights (one dot product per row). ``torch.nn.functional.embedding_bag`` in
``"sum"`` mode with ``per_sample_weights`` is exactly that fused gather-multiply-
add, multi-threaded on CPU and on CUDA, without materialising the gathered rows;
its autograd gives both gradients with torch's own deterministic scatter (sort by
row, then sum).

Tables hold one image (or group of channels) per block of rows; callers point
samples that fall outside the image at an all-zero row, so every index is valid
and no bounds test is needed in the hot path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def weighted_rows(table: torch.Tensor, index: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``out[b] = sum_j weight[b, j] * table[index[b, j]]`` for fixed-size bags (index: (bags, n))."""
    return F.embedding_bag(index, table, mode="sum", per_sample_weights=weight)


def weighted_rows_ragged(
    table: torch.Tensor, index: torch.Tensor, weight: torch.Tensor, starts: torch.Tensor
) -> torch.Tensor:
    """The same over bags of different sizes: bag b is ``index[starts[b]:starts[b + 1]]``."""
    return F.embedding_bag(index, table, starts, mode="sum", per_sample_weights=weight)


def weighted_rows_backward(
    table: torch.Tensor,
    index: torch.Tensor,
    weight: torch.Tensor,
    grad: torch.Tensor,
    starts: torch.Tensor | None = None,
    *,
    need_table: bool = True,
    need_weight: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor]:
    """Gradients of ``weighted_rows`` for ``grad`` (one row per bag), and the forward sums.

    Returns (d table, d weight, forward output): the gradient of the table is the
    scatter-add of ``weight * grad`` into the indexed rows; the gradient of each weight
    is the dot product of its bag's ``grad`` row with its table row. The forward output
    comes for free (autograd needs it) and callers that also need it reuse it.
    """
    with torch.enable_grad():
        table_ = table.detach().requires_grad_(need_table)
        weight_ = weight.detach().requires_grad_(need_weight)
        if starts is None:
            out = weighted_rows(table_, index, weight_)
        else:
            out = weighted_rows_ragged(table_, index, weight_, starts)
        inputs = [t for t, need in ((table_, need_table), (weight_, need_weight)) if need]
        grads = list(torch.autograd.grad(out, inputs, grad)) if inputs else []
    d_table = grads.pop(0) if need_table else None
    d_weight = grads.pop(0) if need_weight else None
    return d_table, d_weight, out.detach()
