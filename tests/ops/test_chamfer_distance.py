"""2D Chamfer distance against loops of the op's definition in mmcv's CUDA kernels (no CPU kernel in
mmcv): nearest point, first index on ties; gradients added up as the backward kernel does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops.devices3d import small_slabs_fixture  # noqa: F401 - the small_slabs fixture
from ops_support import import_mmcv_ops, swap_ext


def sets(b: int, n: int, m: int, seed: int, ties: bool = False, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    a, c = torch.rand(b, n, 2, generator=g), torch.rand(b, m, 2, generator=g)
    if ties:
        a, c = torch.round(a * 4) / 4, torch.round(c * 4) / 4
    return a.to(dtype).contiguous(), c.to(dtype).contiguous()


def nearest(src: np.ndarray, dst: np.ndarray):
    dist = np.zeros(src.shape[:2], dtype=src.dtype)
    idx = np.zeros(src.shape[:2], dtype=np.int32)
    for i, j in np.ndindex(*src.shape[:2]):
        best, besti = None, 0
        for k in range(dst.shape[1]):
            dx, dy = dst[i, k, 0] - src[i, j, 0], dst[i, k, 1] - src[i, j, 1]
            d = dx * dx + dy * dy
            if best is None or d < best:
                best, besti = d, k
        dist[i, j], idx[i, j] = best, besti
    return dist, idx


@pytest.mark.parametrize(
    ("b", "n", "m", "ties"), [(1, 1, 1, False), (2, 30, 50, True), (2, 300, 260, False), (1, 100, 100, True)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_and_backward_equal_the_definition(mmfix_ext, b, n, m, ties, dtype):
    xyz1, xyz2 = sets(b, n, m, seed=n + m, ties=ties, dtype=dtype)
    dist1, dist2 = torch.zeros((b, n), dtype=dtype), torch.zeros((b, m), dtype=dtype)
    idx1, idx2 = torch.zeros((b, n), dtype=torch.int32), torch.zeros((b, m), dtype=torch.int32)
    mmfix_ext.chamfer_distance_forward(xyz1, xyz2, dist1, dist2, idx1, idx2)
    want1, want_idx1 = nearest(xyz1.numpy(), xyz2.numpy())
    want2, want_idx2 = nearest(xyz2.numpy(), xyz1.numpy())
    assert np.array_equal(idx1.numpy(), want_idx1) and np.array_equal(idx2.numpy(), want_idx2)
    assert np.array_equal(dist1.numpy(), want1) and np.array_equal(dist2.numpy(), want2)
    g1 = torch.randn((b, n), generator=torch.Generator().manual_seed(1), dtype=dtype)
    g2 = torch.randn((b, m), generator=torch.Generator().manual_seed(2), dtype=dtype)
    grad1, grad2 = torch.zeros_like(xyz1), torch.zeros_like(xyz2)
    mmfix_ext.chamfer_distance_backward(xyz1, xyz2, idx1, idx2, g1, g2, grad1, grad2)
    w1, w2 = np.zeros(xyz1.shape), np.zeros(xyz2.shape)
    for src, dst, idx, grad, gs, gd in ((xyz1, xyz2, want_idx1, g1, w1, w2), (xyz2, xyz1, want_idx2, g2, w2, w1)):
        for i, j in np.ndindex(*idx.shape):
            step = 2 * float(grad[i, j]) * (src[i, j].double().numpy() - dst[i, idx[i, j]].double().numpy())
            gs[i, j] += step
            gd[i, idx[i, j]] -= step
    np.testing.assert_allclose(grad1.numpy(), w1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad2.numpy(), w2, rtol=1e-5, atol=1e-5)


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    xyz1, xyz2 = sets(1, 4, 4, seed=0)
    with pytest.raises(RuntimeError, match="cpu not found"):
        compiled_ext.chamfer_distance_forward(
            xyz1,
            xyz2,
            torch.zeros(1, 4),
            torch.zeros(1, 4),
            torch.zeros(1, 4, dtype=torch.int32),
            torch.zeros(1, 4, dtype=torch.int32),
        )


def test_chamfer_distance_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    xyz1, xyz2 = sets(2, 40, 40, seed=5)
    xyz1.requires_grad_(True)
    with swap_ext(mmfix_ext):
        dist1, dist2, idx1, idx2 = ops.chamfer_distance(xyz1, xyz2)
        (dist1.sum() + 2 * dist2.sum()).backward()
    want = torch.cdist(xyz1.detach().double(), xyz2.double()) ** 2
    torch.testing.assert_close(dist1.double(), want.min(2).values, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dist2.double(), want.min(1).values, rtol=1e-5, atol=1e-6)
    # the same gradient through torch's autograd of the definition
    x = xyz1.detach().clone().requires_grad_(True)
    d = ((x.unsqueeze(2) - xyz2.unsqueeze(1)) ** 2).sum(-1)
    (d.gather(2, idx1.long().unsqueeze(2)).sum() + 2 * d.gather(1, idx2.long().unsqueeze(1)).sum()).backward()
    torch.testing.assert_close(xyz1.grad, x.grad)


def test_half_inputs_give_the_float32_result_within_half_precision(mmfix_ext):
    xyz1, xyz2 = sets(2, 200, 150, seed=9, dtype=torch.float16)
    results = []
    for dtype in (torch.float16, torch.float32):
        dist1, dist2 = torch.zeros((2, 200), dtype=dtype), torch.zeros((2, 150), dtype=dtype)
        idx1, idx2 = torch.zeros((2, 200), dtype=torch.int32), torch.zeros((2, 150), dtype=torch.int32)
        mmfix_ext.chamfer_distance_forward(xyz1.to(dtype), xyz2.to(dtype), dist1, dist2, idx1, idx2)
        results.append((dist1, dist2, idx1, idx2))
    (h1, h2, hi1, hi2), (w1, w2, wi1, wi2) = results
    torch.testing.assert_close(h1.float(), w1, rtol=1e-2, atol=1e-4)
    torch.testing.assert_close(h2.float(), w2, rtol=1e-2, atol=1e-4)
    assert (hi1 == wi1).float().mean() > 0.9 and (hi2 == wi2).float().mean() > 0.9


def test_many_slabs_give_the_same_answer(mmfix_ext, small_slabs):
    xyz1, xyz2 = sets(2, 70, 50, seed=15, ties=True)
    dist1, dist2 = torch.zeros((2, 70)), torch.zeros((2, 50))
    idx1, idx2 = torch.zeros((2, 70), dtype=torch.int32), torch.zeros((2, 50), dtype=torch.int32)
    mmfix_ext.chamfer_distance_forward(xyz1, xyz2, dist1, dist2, idx1, idx2)
    want1, want_idx1 = nearest(xyz1.numpy(), xyz2.numpy())
    want2, want_idx2 = nearest(xyz2.numpy(), xyz1.numpy())
    assert np.array_equal(idx1.numpy(), want_idx1) and np.array_equal(idx2.numpy(), want_idx2)
    assert np.array_equal(dist1.numpy(), want1) and np.array_equal(dist2.numpy(), want2)
