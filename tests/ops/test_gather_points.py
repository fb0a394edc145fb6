"""Gathering against loops written from mmcv's CUDA kernels (no CPU kernel in mmcv), gradcheck, mmcv's gather_points."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops_support import import_mmcv_ops, swap_ext


def inputs(b: int, c: int, n: int, m: int, seed: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(b, c, n, generator=g, dtype=torch.float64).to(dtype)
    idx = torch.randint(0, n, (b, m), generator=g, dtype=torch.int32)
    idx[:, m // 2 :] = idx[:, :1]  # repeats: the backward adds them up
    return feats, idx


@pytest.mark.parametrize(("b", "c", "n", "m"), [(1, 1, 1, 1), (2, 3, 40, 10), (2, 64, 1000, 256), (1, 4, 10, 0)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_forward_and_backward_equal_the_kernel_loops(mmfix_ext, b, c, n, m, dtype):
    feats, idx = inputs(b, c, n, m, seed=n + m, dtype=dtype)
    out = torch.zeros((b, c, m), dtype=dtype)
    mmfix_ext.gather_points_forward(feats, idx, out, b=b, c=c, n=n, npoints=m)
    want = np.zeros((b, c, m), dtype=out.numpy().dtype)
    grad = torch.randn((b, c, m), generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(dtype)
    want_grad = np.zeros((b, c, n))
    for i, ch, j in np.ndindex(b, c, m):
        want[i, ch, j] = feats[i, ch, idx[i, j]]
        want_grad[i, ch, idx[i, j]] += float(grad[i, ch, j])
    assert np.array_equal(out.numpy(), want)
    grad_feats = torch.zeros((b, c, n), dtype=dtype)
    mmfix_ext.gather_points_backward(grad, idx, grad_feats, b=b, c=c, n=n, npoints=m)
    tol = 2e-2 if dtype == torch.float16 else 1e-5
    np.testing.assert_allclose(grad_feats.double().numpy(), want_grad, rtol=tol, atol=tol)


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    feats, idx = inputs(1, 2, 10, 3, seed=0)
    with pytest.raises(RuntimeError, match="cpu not found"):
        compiled_ext.gather_points_forward(feats, idx, torch.zeros((1, 2, 3)), b=1, c=2, n=10, npoints=3)


def test_gather_points_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    feats, idx = inputs(2, 5, 30, 12, seed=3, dtype=torch.float64)
    feats.requires_grad_(True)
    with swap_ext(mmfix_ext):
        out = ops.gather_points(feats, idx)
        assert torch.equal(out, torch.gather(feats, 2, idx.long().unsqueeze(1).expand(2, 5, 12)))
        assert torch.autograd.gradcheck(lambda f: ops.gather_points(f, idx), (feats,))
