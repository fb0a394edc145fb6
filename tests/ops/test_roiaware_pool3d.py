"""RoI-aware 3D pooling (max and avg, forward and backward) against a loop of mmcv's CUDA kernels
(no CPU kernel in mmcv), and mmcv's RoIAwarePool3d with autograd."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops.devices3d import small_slabs_fixture  # noqa: F401 - the small_slabs fixture
from ops_support import import_mmcv_ops, swap_ext


def scene(boxes: int, points: int, channels: int, seed: int, ties: bool = False):
    g = torch.Generator().manual_seed(seed)
    rois = torch.cat(
        [
            torch.rand(boxes, 3, generator=g) * 4 - 2,
            torch.rand(boxes, 3, generator=g) * 2 + 0.5,
            torch.rand(boxes, 1, generator=g) * 6.2 - 3.1,
        ],
        dim=1,
    )
    rois[::2, 6] = 0.0
    pts = torch.rand(points, 3, generator=g) * 6 - 3
    pts[:, 2] = pts[:, 2] / 2 + 0.5
    feats = torch.randn(points, channels, generator=g)
    if ties:
        feats = torch.round(feats)  # equal maxima within a voxel: the first recorded point wins
    return rois.contiguous(), pts.contiguous(), feats.contiguous()


def run(ext, rois, pts, feats, out, max_pts, method):
    shape = (rois.size(0), *out)
    argmax = torch.zeros((*shape, feats.size(1)), dtype=torch.int)
    idx_of_voxels = torch.zeros((*shape, max_pts), dtype=torch.int)
    pooled = torch.zeros((*shape, feats.size(1)), dtype=feats.dtype)
    ext.roiaware_pool3d_forward(rois, pts, feats, argmax, idx_of_voxels, pooled, pool_method=method)
    return pooled, argmax, idx_of_voxels


CASES = [
    (1, 300, 2, (2, 2, 2), 4, False),
    (3, 600, 4, (4, 3, 2), 8, True),
    (4, 2000, 3, (6, 6, 6), 16, False),
    (2, 900, 5, (3, 5, 4), 3, True),
]


@pytest.mark.parametrize(("boxes", "points", "channels", "out", "max_pts", "ties"), CASES)
@pytest.mark.parametrize("method", [0, 1])
def test_forward_and_backward_equal_the_kernel_loops(mmfix_ext, boxes, points, channels, out, max_pts, ties, method):
    rois, pts, feats = scene(boxes, points, channels, seed=points + method, ties=ties)
    pooled, argmax, idx_of_voxels = run(mmfix_ext, rois, pts, feats, out, max_pts, method)
    want_pooled, want_argmax, want_idx = ref.roiaware_pool3d(rois, pts, feats, out, max_pts, method)
    assert np.array_equal(idx_of_voxels.numpy(), want_idx)
    assert want_idx[..., 0].sum() > 0  # points do fall into the boxes
    if method == 0:
        assert np.array_equal(argmax.numpy(), want_argmax)
        assert np.array_equal(pooled.numpy(), want_pooled)
    else:
        np.testing.assert_allclose(pooled.numpy(), want_pooled, rtol=1e-5, atol=1e-6)
    grad_out = torch.randn(pooled.shape, generator=torch.Generator().manual_seed(1))
    grad_in = torch.zeros_like(feats)
    mmfix_ext.roiaware_pool3d_backward(idx_of_voxels, argmax, grad_out, grad_in, pool_method=method)
    want_grad = np.zeros(feats.shape)
    g = grad_out.numpy()
    for index in np.ndindex(*want_idx.shape[:4]):
        count = want_idx[index][0]
        for c in range(channels):
            if method == 0 and want_argmax[index][c] >= 0:
                want_grad[want_argmax[index][c], c] += g[index][c]
            elif method == 1:
                for k in want_idx[index][1 : count + 1]:
                    want_grad[k, c] += g[index][c] * float(np.float32(1) / np.float32(max(count, 1)))
    np.testing.assert_allclose(grad_in.numpy(), want_grad, rtol=1e-5, atol=1e-5)


def test_empty_voxels_argmax_minus_one_and_caller_values_kept(mmfix_ext):
    rois, pts, feats = scene(2, 40, 3, seed=2)
    pooled, argmax, idx_of_voxels = run(mmfix_ext, rois, pts, feats, (5, 5, 5), 4, 0)
    empty = idx_of_voxels[..., 0] == 0
    assert empty.any() and (argmax[empty] == -1).all() and (pooled[empty] == 0).all()
    feats[:] = float("-inf")  # never strictly above the kernel's starting -inf: no argmax anywhere
    pooled, argmax, _ = run(mmfix_ext, rois, pts, feats, (2, 2, 2), 4, 0)
    assert (argmax == -1).all() and (pooled == 0).all()


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    with pytest.raises(RuntimeError, match="cpu not found"):
        run(compiled_ext, *scene(1, 10, 2, seed=0), (2, 2, 2), 4, 0)


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_roiaware_pool3d_module_through_mmcv(mmfix_ext, mode):
    ops = import_mmcv_ops(mmfix_ext)
    rois, pts, feats = scene(3, 800, 4, seed=5)
    feats.requires_grad_(True)
    layer = ops.RoIAwarePool3d(out_size=(4, 3, 2), max_pts_per_voxel=6, mode=mode)
    with swap_ext(mmfix_ext):
        pooled = layer(rois, pts, feats)
        (pooled * torch.arange(pooled.numel()).view_as(pooled)).sum().backward()
    method = 0 if mode == "max" else 1
    want_pooled, want_argmax, want_idx = ref.roiaware_pool3d(rois, pts, feats.detach(), (4, 3, 2), 6, method)
    np.testing.assert_allclose(pooled.detach().numpy(), want_pooled, rtol=1e-5, atol=1e-6)
    # mmcv's autograd Function routes the gradient through the extension's backward
    weights = np.arange(pooled.numel(), dtype=np.float64).reshape(pooled.shape)
    want_grad = np.zeros(feats.shape)
    for index in np.ndindex(*want_idx.shape[:4]):
        count = want_idx[index][0]
        for c in range(4):
            if method == 0 and want_argmax[index][c] >= 0:
                want_grad[want_argmax[index][c], c] += weights[index][c]
            elif method == 1:
                for k in want_idx[index][1 : count + 1]:
                    want_grad[k, c] += weights[index][c] / max(count, 1)
    np.testing.assert_allclose(feats.grad.numpy(), want_grad, rtol=1e-5, atol=1e-3)


def test_half_inputs_give_the_float32_result_within_half_precision(mmfix_ext):
    rois, pts, feats = scene(3, 1500, 4, seed=9)
    rois, pts, feats = rois.half(), pts.half(), feats.half()  # values both types hold exactly
    half = run(mmfix_ext, rois, pts, feats, (4, 4, 4), 8, 1)
    wide = run(mmfix_ext, rois.float(), pts.float(), feats.float(), (4, 4, 4), 8, 1)
    # Half arithmetic may move a point lying near a face of a box or voxel to the next voxel.
    same = (half[2] == wide[2]).all(dim=-1)
    assert same.float().mean() > 0.95 and wide[2][..., 0].sum() > 100
    torch.testing.assert_close(half[0][same].float(), wide[0][same], rtol=2e-3, atol=2e-3)
    assert half[0].dtype == torch.float16


def test_the_extension_records_no_autograd_graph(mmfix_ext):
    rois, pts, feats = scene(2, 300, 3, seed=4)
    pooled, _, _ = run(mmfix_ext, rois, pts, feats.requires_grad_(True), (2, 2, 2), 4, 0)
    assert pooled.grad_fn is None and not pooled.requires_grad


def test_out_sizes_past_the_kernels_8_bits_are_refused(mmfix_ext):
    rois, pts, feats = scene(1, 10, 2, seed=0)
    with pytest.raises(ValueError, match="8 bits"):
        run(mmfix_ext, rois, pts, feats, (256, 1, 1), 4, 0)


@pytest.mark.parametrize("method", [0, 1])
def test_many_slabs_give_the_same_answer(mmfix_ext, small_slabs, method):
    rois, pts, feats = scene(5, 400, 3, seed=13, ties=True)
    pooled, argmax, idx_of_voxels = run(mmfix_ext, rois, pts, feats, (3, 3, 2), 5, method)
    want_pooled, want_argmax, want_idx = ref.roiaware_pool3d(rois, pts, feats, (3, 3, 2), 5, method)
    assert np.array_equal(idx_of_voxels.numpy(), want_idx) and want_idx[..., 0].sum() > 0
    if method == 0:
        assert np.array_equal(argmax.numpy(), want_argmax)
    np.testing.assert_allclose(pooled.numpy(), want_pooled, rtol=1e-5, atol=1e-6)
