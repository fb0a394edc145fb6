"""Score assignment (``mmcv.ops.assign_score_withk``, PAConv), forward and backward.

As mmcv's CUDA kernels (compiled mmcv has no CPU kernel): ``output[b, o, n, k] +=
sum_m points[b, kn, m, o] * scores[b, n, k, m] - centers[b, cn, m, o] * scores[b, n, k, m]``
with ``kn = knn_idx[b, n, k]`` and ``cn = knn_idx[b, n, 0]``; a neighbour index outside
``[0, N0)`` leaves its entries (and gradients) alone. ``aggregate`` is accepted and, as
in the kernels, not used. The backward adds into the gradients passed in.
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, check_size, slabs

_TYPES = (torch.float16, torch.float32, torch.float64)


def _neighbours(
    op: str, knn_idx: torch.Tensor, part: slice, n0: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(neighbour index clamped, centre index, valid) for the centres in ``part``."""
    if knn_idx.dtype != torch.int64:
        raise TypeError(f"mmcv op `{op}`: knn_idx must be int64 (the kernel reads it as such), got {knn_idx.dtype}.")
    neighbour = knn_idx[:, part]
    valid = (neighbour >= 0) & (neighbour < n0)
    centre = neighbour[:, :, :1]
    bad_centre = valid & ((centre < 0) | (centre >= n0))
    if bool(bad_centre.any()):
        raise ValueError(
            f"mmcv op `{op}`: knn_idx[..., 0] (each centre's own index) is outside [0, {n0}) where neighbours are "
            "valid; the kernel would read outside the features. The first neighbour must be the centre point."
        )
    return neighbour.clamp(0, max(n0 - 1, 0)), centre.clamp(0, max(n0 - 1, 0)), valid


def _gather(features: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """features (B, N0, M, O) at index (B, ...) -> (B, ..., M, O)."""
    batch = torch.arange(features.size(0), device=features.device).view(-1, *([1] * (index.dim() - 1)))
    return features[batch, index]


@torch.no_grad()
def assign_score_withk_forward(
    points: torch.Tensor,
    centers: torch.Tensor,
    scores: torch.Tensor,
    knn_idx: torch.Tensor,
    output: torch.Tensor,
    B: int,
    N0: int,
    N1: int,
    M: int,
    K: int,
    O: int,  # noqa: E741
    aggregate: int,
) -> None:
    """``output`` (B, O, N1, K) += the score-weighted neighbour-minus-centre features."""
    op = "assign_score_withk_forward"
    check_float_types(op, _TYPES, points=points, centers=centers, scores=scores)
    for name, given, actual in (
        ("B", B, points.size(0)),
        ("N0", N0, points.size(1)),
        ("M", M, points.size(2)),
        ("O", O, points.size(3)),
    ):
        check_size(op, name, given, actual)
    check_size(op, "N1", N1, scores.size(1))
    check_size(op, "K", K, scores.size(2))
    del aggregate
    for part in slabs(N1, B * K * M * O * 2):
        neighbour, centre, valid = _neighbours(op, knn_idx, part, N0)
        weights = scores[:, part].unsqueeze(-1)  # (B, n, K, M, 1)
        terms = _gather(points, neighbour) * weights - _gather(centers, centre) * weights
        value = terms.sum(dim=3).permute(0, 3, 1, 2)  # (B, O, n, K)
        current = output[:, :, part]
        current.copy_(torch.where(valid.unsqueeze(1), current + value.to(current.dtype), current))


@torch.no_grad()
def assign_score_withk_backward(
    grad_out: torch.Tensor,
    points: torch.Tensor,
    centers: torch.Tensor,
    scores: torch.Tensor,
    knn_idx: torch.Tensor,
    grad_points: torch.Tensor,
    grad_centers: torch.Tensor,
    grad_scores: torch.Tensor,
    B: int,
    N0: int,
    N1: int,
    M: int,
    K: int,
    O: int,  # noqa: E741
    aggregate: int,
) -> None:
    """Add the gradients of ``points``, ``centers`` (B, N0, M, O) and ``scores`` (B, N1, K, M) into the tensors given."""
    op = "assign_score_withk_backward"
    check_float_types(op, _TYPES, grad_out=grad_out, points=points, centers=centers, scores=scores)
    for name, given, actual in (
        ("B", B, points.size(0)),
        ("N0", N0, points.size(1)),
        ("M", M, points.size(2)),
        ("O", O, points.size(3)),
    ):
        check_size(op, name, given, actual)
    check_size(op, "N1", N1, scores.size(1))
    check_size(op, "K", K, scores.size(2))
    del aggregate
    batch_offset = (torch.arange(B, device=points.device) * N0).view(B, 1, 1)
    flat_points = grad_points.view(B * N0, M, O)
    flat_centers = grad_centers.view(B * N0, M, O)
    for part in slabs(N1, B * K * M * O * 2):
        neighbour, centre, valid = _neighbours(op, knn_idx, part, N0)
        grads = grad_out[:, :, part].permute(0, 2, 3, 1)  # (B, n, K, O)
        grads = torch.where(valid.unsqueeze(-1), grads, torch.zeros_like(grads))
        weights = scores[:, part]  # (B, n, K, M)
        contribution = weights.unsqueeze(-1) * grads.unsqueeze(3)  # (B, n, K, M, O)
        flat_points.index_add_(0, (neighbour + batch_offset)[valid], contribution[valid].to(grad_points.dtype))
        per_centre = contribution.sum(dim=2)  # (B, n, M, O): every valid neighbour of the centre
        centre_rows = (centre[:, :, 0] + batch_offset[:, :, 0]).reshape(-1)
        flat_centers.index_add_(0, centre_rows, -per_centre.reshape(-1, M, O).to(grad_centers.dtype))
        difference = _gather(points, neighbour) - _gather(centers, centre)  # (B, n, K, M, O)
        score_grads = (difference * grads.unsqueeze(3)).sum(dim=-1)
        current = grad_scores[:, part]
        current.copy_(torch.where(valid.unsqueeze(-1), current + score_grads.to(current.dtype), current))
