"""Three nearest neighbours (``mmcv.ops.three_nn``).

As mmcv's CUDA kernel (compiled mmcv has no CPU kernel): squared distances
``dx*dx + dy*dy + dz*dz`` in the inputs' type; a neighbour replaces a kept one only
when strictly nearer, so among equal distances the lower index comes first; a
distance that is NaN or not below 1e40 (infinite, for float) is never taken, and
slots left empty (fewer than three known points) hold distance 1e40 (inf in float)
and index 0. Three rounds of ``argmin`` (which returns the first minimum) do the same.
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, check_size, slabs, squared_distances

_TYPES = (torch.float16, torch.float32, torch.float64)
_NONE = 1e40  # the kernel's "no neighbour yet" distance (a double)


@torch.no_grad()
def three_nn_forward(
    unknown_tensor: torch.Tensor,
    known_tensor: torch.Tensor,
    dist2_tensor: torch.Tensor,
    idx_tensor: torch.Tensor,
    b: int,
    n: int,
    m: int,
) -> None:
    """``dist2_tensor`` and ``idx_tensor`` (B, n, 3): the three nearest of ``known_tensor`` (B, m, 3) to each unknown point."""
    op = "three_nn_forward"
    check_float_types(op, _TYPES, unknown_tensor=unknown_tensor, known_tensor=known_tensor)
    check_size(op, "b", b, unknown_tensor.size(0))
    check_size(op, "n", n, unknown_tensor.size(1))
    check_size(op, "m", m, known_tensor.size(1))
    dtype = unknown_tensor.dtype
    none = torch.tensor(_NONE, dtype=torch.float64).to(dtype).to(unknown_tensor.device)
    for part in slabs(n, b * m):
        d = squared_distances(unknown_tensor[:, part], known_tensor)
        # The kernel compares with a double 1e40: in float and half that is "finite" (1e40 overflows to inf).
        usable = d < torch.tensor(_NONE, dtype=torch.float64).to(d.dtype)
        key = torch.where(usable, d, torch.full((), float("inf"), dtype=dtype, device=d.device))
        dists, indices = [], []
        for _ in range(3):
            if m == 0:
                best = torch.zeros(key.shape[:2], dtype=torch.long, device=key.device)
                value = key.new_full(key.shape[:2], float("inf"))
            else:
                best = key.argmin(dim=2)
                value = key.gather(2, best.unsqueeze(2)).squeeze(2)
                key.scatter_(2, best.unsqueeze(2), float("inf"))
            taken = value != float("inf")
            dists.append(torch.where(taken, value, none))
            indices.append(torch.where(taken, best, torch.zeros_like(best)))
        dist2_tensor[:, part] = torch.stack(dists, dim=2).to(dist2_tensor.dtype)
        idx_tensor[:, part] = torch.stack(indices, dim=2).to(idx_tensor.dtype)
