"""Ball query (plain and stacked) against references written from mmcv's CUDA kernels (no CPU kernel in mmcv)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops.devices3d import small_slabs_fixture  # noqa: F401 - the small_slabs fixture
from ops_support import import_mmcv_ops, swap_ext


def clouds(batch: int, n: int, m: int, seed: int, lattice: bool = False, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    xyz = torch.rand(batch, n, 3, generator=g)
    if lattice:  # distances exactly equal to the radius, and repeated points (d2 == 0)
        xyz = torch.round(xyz * 8) / 8
    centres = xyz[:, torch.randint(0, max(n, 1), (m,), generator=g)] if n else torch.rand(batch, m, 3, generator=g)
    centres = centres + (torch.rand(batch, m, 3, generator=g) < 0.5) * 0.01
    return xyz.to(dtype).contiguous(), centres.to(dtype).contiguous()


def query(ext, xyz, centres, min_r, max_r, nsample, fill=0):
    b, n, _ = xyz.shape
    m = centres.size(1)
    idx = torch.full((b, m, nsample), fill, dtype=torch.int32)
    ext.ball_query_forward(centres, xyz, idx, b=b, n=n, m=m, min_radius=min_r, max_radius=max_r, nsample=nsample)
    return idx


@pytest.mark.parametrize(
    ("batch", "n", "m", "min_r", "max_r", "nsample", "lattice"),
    [
        (1, 0, 4, 0.0, 0.2, 8, False),
        (2, 50, 10, 0.0, 0.25, 4, True),
        (2, 300, 40, 0.0, 0.125, 16, True),  # the radius lands exactly on lattice distances
        (1, 300, 40, 0.1, 0.3, 32, False),
        (3, 500, 64, 0.05, 0.2, 64, True),  # min radius: the d2 == 0 point still counts
        (1, 20, 5, 0.0, 5.0, 30, False),  # nsample > n: padding with the first
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_plain_query_equals_the_kernel_reference(mmfix_ext, batch, n, m, min_r, max_r, nsample, lattice, dtype):
    xyz, centres = clouds(batch, n, m, seed=n + nsample, lattice=lattice, dtype=dtype)
    got = query(mmfix_ext, xyz, centres, min_r, max_r, nsample)
    assert np.array_equal(got.numpy(), ref.ball_query(centres, xyz, min_r, max_r, nsample))


def test_half_points_follow_the_half_arithmetic(mmfix_ext):
    xyz, centres = clouds(2, 200, 30, seed=5, dtype=torch.float16)
    got = query(mmfix_ext, xyz, centres, 0.0, 0.2, 16)
    assert np.array_equal(got.numpy(), ref.ball_query(centres, xyz, 0.0, 0.2, 16))  # numpy float16: rounded per op
    # and the float32 answer, except where a distance sits within half precision of the radius
    wide = query(mmfix_ext, xyz.float(), centres.float(), 0.0, 0.2, 16)
    assert (got == wide).float().mean() > 0.97


def test_a_centre_with_no_point_keeps_the_callers_row(mmfix_ext):
    xyz, centres = clouds(1, 30, 3, seed=1)
    centres[0, 1] += 100.0
    got = query(mmfix_ext, xyz, centres, 0.0, 0.3, 5, fill=-9)
    assert (got[0, 1] == -9).all() and (got[0, 0] != -9).all()


def test_stacked_query_equals_the_kernel_reference(mmfix_ext):
    g = torch.Generator().manual_seed(3)
    point_counts, centre_counts = [40, 0, 120, 7], [5, 3, 20, 4]
    xyz = torch.round(torch.rand(sum(point_counts), 3, generator=g) * 8) / 8
    centres = torch.rand(sum(centre_counts), 3, generator=g)
    centres[-2:] += 50.0  # no neighbour at all: -1 in the first slot
    for radius, nsample in ((0.25, 8), (0.125, 16), (0.5, 3)):
        idx = torch.full((centres.size(0), nsample), 5, dtype=torch.int32)
        mmfix_ext.stack_ball_query_forward(
            centres,
            torch.tensor(centre_counts, dtype=torch.int32),
            xyz,
            torch.tensor(point_counts, dtype=torch.int32),
            idx,
            max_radius=radius,
            nsample=nsample,
        )
        want = ref.stack_ball_query(centres, centre_counts, xyz, point_counts, radius, nsample, fill=5)
        assert np.array_equal(idx.numpy(), want)
        assert (idx[5:8, 0] == -1).all() and (idx[-2:, 0] == -1).all()


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    xyz, centres = clouds(1, 10, 2, seed=0)
    with pytest.raises(RuntimeError, match="cpu not found"):
        query(compiled_ext, xyz, centres, 0.0, 0.2, 4)


def test_ball_query_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    xyz, centres = clouds(2, 400, 50, seed=8, lattice=True)
    with swap_ext(mmfix_ext):
        idx = ops.ball_query(0.0, 0.25, 16, xyz, centres)
        stacked = ops.ball_query(
            0.0,
            0.25,
            16,
            xyz.view(-1, 3),
            centres.view(-1, 3),
            torch.tensor([400, 400], dtype=torch.int),
            torch.tensor([50, 50], dtype=torch.int),
        )
    assert np.array_equal(idx.numpy(), ref.ball_query(centres, xyz, 0.0, 0.25, 16))
    want = ref.stack_ball_query(centres.view(-1, 3), [50, 50], xyz.view(-1, 3), [400, 400], 0.25, 16)
    assert np.array_equal(stacked.numpy(), want)


def test_bad_arguments_are_refused_clearly(mmfix_ext):
    xyz, centres = clouds(1, 10, 2, seed=0)
    with pytest.raises(ValueError, match="m=3"):
        mmfix_ext.ball_query_forward(
            centres,
            xyz,
            torch.zeros((1, 2, 4), dtype=torch.int32),
            b=1,
            n=10,
            m=3,
            min_radius=0.0,
            max_radius=0.2,
            nsample=4,
        )
    with pytest.raises(ValueError, match="do not add up"):
        mmfix_ext.stack_ball_query_forward(
            centres[0],
            torch.tensor([1], dtype=torch.int32),
            xyz[0],
            torch.tensor([10], dtype=torch.int32),
            torch.zeros((2, 4), dtype=torch.int32),
            max_radius=0.2,
            nsample=4,
        )


@pytest.mark.parametrize("batch", [1, 2])
def test_many_slabs_give_the_same_answer(mmfix_ext, small_slabs, batch):
    xyz, centres = clouds(batch, 120, 30, seed=3, lattice=True)
    got = query(mmfix_ext, xyz, centres, 0.0, 0.25, 8)
    assert np.array_equal(got.numpy(), ref.ball_query(centres, xyz, 0.0, 0.25, 8))
    points, centre_points = xyz.reshape(-1, 3), centres.reshape(-1, 3)
    point_counts, centre_counts = [70, points.size(0) - 70], [12, centre_points.size(0) - 12]
    idx = torch.zeros((centre_points.size(0), 8), dtype=torch.int32)
    mmfix_ext.stack_ball_query_forward(
        centre_points,
        torch.tensor(centre_counts, dtype=torch.int32),
        points,
        torch.tensor(point_counts, dtype=torch.int32),
        idx,
        max_radius=0.25,
        nsample=8,
    )
    assert np.array_equal(
        idx.numpy(), ref.stack_ball_query(centre_points, centre_counts, points, point_counts, 0.25, 8)
    )
