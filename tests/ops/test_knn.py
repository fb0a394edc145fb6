"""k nearest neighbours against mmcv's CUDA kernel written out (its heap, sift and heap sort; no CPU
kernel in mmcv), with equal distances in and at the edge of the kept set, and mmcv's knn."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops.devices3d import (
    cpu_wrappers_fixture,  # noqa: F401 - the cpu_wrappers fixture
    small_slabs_fixture,  # noqa: F401 - the small_slabs fixture
)
from ops_support import swap_ext


def clouds(b: int, n: int, m: int, seed: int, ties: bool = False, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    xyz = torch.rand(b, n, 3, generator=g)
    if ties:  # a coarse lattice and repeated points: many equal distances
        xyz = torch.round(xyz * 3) / 3
        if n > 3:
            xyz[:, torch.randint(0, n, (n // 3,), generator=g)] = xyz[:, torch.randint(0, n, (n // 3,), generator=g)]
    centres = torch.rand(b, m, 3, generator=g)
    if ties:
        centres = torch.round(centres * 3) / 3
    return xyz.to(dtype).contiguous(), centres.to(dtype).contiguous()


def run(ext, xyz, centres, k, *, sizes_first=False):
    b, n, _ = xyz.shape
    m = centres.size(1)
    idx = torch.zeros((b, m, k), dtype=torch.int32)
    dist2 = torch.zeros((b, m, k))
    if sizes_first:  # the extension's second binding
        ext.knn_forward(b, n, m, k, xyz, centres, idx, dist2)
    else:
        ext.knn_forward(xyz, centres, idx, dist2, b=b, n=n, m=m, nsample=k)
    return idx, dist2


@pytest.mark.parametrize(
    ("b", "n", "m", "k", "ties"),
    [
        (1, 1, 3, 1, False),
        (1, 5, 4, 8, False),  # fewer points than k: (1e10, 0) pads the end
        (2, 200, 20, 16, False),
        (2, 100, 30, 8, True),
        (1, 300, 40, 20, True),
        (1, 60, 10, 99, True),
        (2, 1500, 8, 5, True),  # long rows: the replay's prefix bound skips most points
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_knn_equals_the_kernel_heap(mmfix_ext, b, n, m, k, ties, dtype):
    xyz, centres = clouds(b, n, m, seed=n + k, ties=ties, dtype=dtype)
    idx, dist2 = run(mmfix_ext, xyz, centres, k)
    want_idx, want_dist = ref.knn(xyz, centres, k)
    assert np.array_equal(idx.numpy(), want_idx)
    assert np.array_equal(dist2.numpy(), want_dist)


def test_ties_are_not_simply_index_order(mmfix_ext):
    # Four points at the same distance, k = 2: the heap keeps the first two, and its swaps on
    # equal values (the sift continues when parent == child) list them as [1, 0].
    xyz = torch.tensor([[[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0], [0, -1.0, 0], [3.0, 0, 0]]])
    centres = torch.zeros((1, 1, 3))
    idx, dist2 = run(mmfix_ext, xyz, centres, 2)
    assert dist2.tolist() == [[[1.0, 1.0]]]
    want_idx, _ = ref.knn(xyz, centres, 2)
    assert idx.tolist() == want_idx.tolist() == [[[1, 0]]]
    idx, _ = run(mmfix_ext, xyz, centres, 4)
    assert idx.tolist() == ref.knn(xyz, centres, 4)[0].tolist()


def test_both_bindings_of_the_extension(mmfix_ext):
    xyz, centres = clouds(2, 50, 6, seed=1)
    a = run(mmfix_ext, xyz, centres, 5)
    b = run(mmfix_ext, xyz, centres, 5, sizes_first=True)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    with pytest.raises(RuntimeError, match="cpu not found"):
        run(compiled_ext, *clouds(1, 5, 2, seed=0), 2)


def test_knn_through_mmcv(mmfix_ext, cpu_wrappers):
    xyz, centres = clouds(2, 150, 25, seed=6, ties=True)
    with swap_ext(mmfix_ext):
        idx = cpu_wrappers.knn(6, xyz, centres)
        transposed = cpu_wrappers.knn(6, xyz.transpose(1, 2).contiguous(), centres.transpose(1, 2).contiguous(), True)
    want_idx, _ = ref.knn(xyz, centres, 6)
    assert idx.shape == (2, 6, 25) and np.array_equal(idx.transpose(1, 2).numpy(), want_idx)
    assert torch.equal(transposed, idx)


def test_bad_arguments_are_refused_clearly(mmfix_ext):
    xyz, centres = clouds(1, 5, 2, seed=0)
    with pytest.raises(ValueError, match=r"1\.\.100"):
        run(mmfix_ext, xyz, centres, 101)
    with pytest.raises(TypeError, match="missing"):
        mmfix_ext.knn_forward(xyz, centres)


def test_many_slabs_give_the_same_answer(mmfix_ext, small_slabs):
    xyz, centres = clouds(2, 80, 25, seed=8, ties=True)
    idx, dist2 = run(mmfix_ext, xyz, centres, 6)
    want_idx, want_dist = ref.knn(xyz, centres, 6)
    assert np.array_equal(idx.numpy(), want_idx) and np.array_equal(dist2.numpy(), want_dist)
