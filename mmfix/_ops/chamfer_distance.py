"""2D Chamfer distance (``mmcv.ops.chamfer_distance``), forward and backward.

As mmcv's CUDA kernels (compiled mmcv has no CPU kernel): for each point of one set
the squared distance ``dx*dx + dy*dy`` (in the inputs' type) to the nearest point of
the other, and that point's index (the first on equal distances); the backward adds
``2 * g * (p - q)`` to the point and subtracts it from its nearest. Two defects of the
CUDA kernels are not reproduced: the forward reads past its buffer when the other set's
size leaves a remainder of 1 or 3 modulo 4 after its 512-point chunks, and the
backward swaps the two sets' sizes (wrong whenever they differ); here the distances and
gradients are the ones the op defines.
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, slabs

_TYPES = (torch.float16, torch.float32, torch.float64)


def _nearest(source: torch.Tensor, target: torch.Tensor, dist: torch.Tensor, idx: torch.Tensor) -> None:
    if target.size(1) == 0:
        return  # the kernel never writes
    for part in slabs(source.size(1), source.size(0) * target.size(1)):
        dx = target[:, None, :, 0] - source[:, part, None, 0]
        dy = target[:, None, :, 1] - source[:, part, None, 1]
        d = dx * dx + dy * dy
        best = d.argmin(dim=2)
        dist[:, part] = d.gather(2, best.unsqueeze(2)).squeeze(2).to(dist.dtype)
        idx[:, part] = best.to(idx.dtype)


@torch.no_grad()
def chamfer_distance_forward(
    xyz1: torch.Tensor,
    xyz2: torch.Tensor,
    dist1: torch.Tensor,
    dist2: torch.Tensor,
    idx1: torch.Tensor,
    idx2: torch.Tensor,
) -> None:
    """``dist1``/``idx1`` (B, N) from xyz1 (B, N, 2) to xyz2 (B, M, 2); ``dist2``/``idx2`` (B, M) the other way."""
    check_float_types("chamfer_distance_forward", _TYPES, xyz1=xyz1, xyz2=xyz2)
    _nearest(xyz1, xyz2, dist1, idx1)
    _nearest(xyz2, xyz1, dist2, idx2)


def _add_gradients(
    source: torch.Tensor,
    target: torch.Tensor,
    nearest: torch.Tensor,
    grad_dist: torch.Tensor,
    grad_source: torch.Tensor,
    grad_target: torch.Tensor,
) -> None:
    batch = source.size(0)
    rows = torch.arange(batch, device=source.device).unsqueeze(1)
    index = nearest.long()
    step = (grad_dist * 2).unsqueeze(2) * (source - target[rows, index])  # (B, N, 2)
    grad_source.add_(step.to(grad_source.dtype))
    flat = (index + rows * target.size(1)).reshape(-1)
    grad_target.view(-1, 2).index_add_(0, flat, -step.reshape(-1, 2).to(grad_target.dtype))


@torch.no_grad()
def chamfer_distance_backward(
    xyz1: torch.Tensor,
    xyz2: torch.Tensor,
    idx1: torch.Tensor,
    idx2: torch.Tensor,
    graddist1: torch.Tensor,
    graddist2: torch.Tensor,
    gradxyz1: torch.Tensor,
    gradxyz2: torch.Tensor,
) -> None:
    """Add the gradients of both point sets into ``gradxyz1`` (B, N, 2) and ``gradxyz2`` (B, M, 2)."""
    check_float_types("chamfer_distance_backward", _TYPES, xyz1=xyz1, xyz2=xyz2, graddist1=graddist1)
    _add_gradients(xyz1, xyz2, idx1, graddist1, gradxyz1, gradxyz2)
    _add_gradients(xyz2, xyz1, idx2, graddist2, gradxyz2, gradxyz1)
