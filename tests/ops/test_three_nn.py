"""Three nearest neighbours against a loop of mmcv's CUDA kernel (no CPU kernel in mmcv), and mmcv's three_nn."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops.devices3d import small_slabs_fixture  # noqa: F401 - the small_slabs fixture
from ops_support import import_mmcv_ops, swap_ext


def clouds(b: int, n: int, m: int, seed: int, lattice: bool = False, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    known = torch.rand(b, m, 3, generator=g)
    unknown = torch.rand(b, n, 3, generator=g)
    if lattice:  # equal distances and repeated known points: the lower index must come first
        known, unknown = torch.round(known * 4) / 4, torch.round(unknown * 4) / 4
    return unknown.to(dtype).contiguous(), known.to(dtype).contiguous()


def run(ext, unknown, known):
    b, n, _ = unknown.shape
    dist2 = torch.zeros((b, n, 3), dtype=unknown.dtype)
    idx = torch.zeros((b, n, 3), dtype=torch.int32)
    ext.three_nn_forward(unknown, known, dist2, idx, b=b, n=n, m=known.size(1))
    return dist2, idx


@pytest.mark.parametrize(
    ("b", "n", "m", "lattice"),
    [(1, 5, 1, False), (1, 5, 2, False), (2, 40, 3, True), (2, 300, 64, False), (2, 300, 100, True), (1, 0, 5, False)],
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_three_nn_equals_the_kernel_loop(mmfix_ext, b, n, m, lattice, dtype):
    unknown, known = clouds(b, n, m, seed=n + m, lattice=lattice, dtype=dtype)
    dist2, idx = run(mmfix_ext, unknown, known)
    want_dist, want_idx = ref.three_nn(unknown, known)
    assert np.array_equal(idx.numpy(), want_idx)
    assert np.array_equal(dist2.numpy(), want_dist)  # the same arithmetic, bit for bit; inf where no neighbour


def test_missing_neighbours_are_index_zero_at_1e40(mmfix_ext):
    unknown, known = clouds(1, 4, 2, seed=1)
    for dtype, far in ((torch.float32, float("inf")), (torch.float64, 1e40)):
        dist2, idx = run(mmfix_ext, unknown.to(dtype), known.to(dtype))
        assert (idx[..., 2] == 0).all() and (dist2[..., 2] == far).all()
    known[0, 0, 0] = float("nan")  # a NaN distance is never taken
    dist2, idx = run(mmfix_ext, unknown, known)
    assert (idx[..., 0] == 1).all() and (idx[..., 1:] == 0).all() and torch.isinf(dist2[..., 1:]).all()


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    with pytest.raises(RuntimeError, match="cpu not found"):
        run(compiled_ext, *clouds(1, 4, 4, seed=0))


def test_three_nn_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    unknown, known = clouds(2, 200, 50, seed=4, lattice=True)
    with swap_ext(mmfix_ext):
        dist, idx = ops.three_nn(unknown, known)
    want_dist, want_idx = ref.three_nn(unknown, known)
    assert np.array_equal(idx.numpy(), want_idx)
    assert torch.equal(dist, torch.sqrt(torch.from_numpy(want_dist)))


def test_many_slabs_give_the_same_answer(mmfix_ext, small_slabs):
    unknown, known = clouds(2, 90, 40, seed=8, lattice=True)
    dist2, idx = run(mmfix_ext, unknown, known)
    want_dist, want_idx = ref.three_nn(unknown, known)
    assert np.array_equal(idx.numpy(), want_idx) and np.array_equal(dist2.numpy(), want_dist)
