"""``points_in_polygons_forward``: which points lie inside which quadrilaterals (MMRotate's assigners).

CUDA-only in mmcv 2.1.0; this is its kernel on any device: a crossing count along a ray
towards +x over the 4 edges, in the kernel's order ((0, 3), (1, 0), (2, 1), (3, 2)),
skipping edges the point's y is outside of. A point on a corner, or exactly on an edge's
crossing, stops the count where it is: its answer is the parity of the edges counted
before it (so boundary points can come out either way, as in the kernel). Float32, as the
kernel reads it; the (rows x columns) grid is computed in chunks of rows.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _rotated_checks as check

_OP = "points_in_polygons_forward"
#: Point-polygon pairs evaluated at once.
GRID_CHUNK = 1 << 21


def _inside(px: Tensor, py: Tensor, polygons: Tensor) -> Tensor:
    """(P, 1) points against (1, M) polygons (as (M, 8)): the kernel's flags, float32 (P, M)."""
    xs, ys = polygons[:, 0::2][None], polygons[:, 1::2][None]  # (1, M, 4)
    crossings = torch.zeros(px.shape[0], polygons.shape[0], dtype=torch.int32, device=px.device)
    stopped = torch.zeros_like(crossings, dtype=torch.bool)
    for i, j in ((0, 3), (1, 0), (2, 1), (3, 2)):
        sx, sy, tx, ty = xs[..., i], ys[..., i], xs[..., j], ys[..., j]
        in_range = (py >= torch.minimum(sy, ty)) & (py <= torch.maximum(sy, ty)) & ~stopped
        on_corner = ((sx == px) & (sy == py)) | ((tx == px) & (ty == py))
        straddles = ((sy < py) & (ty >= py)) | ((sy >= py) & (ty < py))
        x = sx + (py - sy) * (tx - sx) / (ty - sy)
        counted = in_range & ~on_corner & straddles
        stopped |= in_range & (on_corner | (counted & (x == px)))
        crossings += (counted & ~(x == px) & (x > px)).int()
    return (crossings % 2 == 1).float()


def points_in_polygons_forward(points: Tensor, polygons: Tensor, output: Tensor) -> None:
    check.boxes(_OP, "points", points, (2,), "(x, y)")
    check.boxes(_OP, "polygons", polygons, (8,), "(x1, y1, ..., x4, y4)")
    check.same_device(_OP, points=points, polygons=polygons, output=output)
    for name, value in (("points", points), ("polygons", polygons), ("output", output)):
        check.dtype(_OP, name, value, (torch.float32,), "mmcv's kernel writes float32 flags for float32 input")
    rows, cols = points.shape[0], polygons.shape[0]
    check.numel(_OP, "output", output, rows * cols, f"{rows} points x {cols} polygons")
    with torch.no_grad():
        flat = output.view(rows, cols) if output.is_contiguous() else None
        result = flat if flat is not None else torch.empty(rows, cols, device=output.device)
        step = max(1, GRID_CHUNK // max(1, cols))
        for start in range(0, rows, step):
            part = points[start : start + step]
            result[start : start + step] = _inside(part[:, :1], part[:, 1:], polygons)
        if flat is None:
            output.copy_(result.view(output.shape))
