"""Pieces the 3D point and voxel families share: kernel-exact distances, the point-in-box test, chunking.

mmcv's 3D kernels compute squared distances and box-local coordinates with a fixed
sequence of scalar operations in the input's type; ties between neighbours and
points on box borders depend on the last bit of those values, so they are computed
here in the same order and type (separate multiply and add, no fused reductions).
Intermediates of shape (queries, points) are built a slab of queries at a time so
that memory stays bounded for real point clouds.

Every extension function of the 3D families runs under ``torch.no_grad()``: the
compiled extension records no autograd graph (mmcv's autograd Functions call its
backward functions explicitly), and some wrappers call it outside a Function with
inputs that require grad.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

#: Elements of one (queries x points) intermediate per slab (about 64 MiB of float32 each).
PAIR_BUDGET = 1 << 24


def slabs(total: int, per_row: int) -> Iterator[slice]:
    """Consecutive slices of ``range(total)`` whose rows cost at most ``PAIR_BUDGET`` elements together."""
    step = max(1, PAIR_BUDGET // max(1, per_row))  # read at call time: the tests shrink it
    for start in range(0, total, step):
        yield slice(start, min(total, start + step))


def squared_distances(queries: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """``(B, Q, 3) x (B, P, 3) -> (B, Q, P)``: ``dx*dx + dy*dy + dz*dz``, in the inputs' type, in that order."""
    q = queries.unsqueeze(2)
    p = points.unsqueeze(1)
    dx = q[..., 0] - p[..., 0]
    dy = q[..., 1] - p[..., 1]
    dz = q[..., 2] - p[..., 2]
    return dx * dx + dy * dy + dz * dz


def _rotation_terms(rz: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # cos/sin of the box angle rounded once from double, as the C library's cosf/sinf give them
    # (torch's vectorised float32 cos may differ in the last bit, which moves border points).
    wide = rz.double()
    return torch.cos(-wide).to(rz.dtype), torch.sin(-wide).to(rz.dtype)


def points_in_boxes(points: torch.Tensor, boxes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """mmcv's ``check_pt_in_box3d`` for every (box, point) pair.

    ``points`` (B, P, 3) and ``boxes`` (B, K, 7) ``[x, y, z, x_size, y_size, z_size, rz]``
    with z the bottom centre, of one floating type. Returns ``inside`` (B, K, P) and the
    box-local ``x`` and ``y`` (B, K, P), computed as the kernel does: the z test on
    ``fabsf(z - centre_z) > z_size / 2``, then the rotation by ``-rz`` and strict tests
    against half the sizes.
    """
    x, y, z = (points[..., i].unsqueeze(1) for i in range(3))
    cx, cy, cz, x_size, y_size, z_size, rz = (boxes[..., i].unsqueeze(2) for i in range(7))
    centre_z = cz + z_size / 2
    # fabsf: the difference is taken in the points' type and its magnitude in float32;
    # the half size is compared in double (all exact widenings).
    z_out = (z - centre_z).float().abs().double() > z_size.double() / 2
    cosa, sina = _rotation_terms(rz)
    shift_x = x - cx
    shift_y = y - cy
    local_x = shift_x * cosa + shift_y * (-sina)
    local_y = shift_x * sina + shift_y * cosa
    half_x = x_size / 2
    half_y = y_size / 2
    inside = (local_x > -half_x) & (local_x < half_x) & (local_y > -half_y) & (local_y < half_y) & ~z_out
    return inside, local_x, local_y


def first_indices(mask: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``count`` positions along the last dim where ``mask`` holds, in order.

    Returns ``(positions, found)`` of shape (..., min(count, n)): ``found`` says which
    positions are real (a row with fewer hits has ``found`` False at its end).
    """
    n = mask.shape[-1]
    k = min(count, n)
    if k == 0:
        empty = mask.new_zeros((*mask.shape[:-1], 0), dtype=torch.long)
        return empty, empty.bool()
    order = torch.arange(n, device=mask.device, dtype=torch.int32)
    key = torch.where(mask, order, torch.tensor(n, dtype=torch.int32, device=mask.device))
    positions = torch.topk(key, k, dim=-1, largest=False, sorted=True).values
    return positions.long(), positions < n


def check_size(op: str, what: str, given: int, actual: int) -> None:
    """The extension's explicit size arguments must agree with the tensors (the kernels index by them)."""
    if int(given) != int(actual):
        raise ValueError(
            f"mmcv op `{op}`: {what}={given} but the tensors say {actual}. The extension indexes memory "
            f"with the sizes passed in; pass the tensors' own sizes (as mmcv's Python wrappers do)."
        )


def check_float_types(op: str, allowed: tuple[torch.dtype, ...], **tensors: torch.Tensor) -> None:
    """mmcv's kernels dispatch on a fixed set of floating types; anything else is refused as they refuse it."""
    for name, tensor in tensors.items():
        if tensor.dtype not in allowed:
            names = ", ".join(str(d).replace("torch.", "") for d in allowed)
            raise TypeError(
                f"mmcv op `{op}`: {name} is {str(tensor.dtype).replace('torch.', '')}, but mmcv's kernel takes "
                f"{names}. Convert it (e.g. `.float()`) before the call, as mmcv's Python wrapper does."
            )
