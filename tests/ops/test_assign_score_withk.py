"""assign_score_withk (PAConv) against loops of mmcv's CUDA kernels (no CPU kernel in mmcv), gradcheck."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops.devices3d import small_slabs_fixture  # noqa: F401 - the small_slabs fixture
from ops_support import import_mmcv_ops, swap_ext


def inputs(b: int, n0: int, n1: int, m: int, k: int, o: int, seed: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    points = torch.randn(b, n0, m, o, generator=g, dtype=torch.float64).to(dtype)
    centers = torch.randn(b, n0, m, o, generator=g, dtype=torch.float64).to(dtype)
    scores = torch.rand(b, n1, k, m, generator=g, dtype=torch.float64).to(dtype)
    knn_idx = torch.randint(0, n0, (b, n1, k), generator=g)
    knn_idx[:, :, -1:] = torch.where(
        torch.rand(b, n1, 1, generator=g) < 0.3, n0 + 2, knn_idx[:, :, -1:]
    )  # out of range: skipped
    return points, centers, scores, knn_idx


def reference(points, centers, scores, knn_idx, grad_out):
    p, c, s, kn, g = (t.double().numpy() for t in (points, centers, scores, knn_idx, grad_out))
    kn = kn.astype(np.int64)
    b, n0, m, o = p.shape
    n1, k = s.shape[1:3]
    out = np.zeros((b, o, n1, k))
    gp, gc, gs = np.zeros(p.shape), np.zeros(c.shape), np.zeros(s.shape)
    for i, n, j in np.ndindex(b, n1, k):
        nb, cn = kn[i, n, j], kn[i, n, 0]
        if nb < 0 or nb >= n0:
            continue
        for mm, oo in np.ndindex(m, o):
            out[i, oo, n, j] += p[i, nb, mm, oo] * s[i, n, j, mm] - c[i, cn, mm, oo] * s[i, n, j, mm]
            gp[i, nb, mm, oo] += s[i, n, j, mm] * g[i, oo, n, j]
            gc[i, cn, mm, oo] -= s[i, n, j, mm] * g[i, oo, n, j]
            gs[i, n, j, mm] += (p[i, nb, mm, oo] - c[i, cn, mm, oo]) * g[i, oo, n, j]
    return out, gp, gc, gs


@pytest.mark.parametrize(
    ("b", "n0", "n1", "m", "k", "o"), [(1, 4, 2, 1, 1, 1), (2, 30, 10, 4, 5, 6), (2, 80, 40, 8, 12, 16)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_and_backward_equal_the_kernel_loops(mmfix_ext, b, n0, n1, m, k, o, dtype):
    points, centers, scores, knn_idx = inputs(b, n0, n1, m, k, o, seed=n0 + k, dtype=dtype)
    start = torch.full((b, o, n1, k), 0.5, dtype=dtype)  # the forward adds to what is there
    output = start.clone()
    mmfix_ext.assign_score_withk_forward(
        points, centers, scores, knn_idx, output, B=b, N0=n0, N1=n1, M=m, K=k, O=o, aggregate=0
    )
    grad_out = torch.randn((b, o, n1, k), generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(dtype)
    want = reference(points, centers, scores, knn_idx, grad_out)
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    np.testing.assert_allclose((output - start).numpy(), want[0], rtol=tol, atol=tol)
    grads = [torch.full_like(points, 1.0), torch.full_like(centers, 1.0), torch.full_like(scores, 1.0)]
    mmfix_ext.assign_score_withk_backward(
        grad_out, points, centers, scores, knn_idx, *grads, B=b, N0=n0, N1=n1, M=m, K=k, O=o, aggregate=0
    )
    for got, expected in zip(grads, want[1:]):
        np.testing.assert_allclose((got - 1.0).numpy(), expected, rtol=tol, atol=tol)


def test_half_inputs_give_the_float32_result_within_half_precision(mmfix_ext):
    points, centers, scores, knn_idx = inputs(2, 30, 10, 4, 5, 6, seed=2, dtype=torch.float16)
    outputs = []
    for dtype in (torch.float16, torch.float32):
        output = torch.zeros((2, 6, 10, 5), dtype=dtype)
        mmfix_ext.assign_score_withk_forward(
            points.to(dtype),
            centers.to(dtype),
            scores.to(dtype),
            knn_idx,
            output,
            B=2,
            N0=30,
            N1=10,
            M=4,
            K=5,
            O=6,
            aggregate=0,
        )
        outputs.append(output)
    assert outputs[0].dtype == torch.float16
    torch.testing.assert_close(outputs[0].float(), outputs[1], rtol=1e-2, atol=1e-2)


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    points, centers, scores, knn_idx = inputs(1, 4, 2, 1, 1, 1, seed=0)
    with pytest.raises(RuntimeError, match="cpu not found"):
        compiled_ext.assign_score_withk_forward(
            points, centers, scores, knn_idx, torch.zeros((1, 1, 2, 1)), B=1, N0=4, N1=2, M=1, K=1, O=1, aggregate=0
        )


def test_gradcheck_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    points, centers, scores, knn_idx = inputs(2, 10, 5, 3, 4, 2, seed=7, dtype=torch.float64)
    tensors = tuple(t.requires_grad_(True) for t in (scores, points, centers))
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(lambda s, p, c: ops.assign_score_withk(s, p, c, knn_idx, "sum"), tensors)


def test_many_slabs_give_the_same_answer(mmfix_ext, small_slabs):
    points, centers, scores, knn_idx = inputs(2, 20, 12, 3, 4, 5, seed=16)
    output = torch.zeros((2, 5, 12, 4))
    mmfix_ext.assign_score_withk_forward(
        points, centers, scores, knn_idx, output, B=2, N0=20, N1=12, M=3, K=4, O=5, aggregate=0
    )
    grad_out = torch.randn((2, 5, 12, 4), generator=torch.Generator().manual_seed(3))
    want = reference(points, centers, scores, knn_idx, grad_out)
    np.testing.assert_allclose(output.numpy(), want[0], rtol=1e-5, atol=1e-5)
    grads = [torch.zeros_like(points), torch.zeros_like(centers), torch.zeros_like(scores)]
    mmfix_ext.assign_score_withk_backward(
        grad_out, points, centers, scores, knn_idx, *grads, B=2, N0=20, N1=12, M=3, K=4, O=5, aggregate=0
    )
    for got, expected in zip(grads, want[1:]):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
