"""Dynamic scatter (sum / mean / max) against an independent reference of mmcv's CUDA kernel.

Compiled mmcv has no CPU kernel for it (checked below), so the ground truth is
``reference3d.dynamic_scatter``: group by coordinate row in Python, rows with a negative
coordinate dropped, groups sorted, and the max backward sent to the lowest point index.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops_support import import_mmcv_ops, swap_ext

REDUCE = ["sum", "mean", "max"]


def points(n: int, seed: int, channels: int = 5, dtype=torch.float32, grid: int = 4, ties: bool = False):
    g = torch.Generator().manual_seed(seed)
    coors = torch.randint(0, grid, (n, 3), generator=g, dtype=torch.int32)
    dropped = torch.rand(n, generator=g) < 0.1
    column = torch.randint(0, 3, (n,), generator=g)
    coors[dropped, column[dropped]] = -torch.randint(1, 3, (int(dropped.sum()),), generator=g, dtype=torch.int32)
    feats = torch.randn(n, channels, generator=g, dtype=torch.float64)
    if ties:
        feats = torch.round(feats * 2) / 2  # few distinct values: equal maxima within a voxel
    return feats.to(dtype), coors


def check_forward(mmfix_ext, feats, coors, reduce):
    reduced, voxel_coors, mapping, counts = mmfix_ext.dynamic_point_to_voxel_forward(feats, coors, reduce)
    want = ref.dynamic_scatter(feats, coors, reduce)
    tol = 1e-6 if feats.dtype == torch.float32 else 1e-12
    np.testing.assert_allclose(reduced.numpy(), want[0], rtol=tol, atol=tol)
    assert reduced.dtype == feats.dtype
    assert voxel_coors.dtype == coors.dtype and np.array_equal(voxel_coors.numpy(), want[1])
    assert mapping.dtype == torch.int32 and np.array_equal(mapping.numpy(), want[2])
    assert counts.dtype == torch.int32 and np.array_equal(counts.numpy(), want[3])
    return reduced, voxel_coors, mapping, counts


@pytest.mark.parametrize("reduce", REDUCE)
@pytest.mark.parametrize(("n", "grid", "ties"), [(1, 4, False), (50, 3, False), (2000, 6, False), (600, 3, True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_and_backward_equal_the_reference(mmfix_ext, reduce, n, grid, ties, dtype):
    feats, coors = points(n, seed=n + grid, grid=grid, ties=ties, dtype=dtype)
    reduced, _, mapping, counts = check_forward(mmfix_ext, feats, coors, reduce)
    grad_reduced = torch.randn(reduced.shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
    grad_feats = torch.full_like(feats, 5.0)  # the op zeroes it first
    mmfix_ext.dynamic_point_to_voxel_backward(grad_feats, grad_reduced, feats, reduced, mapping, counts, reduce)
    want = ref.dynamic_scatter_backward(grad_reduced, feats, reduced, mapping, counts, reduce)
    np.testing.assert_allclose(grad_feats.numpy(), want, rtol=1e-6, atol=1e-7)


def test_max_gradient_goes_to_the_lowest_index_on_ties(mmfix_ext):
    feats = torch.tensor([[1.0, 2.0], [3.0, 2.0], [3.0, 0.0], [1.0, 2.0]])
    coors = torch.zeros((4, 3), dtype=torch.int32)
    reduced, _, mapping, counts = mmfix_ext.dynamic_point_to_voxel_forward(feats, coors, "max")
    assert reduced.tolist() == [[3.0, 2.0]]
    grad = torch.zeros_like(feats)
    mmfix_ext.dynamic_point_to_voxel_backward(
        grad, torch.tensor([[10.0, 20.0]]), feats, reduced, mapping, counts, "max"
    )
    assert grad.tolist() == [[0.0, 20.0], [10.0, 0.0], [0.0, 0.0], [0.0, 0.0]]


def test_nan_features_never_win_the_max(mmfix_ext):
    # fmaxf ignores NaN.
    feats = torch.tensor([[float("nan")], [1.0], [float("nan")]])
    reduced, *_ = mmfix_ext.dynamic_point_to_voxel_forward(feats, torch.zeros((3, 3), dtype=torch.int32), "max")
    assert reduced.tolist() == [[1.0]]


@pytest.mark.parametrize("reduce", REDUCE)
def test_empty_and_all_dropped_inputs(mmfix_ext, reduce):
    feats, coors = torch.zeros((0, 4)), torch.zeros((0, 3), dtype=torch.int32)
    reduced, voxel_coors, mapping, counts = mmfix_ext.dynamic_point_to_voxel_forward(feats, coors, reduce)
    assert reduced.shape == (0, 4) and voxel_coors.shape == (0, 3) and mapping.shape == (0,) and counts.shape == (0,)
    feats, coors = torch.randn(6, 4), torch.full((6, 3), -1, dtype=torch.int32)
    reduced, voxel_coors, mapping, counts = mmfix_ext.dynamic_point_to_voxel_forward(feats, coors, reduce)
    assert reduced.shape == (0, 4) and voxel_coors.shape == (0, 3) and (mapping == -1).all() and counts.shape == (0,)
    grad = torch.ones_like(feats)
    mmfix_ext.dynamic_point_to_voxel_backward(grad, reduced, feats, reduced, mapping, counts, reduce)
    assert (grad == 0).all()


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    feats, coors = points(10, seed=0)
    with pytest.raises(RuntimeError, match="cpu not found"):
        compiled_ext.dynamic_point_to_voxel_forward(feats, coors, "max")


@pytest.mark.parametrize("average", [True, False])
def test_dynamic_scatter_module_through_mmcv(mmfix_ext, average):
    ops = import_mmcv_ops(mmfix_ext)
    layer = ops.DynamicScatter([0.2, 0.2, 4.0], [0, -40, -3, 70.4, 40, 1], average_points=average)
    feats, coors = points(800, seed=5, channels=6)
    batch = torch.randint(0, 3, (800, 1), generator=torch.Generator().manual_seed(2), dtype=torch.int32).sort(0).values
    batch[-1] = 2  # mmcv reads the batch size from the last row
    reduce = "mean" if average else "max"
    for coordinates in (coors, torch.cat([batch, coors], dim=1)):
        x = feats.clone().requires_grad_(True)
        with swap_ext(mmfix_ext):
            voxel_feats, voxel_coors = layer(x, coordinates)
            (voxel_feats * torch.arange(voxel_feats.numel()).view_as(voxel_feats)).sum().backward()
        # The reference, item by item as mmcv's module splits the batch.
        items = (
            [(0, coordinates)]
            if coordinates.size(1) == 3
            else [(i, coordinates[coordinates[:, 0] == i]) for i in range(3)]
        )
        want_feats, want_coors, want_grad = [], [], torch.zeros_like(feats)
        offset = 0
        for i, rows in items:
            mask = torch.ones(800, dtype=torch.bool) if coordinates.size(1) == 3 else coordinates[:, 0] == i
            local = rows if coordinates.size(1) == 3 else rows[:, 1:]
            r, c, mp, cnt = ref.dynamic_scatter(feats[mask], local, reduce)
            want_feats.append(torch.from_numpy(r))
            prefix = [] if coordinates.size(1) == 3 else [np.full((len(c), 1), i, dtype=np.int32)]
            want_coors.append(torch.from_numpy(np.concatenate([*prefix, c], axis=1)))
            upstream = torch.arange(offset * 6, (offset + len(r)) * 6, dtype=torch.float32).view(-1, 6)
            want_grad[mask] = torch.from_numpy(
                ref.dynamic_scatter_backward(
                    upstream, feats[mask], torch.from_numpy(r), torch.from_numpy(mp), torch.from_numpy(cnt), reduce
                )
            )
            offset += len(r)
        torch.testing.assert_close(voxel_feats, torch.cat(want_feats))
        assert torch.equal(voxel_coors, torch.cat(want_coors))
        torch.testing.assert_close(x.grad, want_grad)


@pytest.mark.parametrize("reduce", REDUCE)
def test_gradcheck_through_mmcv_dynamic_scatter(mmfix_ext, reduce):
    ops = import_mmcv_ops(mmfix_ext)
    feats, coors = points(40, seed=8, channels=3, dtype=torch.float64, grid=2)
    feats.requires_grad_(True)
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(lambda f: ops.dynamic_scatter(f, coors, reduce)[0], (feats,))


def test_bad_arguments_are_refused_clearly(mmfix_ext):
    feats, coors = points(10, seed=0)
    with pytest.raises(ValueError, match="reduce_type"):
        mmfix_ext.dynamic_point_to_voxel_forward(feats, coors, "min")
    with pytest.raises(TypeError, match="float16"):
        mmfix_ext.dynamic_point_to_voxel_forward(feats.half(), coors, "sum")
    with pytest.raises(ValueError, match="same N"):
        mmfix_ext.dynamic_point_to_voxel_forward(feats, coors[:5], "sum")
