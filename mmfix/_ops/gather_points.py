"""Gathering (``mmcv.ops.gather_points``): feature columns picked by index, and the gradient added back.

As mmcv's CUDA kernels (compiled mmcv has no CPU kernel): ``out[b, c, j] =
points[b, c, idx[b, j]]``; the backward adds ``grad_out`` into the picked columns.
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, check_size

_TYPES = (torch.float16, torch.float32, torch.float64)


@torch.no_grad()
def gather_points_forward(
    points_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    out_tensor: torch.Tensor,
    b: int,
    c: int,
    n: int,
    npoints: int,
) -> None:
    """``out_tensor`` (B, C, npoints) = ``points_tensor`` (B, C, N) at ``idx_tensor`` (B, npoints)."""
    op = "gather_points_forward"
    check_float_types(op, _TYPES, points_tensor=points_tensor)
    for name, given, actual in (
        ("b", b, points_tensor.size(0)),
        ("c", c, points_tensor.size(1)),
        ("n", n, points_tensor.size(2)),
    ):
        check_size(op, name, given, actual)
    check_size(op, "npoints", npoints, idx_tensor.size(1))
    index = idx_tensor.long().unsqueeze(1).expand(b, c, npoints)
    out_tensor.copy_(points_tensor.gather(2, index))


@torch.no_grad()
def gather_points_backward(
    grad_out_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    grad_points_tensor: torch.Tensor,
    b: int,
    c: int,
    n: int,
    npoints: int,
) -> None:
    """``grad_points_tensor`` (B, C, N) += ``grad_out_tensor`` (B, C, npoints), added up by index."""
    op = "gather_points_backward"
    check_float_types(op, _TYPES, grad_out_tensor=grad_out_tensor)
    for name, given, actual in (("b", b, grad_out_tensor.size(0)), ("c", c, grad_out_tensor.size(1))):
        check_size(op, name, given, actual)
    check_size(op, "n", n, grad_points_tensor.size(2))
    check_size(op, "npoints", npoints, idx_tensor.size(1))
    index = idx_tensor.long().unsqueeze(1).expand(b, c, npoints)
    grad_points_tensor.scatter_add_(2, index, grad_out_tensor.to(grad_points_tensor.dtype))
