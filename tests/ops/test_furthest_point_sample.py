"""Furthest point sampling against a thread-by-thread reference of mmcv's CUDA kernel (no CPU kernel in mmcv)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops.devices3d import cpu_wrappers_fixture  # noqa: F401 - the cpu_wrappers fixture
from ops_support import import_mmcv_ops, swap_ext


def cloud(batch: int, n: int, seed: int, duplicates: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    xyz = torch.rand(batch, n, 3, generator=g) * 10
    if duplicates and n > 4:
        # a coarse lattice and repeated points: many exactly equal distances
        xyz = torch.round(xyz)
        xyz[:, torch.randint(0, n, (n // 3,), generator=g)] = xyz[:, torch.randint(0, n, (n // 3,), generator=g)]
    return xyz.contiguous()


def run(ext, xyz: torch.Tensor, m: int):
    batch, n = xyz.shape[:2]
    idx = torch.zeros((batch, m), dtype=torch.int32)
    temp = torch.full((batch, n), 1e10)
    ext.furthest_point_sampling_forward(xyz, temp, idx, b=batch, n=n, m=m)
    return idx, temp


@pytest.mark.parametrize(
    ("batch", "n", "m", "duplicates"),
    [
        (1, 1, 1, False),
        (2, 5, 5, False),
        (1, 7, 12, False),  # more samples than points: once every distance is 0, point 0 again
        (1, 64, 10, True),
        (2, 300, 40, False),
        (1, 300, 60, True),
        (1, 1100, 12, True),
        (1, 2048, 6, False),
    ],
)
def test_indices_and_temp_equal_the_kernel_reference(mmfix_ext, batch, n, m, duplicates):
    xyz = cloud(batch, n, seed=n + m, duplicates=duplicates)
    idx, temp = run(mmfix_ext, xyz, m)
    want_idx, want_temp = ref.furthest_point_sample(xyz, m)
    assert np.array_equal(idx.numpy(), want_idx)
    assert np.array_equal(temp.numpy(), want_temp)  # the running minimum distances, written back in place


def test_equal_maxima_follow_the_block_reduction_not_the_lowest_index(mmfix_ext):
    # n = 64: 64 threads, one point each. The reduction tree keeps the left operand on ties,
    # so between threads 33 (0b100001) and 56 (0b111000) the lowest differing bit decides: 56.
    xyz = cloud(1, 64, seed=2)
    xyz[0, 33] = xyz[0, 56] = torch.tensor([50.0, 50.0, 50.0])
    idx, _ = run(mmfix_ext, xyz, 3)
    assert idx[0, 1].item() == 56
    assert np.array_equal(idx.numpy(), ref.furthest_point_sample(xyz, 3)[0])
    # Within one thread's share the first wins: n = 600 has 512 threads, points 10 and 522 share one.
    xyz = cloud(1, 600, seed=3)
    xyz[0, 10] = xyz[0, 522] = torch.tensor([50.0, 50.0, 50.0])
    assert run(mmfix_ext, xyz, 2)[0][0, 1].item() == 10
    # 1100 points, 1024 threads: points 1000 (thread 1000 = 0b1111101000) and 1030 (thread 6 = 0b110).
    xyz = cloud(1, 1100, seed=4)
    xyz[0, 1000] = xyz[0, 1030] = torch.tensor([50.0, 50.0, 50.0])
    idx, _ = run(mmfix_ext, xyz, 3)
    assert idx[0, 1].item() == 1000
    assert np.array_equal(idx.numpy(), ref.furthest_point_sample(xyz, 3)[0])


def test_inputs_that_require_grad_are_fine(mmfix_ext):
    # Some callers hand over features that require grad; the compiled extension ignores autograd.
    xyz = cloud(2, 300, seed=5)
    idx, _ = run(mmfix_ext, xyz.clone().requires_grad_(True), 20)
    assert np.array_equal(idx.numpy(), run(mmfix_ext, xyz, 20)[0].numpy())


def test_no_samples_and_no_points(mmfix_ext):
    xyz = cloud(2, 30, seed=1)
    idx, temp = torch.full((2, 0), 7, dtype=torch.int32), torch.full((2, 30), 1e10)
    mmfix_ext.furthest_point_sampling_forward(xyz, temp, idx, b=2, n=30, m=0)
    assert (temp == 1e10).all()
    idx, temp = run(mmfix_ext, xyz, 1)  # only point 0; temp untouched
    assert (idx == 0).all() and (temp == 1e10).all()


@pytest.mark.parametrize(("n", "m", "duplicates"), [(50, 12, False), (200, 30, True), (1100, 8, True)])
def test_with_dist_equals_the_kernel_reference(mmfix_ext, n, m, duplicates):
    xyz = cloud(2, n, seed=n, duplicates=duplicates)
    dist = ((xyz.unsqueeze(2) - xyz.unsqueeze(1)) ** 2).sum(-1).contiguous()
    idx = torch.zeros((2, m), dtype=torch.int32)
    temp = torch.full((2, n), 1e10)
    mmfix_ext.furthest_point_sampling_with_dist_forward(dist, temp, idx, b=2, n=n, m=m)
    want_idx, want_temp = ref.furthest_point_sample(dist, m, dist_matrix=True)
    assert np.array_equal(idx.numpy(), want_idx)
    assert np.array_equal(temp.numpy(), want_temp)


def test_with_dist_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    xyz = cloud(2, 120, seed=4, duplicates=True)
    dist = ((xyz.unsqueeze(2) - xyz.unsqueeze(1)) ** 2).sum(-1).contiguous()
    with swap_ext(mmfix_ext):
        idx = ops.furthest_point_sample_with_dist(dist, 25)
    assert idx.dtype == torch.int32
    assert np.array_equal(idx.numpy(), ref.furthest_point_sample(dist, 25, dist_matrix=True)[0])


def test_furthest_point_sample_and_points_sampler_through_mmcv(mmfix_ext, cpu_wrappers):
    # mmcv's wrapper allocates torch.cuda tensors; mmfix's mmcv_ops_devices patch lets CPU tensors through.
    xyz = cloud(2, 400, seed=6, duplicates=True)
    with swap_ext(mmfix_ext):
        idx = cpu_wrappers.furthest_point_sample(xyz, 32)
        sampled = cpu_wrappers.PointsSampler([32], ["D-FPS"])(xyz, None)
    want = ref.furthest_point_sample(xyz, 32)[0]
    assert idx.dtype == torch.int32 and np.array_equal(idx.numpy(), want)
    assert np.array_equal(sampled.numpy(), want)


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    with pytest.raises(RuntimeError, match="cpu not found"):
        run(compiled_ext, cloud(1, 10, seed=0), 3)


def test_bad_arguments_are_refused_clearly(mmfix_ext):
    xyz = cloud(1, 10, seed=0)
    with pytest.raises(TypeError, match="float64"):
        mmfix_ext.furthest_point_sampling_forward(
            xyz.double(), torch.full((1, 10), 1e10), torch.zeros((1, 3), dtype=torch.int32), b=1, n=10, m=3
        )
    with pytest.raises(ValueError, match="n=12"):
        mmfix_ext.furthest_point_sampling_forward(
            xyz, torch.full((1, 10), 1e10), torch.zeros((1, 3), dtype=torch.int32), b=1, n=12, m=3
        )
