"""points_in_polygons_forward against its CUDA kernel's definition (compiled mmcv has no CPU kernel)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mmfix._ops import points_in_polygons as family
from ops_support import import_mmcv_ops, swap_ext

from .test_quadri import random_quads

F = np.float32


def ref_points_in_polygons(points, polygons):
    """points_in_polygons_forward_cuda_kernel, one pair at a time in numpy float32."""
    out = np.zeros((len(points), len(polygons)), dtype=np.float32)
    for row, (px, py) in enumerate(points.numpy().astype(F)):
        for col, poly in enumerate(polygons.numpy().astype(F)):
            xs, ys = poly[0::2], poly[1::2]
            crossings = 0
            i, j = 0, 3
            while i < 4:
                sx, sy, tx, ty = xs[i], ys[i], xs[j], ys[j]
                if not (py < min(sy, ty) or py > max(sy, ty)):
                    if (sx == px and sy == py) or (tx == px and ty == py):
                        break
                    if (sy < py and ty >= py) or (sy >= py and ty < py):
                        x = sx + (py - sy) * (tx - sx) / (ty - sy)
                        if x == px:
                            break
                        if x > px:
                            crossings += 1
                j, i = i, i + 1
            out[row, col] = 1.0 if crossings % 2 == 1 else 0.0
    return torch.from_numpy(out)


def _cases(seed):
    gen = torch.Generator().manual_seed(seed)
    polygons = random_quads(gen, 25)
    points = torch.rand(60, 2, generator=gen) * 10 - 1
    # Points on corners, on edges' midpoints and on a half-unit grid (ties with grid polygons).
    points = torch.cat((points, polygons[:10, :2], (polygons[:10, :2] + polygons[:10, 2:4]) / 2))
    grid = torch.tensor([[0.0, 0.0, 2.0, 0.0, 2.0, 2.0, 0.0, 2.0], [1.0, 0.0, 2.0, 1.0, 1.0, 2.0, 0.0, 1.0]])
    grid_points = torch.stack(
        torch.meshgrid(torch.arange(-1, 6) / 2, torch.arange(-1, 6) / 2, indexing="ij"), -1
    ).reshape(-1, 2)
    return torch.cat((points, grid_points)).contiguous(), torch.cat((polygons, grid)).contiguous()


def test_the_family_supplies_the_name(mmfix_ext):
    assert mmfix_ext.__mmfix_families__["points_in_polygons_forward"] == "points_in_polygons"


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    with pytest.raises(RuntimeError, match="implementation for device cpu not found"):
        compiled_ext.points_in_polygons_forward(torch.rand(2, 2), torch.rand(3, 8), torch.zeros(2, 3))


@pytest.mark.parametrize("seed", range(3))
def test_matches_the_reference(mmfix_ext, seed, monkeypatch):
    if seed == 2:
        monkeypatch.setattr(family, "GRID_CHUNK", 50)  # chunks of rows change nothing
    points, polygons = _cases(seed)
    output = torch.full((points.shape[0], polygons.shape[0]), -1.0)
    mmfix_ext.points_in_polygons_forward(points, polygons, output)
    expected = ref_points_in_polygons(points, polygons)
    assert torch.equal(output, expected)
    assert 0 < expected.mean() < 0.9


def test_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    points, polygons = _cases(4)
    with swap_ext(mmfix_ext):
        flags = ops.points_in_polygons(points, polygons)
    assert torch.equal(flags, ref_points_in_polygons(points, polygons))
