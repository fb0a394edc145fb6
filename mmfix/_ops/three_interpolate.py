"""Three-point interpolation (``mmcv.ops.three_interpolate``), forward and backward.

As mmcv's CUDA kernels (compiled mmcv has no CPU kernel): ``out[b, c, i] =
w0 * p[idx0] + w1 * p[idx1] + w2 * p[idx2]`` in the inputs' type, summed in that order;
the backward adds ``grad_out * w_j`` into the three source columns.
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, check_size

_TYPES = (torch.float16, torch.float32, torch.float64)


@torch.no_grad()
def three_interpolate_forward(
    points_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    weight_tensor: torch.Tensor,
    out_tensor: torch.Tensor,
    b: int,
    c: int,
    m: int,
    n: int,
) -> None:
    """``out_tensor`` (B, C, n) from ``points_tensor`` (B, C, m), ``idx_tensor`` and ``weight_tensor`` (B, n, 3)."""
    op = "three_interpolate_forward"
    check_float_types(op, _TYPES, points_tensor=points_tensor, weight_tensor=weight_tensor)
    for name, given, actual in (
        ("b", b, points_tensor.size(0)),
        ("c", c, points_tensor.size(1)),
        ("m", m, points_tensor.size(2)),
    ):
        check_size(op, name, given, actual)
    check_size(op, "n", n, idx_tensor.size(1))
    index = idx_tensor.long()
    total = None
    for j in range(3):
        picked = points_tensor.gather(2, index[:, :, j].unsqueeze(1).expand(b, c, n))
        term = weight_tensor[:, :, j].unsqueeze(1) * picked
        total = term if total is None else total + term
    assert total is not None
    out_tensor.copy_(total)


@torch.no_grad()
def three_interpolate_backward(
    grad_out_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    weight_tensor: torch.Tensor,
    grad_points_tensor: torch.Tensor,
    b: int,
    c: int,
    n: int,
    m: int,
) -> None:
    """``grad_points_tensor`` (B, C, m) += ``grad_out * w_j`` at the three indices of each target point."""
    op = "three_interpolate_backward"
    check_float_types(op, _TYPES, grad_out_tensor=grad_out_tensor, weight_tensor=weight_tensor)
    for name, given, actual in (
        ("b", b, grad_out_tensor.size(0)),
        ("c", c, grad_out_tensor.size(1)),
        ("n", n, grad_out_tensor.size(2)),
    ):
        check_size(op, name, given, actual)
    check_size(op, "m", m, grad_points_tensor.size(2))
    index = idx_tensor.long()
    for j in range(3):
        contribution = grad_out_tensor * weight_tensor[:, :, j].unsqueeze(1)
        grad_points_tensor.scatter_add_(
            2, index[:, :, j].unsqueeze(1).expand(b, c, n), contribution.to(grad_points_tensor.dtype)
        )
