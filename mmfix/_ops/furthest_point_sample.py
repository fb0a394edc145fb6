"""Furthest point sampling (``mmcv.ops.furthest_point_sample`` and ``_with_dist``).

As mmcv's CUDA kernel (compiled mmcv has no CPU kernel): the first sample is point 0;
each next one is the point whose distance to the samples so far (``temp``, updated in
place with ``fminf``) is largest. Equal maxima are decided as the kernel's block
decides them: point k is scanned by thread ``k % T`` (T = the largest power of two
<= n, at most 1024), each thread keeps its first maximum, and the shared-memory tree
(``tid`` against ``tid + T/2``, then ``T/4`` ...) keeps the left one on equal values,
so between two threads the one whose lowest differing bit is 0 wins: thread order is
bit-reversed order. Not simply the smallest index: with 64 points, point 56 beats
point 33. Here the points are put in that order once and ``argmax`` (which returns the
first maximum) does the rest. Squared distances are ``dx*dx + dy*dy + dz*dz`` in
float32, in that order.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ._points3d import check_float_types, check_size


def _threads(n: int) -> int:
    """``opt_n_threads`` of the CUDA launcher: 2**floor(log(n) / log(2)), within [1, 1024]."""
    if n <= 0:
        return 1
    power = int(math.log(float(n)) / math.log(2.0))
    return max(min(1 << power, 1024), 1)


def _scan_order(n: int, device: torch.device) -> torch.Tensor:
    """Point indices in the order the kernel prefers them on equal distances.

    By thread, threads in bit-reversed order (the reduction tree's preference), then by
    index within a thread (each thread keeps its first maximum)."""
    threads = _threads(n)
    bits = threads.bit_length() - 1
    k = torch.arange(n, device=device)
    thread = k % threads
    reversed_thread = torch.zeros_like(thread)
    for bit in range(bits):
        reversed_thread |= ((thread >> bit) & 1) << (bits - 1 - bit)
    return torch.argsort(reversed_thread * n + k)


def _check(op: str, points: torch.Tensor, temp: torch.Tensor, idx: torch.Tensor, b: int, n: int, m: int) -> None:
    check_float_types(op, (torch.float32,), points_tensor=points, temp_tensor=temp)
    check_size(op, "b", b, points.size(0))
    check_size(op, "n", n, points.size(1))
    check_size(op, "m", m, idx.size(1) if idx.dim() == 2 else -1)
    if tuple(temp.shape) != (b, n):
        raise ValueError(f"mmcv op `{op}`: temp_tensor must be (b, n) = {(b, n)}, got {tuple(temp.shape)}.")


def _sample(
    distances_from: Callable[[torch.Tensor], torch.Tensor],
    temp: torch.Tensor,
    idx: torch.Tensor,
    order: torch.Tensor,
    num_samples: int,
) -> None:
    """The sampling loop, in scan order: ``distances_from(points)`` gives (B, n) distances, in scan order."""
    batch = temp.size(0)
    nearest = temp[:, order].contiguous()  # distance to the samples so far, in scan order
    closer = torch.empty(nearest.shape, dtype=torch.bool, device=temp.device)
    picked = torch.zeros((batch, num_samples), dtype=torch.long, device=temp.device)
    # Point 0 comes first, and it is also first in scan order.
    current = torch.zeros(batch, dtype=torch.long, device=temp.device)
    for j in range(1, num_samples):
        distance = distances_from(current)
        # fminf(d, temp): a NaN distance leaves the old value (torch.fmin does too, but slowly).
        torch.lt(distance, nearest, out=closer)
        torch.where(closer, distance, nearest, out=nearest)
        torch.argmax(nearest, dim=1, out=current)
        picked[:, j] = current
    idx.copy_(order[picked].to(idx.dtype))
    temp[:, order] = nearest


@torch.no_grad()
def furthest_point_sampling_forward(
    points_tensor: torch.Tensor, temp_tensor: torch.Tensor, idx_tensor: torch.Tensor, b: int, n: int, m: int
) -> None:
    """``idx_tensor`` (B, m): indices of ``m`` furthest-point samples of ``points_tensor`` (B, n, 3)."""
    op = "furthest_point_sampling_forward"
    _check(op, points_tensor, temp_tensor, idx_tensor, b, n, m)
    if points_tensor.dim() != 3 or points_tensor.size(2) != 3:
        raise ValueError(f"mmcv op `{op}`: points_tensor must be (b, n, 3), got {tuple(points_tensor.shape)}.")
    if m <= 0:
        return
    if n == 0:
        idx_tensor.zero_()
        return
    order = _scan_order(n, points_tensor.device)
    scanned = points_tensor[:, order].contiguous()
    planes = scanned.permute(2, 0, 1).contiguous()  # x, y, z each (B, n)
    rows = torch.arange(points_tensor.size(0), device=points_tensor.device)
    total = torch.empty_like(planes[0])
    square = torch.empty_like(planes[0])

    def distances_from(current: torch.Tensor) -> torch.Tensor:
        # (dx*dx + dy*dy) + dz*dz, each step rounded as the kernel rounds it, into reused buffers.
        centre = scanned[rows, current].unsqueeze(2)  # (B, 3, 1)
        torch.sub(planes[0], centre[:, 0], out=total)
        total.mul_(total)
        for axis in (1, 2):
            torch.sub(planes[axis], centre[:, axis], out=square)
            square.mul_(square)
            total.add_(square)
        return total

    _sample(distances_from, temp_tensor, idx_tensor, order, m)


@torch.no_grad()
def furthest_point_sampling_with_dist_forward(
    points_tensor: torch.Tensor, temp_tensor: torch.Tensor, idx_tensor: torch.Tensor, b: int, n: int, m: int
) -> None:
    """As ``furthest_point_sampling_forward``, from a (B, n, n) matrix of distances between the points."""
    op = "furthest_point_sampling_with_dist_forward"
    _check(op, points_tensor, temp_tensor, idx_tensor, b, n, m)
    if points_tensor.dim() != 3 or points_tensor.size(2) != n:
        raise ValueError(
            f"mmcv op `{op}`: points_tensor must be (b, n, n) distances, got {tuple(points_tensor.shape)}."
        )
    if m <= 0:
        return
    if n == 0:
        idx_tensor.zero_()
        return
    order = _scan_order(n, points_tensor.device)
    rows_in_scan = points_tensor[:, order][:, :, order]  # (B, n, n), both axes in scan order
    rows = torch.arange(points_tensor.size(0), device=points_tensor.device)

    def distances_from(current: torch.Tensor) -> torch.Tensor:
        return rows_in_scan[rows, current]

    _sample(distances_from, temp_tensor, idx_tensor, order, m)
