"""Grouping (plain and stacked, forward and backward) against loops written from mmcv's CUDA kernels
(no CPU kernel in mmcv), gradcheck, and mmcv's grouping_operation / QueryAndGroup / GroupAll."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops.devices3d import cpu_wrappers_fixture  # noqa: F401 - the cpu_wrappers fixture
from ops_support import import_mmcv_ops, swap_ext


def inputs(b: int, c: int, n: int, p: int, s: int, seed: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(b, c, n, generator=g, dtype=torch.float64).to(dtype)
    idx = torch.randint(0, n, (b, p, s), generator=g, dtype=torch.int32)
    idx[:, :, s // 2 :] = idx[:, :, :1]  # repeated indices: the backward must add them up
    return feats, idx


def reference_forward(feats: np.ndarray, idx: np.ndarray) -> np.ndarray:
    b, c, _ = feats.shape
    out = np.zeros((b, c, *idx.shape[1:]), dtype=feats.dtype)
    for i in range(b):
        for ch in range(c):
            for p, s in np.ndindex(*idx.shape[1:]):
                out[i, ch, p, s] = feats[i, ch, idx[i, p, s]]
    return out


def reference_backward(grad: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    b, c = grad.shape[:2]
    out = np.zeros((b, c, n))
    for i in range(b):
        for ch in range(c):
            for p, s in np.ndindex(*idx.shape[1:]):
                out[i, ch, idx[i, p, s]] += grad[i, ch, p, s]
    return out


@pytest.mark.parametrize(
    ("b", "c", "n", "p", "s"), [(1, 1, 1, 1, 1), (2, 3, 30, 8, 4), (2, 16, 200, 32, 16), (1, 4, 50, 0, 8)]
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_forward_and_backward_equal_the_kernel_loops(mmfix_ext, b, c, n, p, s, dtype):
    feats, idx = inputs(b, c, n, p, s, seed=n + p, dtype=dtype)
    out = torch.zeros((b, c, p, s), dtype=dtype)
    mmfix_ext.group_points_forward(feats, idx, out, b=b, c=c, n=n, npoints=p, nsample=s)
    assert np.array_equal(out.numpy(), reference_forward(feats.numpy(), idx.numpy()))
    grad = torch.randn((b, c, p, s), generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dtype)
    grad_feats = torch.zeros((b, c, n), dtype=dtype)
    mmfix_ext.group_points_backward(grad, idx, grad_feats, b=b, c=c, n=n, npoints=p, nsample=s)
    tol = 2e-2 if dtype == torch.float16 else 1e-5
    np.testing.assert_allclose(
        grad_feats.double().numpy(), reference_backward(grad.double().numpy(), idx.numpy(), n), rtol=tol, atol=tol
    )


def stacked(seed: int, counts=(30, 20, 50), centre_counts=(4, 2, 6), c: int = 5, s: int = 6):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(sum(counts), c, generator=g)
    idx = torch.cat(
        [torch.randint(0, max(n, 1), (m, s), generator=g, dtype=torch.int32) for n, m in zip(counts, centre_counts)]
    )
    return feats, torch.tensor(counts, dtype=torch.int32), idx, torch.tensor(centre_counts, dtype=torch.int32)


def reference_stack(feats, counts, idx, idx_counts, fill: float):
    c = feats.shape[1]
    out = np.full((idx.shape[0], c, idx.shape[1]), fill, dtype=np.float32)
    grad_map = []
    row = 0
    for item, m in enumerate(idx_counts):
        start = sum(counts[:item])
        end = start + counts[item]
        for _ in range(m):
            for s in range(idx.shape[1]):
                local = int(idx[row, s])
                # the kernel: in_idx = local * c + ch < end * c (item-relative index against the absolute end)
                if local < end and 0 <= start + local < feats.shape[0]:
                    out[row, :, s] = feats[start + local]
                grad_map.append((row, s, start + local))
            row += 1
    return out, grad_map


def test_stacked_forward_and_backward_equal_the_kernel_loops(mmfix_ext):
    feats, counts, idx, idx_counts = stacked(seed=2)
    # The kernel compares the item-relative index with the item's absolute end:
    idx[0, 0] = 40  # item 0 (rows 0-29, end 30): 40 >= 30, not written
    idx[4, 0] = 25  # item 1 (rows 30-49, end 50): 25 < 50, reads row 55 of item 2, as the kernel does
    idx[6, 1] = 75  # item 2 (rows 50-99, end 100): 75 < 100 but row 125 is outside the tensor: left alone
    b, c, m, s = 3, feats.size(1), idx.size(0), idx.size(1)
    out = torch.full((m, c, s), 3.0)
    mmfix_ext.stack_group_points_forward(feats, counts, idx, idx_counts, out, b=b, c=c, m=m, nsample=s)
    want, grad_map = reference_stack(feats.numpy(), counts.tolist(), idx.numpy(), idx_counts.tolist(), fill=3.0)
    assert np.array_equal(out.numpy(), want)
    assert (out[0, :, 0] == 3.0).all() and torch.equal(out[4, :, 0], feats[55]) and (out[6, :, 1] == 3.0).all()

    idx[6, 1] = 0
    grad = torch.randn((m, c, s), generator=torch.Generator().manual_seed(3))
    grad_feats = torch.zeros_like(feats)
    mmfix_ext.stack_group_points_backward(
        grad, idx, idx_counts, counts, grad_feats, b=b, c=c, m=m, n=feats.size(0), nsample=s
    )
    _, grad_map = reference_stack(feats.numpy(), counts.tolist(), idx.numpy(), idx_counts.tolist(), fill=0.0)
    want_grad = np.zeros(feats.shape)
    for row, slot, target in grad_map:
        want_grad[target] += grad[row, :, slot].double().numpy()
    np.testing.assert_allclose(grad_feats.numpy(), want_grad, rtol=1e-5, atol=1e-6)


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    feats, idx = inputs(1, 2, 10, 3, 2, seed=0)
    with pytest.raises(RuntimeError, match="cpu not found"):
        compiled_ext.group_points_forward(feats, idx, torch.zeros((1, 2, 3, 2)), b=1, c=2, n=10, npoints=3, nsample=2)


def test_gradcheck_through_mmcv_grouping_operation(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    feats, idx = inputs(2, 3, 12, 4, 5, seed=4, dtype=torch.float64)
    feats.requires_grad_(True)
    sfeats, counts, sidx, idx_counts = stacked(seed=5, counts=(7, 5), centre_counts=(3, 2), c=3, s=4)
    sfeats = sfeats.double().requires_grad_(True)
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(lambda f: ops.grouping_operation(f, idx), (feats,))
        assert torch.autograd.gradcheck(lambda f: ops.grouping_operation(f, sidx, counts, idx_counts), (sfeats,))


@pytest.mark.parametrize("radius", [0.3, None])
def test_query_and_group_through_mmcv(mmfix_ext, cpu_wrappers, radius):
    ops = cpu_wrappers  # knn's wrapper (radius None) assumes CUDA without mmfix's mmcv_ops_devices patch
    g = torch.Generator().manual_seed(6)
    xyz = torch.rand(2, 300, 3, generator=g)
    centres = xyz[:, :40].contiguous()
    feats = torch.randn(2, 6, 300, generator=g, requires_grad=True)
    layer = ops.QueryAndGroup(radius, 8, use_xyz=True, return_grouped_xyz=True, return_grouped_idx=True)
    with swap_ext(mmfix_ext):
        new_features, grouped_xyz, idx = layer(xyz, centres, feats)
        new_features.sum().backward()
    if radius is None:
        want_idx, _ = ref.knn(xyz, centres, 8)
    else:
        want_idx = ref.ball_query(centres, xyz, 0.0, radius, 8)
    assert np.array_equal(idx.numpy(), want_idx)
    expected_xyz = reference_forward(xyz.transpose(1, 2).numpy(), want_idx)
    assert np.array_equal(grouped_xyz.numpy(), expected_xyz)
    expected = np.concatenate(
        [
            expected_xyz - centres.transpose(1, 2).unsqueeze(-1).numpy(),
            reference_forward(feats.detach().numpy(), want_idx),
        ],
        axis=1,
    )
    np.testing.assert_allclose(new_features.detach().numpy(), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(feats.grad.numpy(), reference_backward(np.ones((2, 6, 40, 8)), want_idx, 300))
