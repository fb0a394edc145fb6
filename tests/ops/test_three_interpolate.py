"""Three-point interpolation against loops of mmcv's CUDA kernels (no CPU kernel in mmcv), gradcheck,
and PointNet++'s feature propagation as mmcv's API runs it (three_nn, then three_interpolate)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops_support import import_mmcv_ops, swap_ext

F32 = np.float32


def inputs(b: int, c: int, m: int, n: int, seed: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(b, c, m, generator=g, dtype=torch.float64).to(dtype)
    idx = torch.randint(0, m, (b, n, 3), generator=g, dtype=torch.int32)
    weight = torch.rand(b, n, 3, generator=g, dtype=torch.float64)
    weight = (weight / weight.sum(-1, keepdim=True)).to(dtype)
    return feats, idx, weight


@pytest.mark.parametrize(("b", "c", "m", "n"), [(1, 1, 1, 1), (2, 3, 10, 40), (2, 32, 128, 500), (1, 4, 8, 0)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_forward_and_backward_equal_the_kernel_loops(mmfix_ext, b, c, m, n, dtype):
    feats, idx, weight = inputs(b, c, m, n, seed=m + n, dtype=dtype)
    out = torch.zeros((b, c, n), dtype=dtype)
    mmfix_ext.three_interpolate_forward(feats, idx, weight, out, b=b, c=c, m=m, n=n)
    f, w, ix = feats.numpy(), weight.numpy(), idx.numpy()
    want = np.zeros((b, c, n), dtype=f.dtype)
    grad = torch.randn((b, c, n), generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(dtype)
    want_grad = np.zeros((b, c, m))
    for i, ch, p in np.ndindex(b, c, n):
        # w0 * p0 + w1 * p1 + w2 * p2 in the tensors' type, in that order
        want[i, ch, p] = (
            w[i, p, 0] * f[i, ch, ix[i, p, 0]] + w[i, p, 1] * f[i, ch, ix[i, p, 1]] + w[i, p, 2] * f[i, ch, ix[i, p, 2]]
        )
        for j in range(3):
            want_grad[i, ch, ix[i, p, j]] += float(grad[i, ch, p]) * float(w[i, p, j])
    assert np.array_equal(out.numpy(), want)
    grad_feats = torch.zeros((b, c, m), dtype=dtype)
    mmfix_ext.three_interpolate_backward(grad, idx, weight, grad_feats, b=b, c=c, n=n, m=m)
    tol = 3e-2 if dtype == torch.float16 else 1e-5
    np.testing.assert_allclose(grad_feats.double().numpy(), want_grad, rtol=tol, atol=tol)


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    feats, idx, weight = inputs(1, 2, 5, 3, seed=0)
    with pytest.raises(RuntimeError, match="cpu not found"):
        compiled_ext.three_interpolate_forward(feats, idx, weight, torch.zeros((1, 2, 3)), b=1, c=2, m=5, n=3)


def test_gradcheck_and_feature_propagation_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    feats, idx, weight = inputs(2, 4, 10, 15, seed=3, dtype=torch.float64)
    feats.requires_grad_(True)
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(lambda f: ops.three_interpolate(f, idx, weight), (feats,))
        # PointNet++'s PointFPModule: inverse-distance weights of the three nearest known points.
        g = torch.Generator().manual_seed(4)
        target, source = torch.rand(2, 100, 3, generator=g), torch.rand(2, 20, 3, generator=g)
        source_feats = torch.randn(2, 8, 20, generator=g)
        dist, nearest = ops.three_nn(target, source)
        weights = 1.0 / (dist + 1e-8)
        weights = weights / weights.sum(dim=2, keepdim=True)
        out = ops.three_interpolate(source_feats, nearest, weights)
    _, want_idx = ref.three_nn(target, source)
    assert np.array_equal(nearest.numpy(), want_idx)
    want = (
        source_feats.unsqueeze(2).expand(-1, -1, 100, -1).gather(3, nearest.long().unsqueeze(1).expand(-1, 8, -1, -1))
        * weights.unsqueeze(1)
    ).sum(-1)
    torch.testing.assert_close(out, want)
