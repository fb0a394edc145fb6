"""roi_pool: compiled mmcv has no CPU kernel, so the reference here is mmcv's CUDA kernel
(roi_pool_cuda_kernel.cuh) written out as loops over one output value at a time, and, where
its conventions agree with mmcv's, torchvision's roi_pool (in the tv environment)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mmfix._ops import roi_pool as roi_pool_module
from ops_support import import_mmcv_ops, swap_ext

F32 = np.float32
FLT_MAX = float(np.finfo(np.float32).max)


def _fmaf(a: float, b: float, c: float) -> float:
    # nvcc fuses `p * bin + start` into one fmaf: the exact value rounded once to float32.
    return float(F32(np.float64(F32(a)) * np.float64(F32(b)) + np.float64(F32(c))))


def reference_forward(features, rois, ph, pw, scale, output, argmax):
    """The CUDA kernel's loop body for every (n, c, ph, pw), in float32 arithmetic."""
    _, channels, height, width = features.shape
    output, argmax = output.clone(), argmax.clone()
    for n in range(rois.shape[0]):
        roi = [F32(v) for v in rois[n].tolist()]
        batch = int(roi[0])
        s = F32(scale)
        x1, y1 = F32(roi[1] * s), F32(roi[2] * s)
        x2, y2 = F32(F32(roi[3] + F32(1)) * s), F32(F32(roi[4] + F32(1)) * s)
        roi_w, roi_h = F32(x2 - x1), F32(y2 - y1)
        if roi_w <= 0 or roi_h <= 0:
            continue  # output and argmax left as they were
        bin_w, bin_h = F32(roi_w / F32(pw)), F32(roi_h / F32(ph))
        for c in range(channels):
            plane = features[batch, c].reshape(-1).tolist()
            for i in range(ph):
                for j in range(pw):
                    start_x = min(max(math.floor(_fmaf(j, bin_w, x1)), 0), width)
                    start_y = min(max(math.floor(_fmaf(i, bin_h, y1)), 0), height)
                    end_x = min(max(math.ceil(_fmaf(j + 1, bin_w, x1)), 0), width)
                    end_y = min(max(math.ceil(_fmaf(i + 1, bin_h, y1)), 0), height)
                    empty = end_y <= start_y or end_x <= start_x
                    best, best_at = (0.0 if empty else -FLT_MAX), -1
                    for y in range(start_y, end_y):
                        for x in range(start_x, end_x):
                            if plane[y * width + x] > best:
                                best, best_at = plane[y * width + x], y * width + x
                    output[n, c, i, j] = best
                    argmax[n, c, i, j] = best_at
    return output, argmax


def reference_backward(grad_output, rois, argmax, grad_input):
    grad_input = grad_input.clone()
    channels = grad_input.shape[1]
    for n in range(rois.shape[0]):
        batch = int(rois[n, 0])
        for c in range(channels):
            plane = grad_input[batch, c].view(-1)
            for k, at in enumerate(argmax[n, c].reshape(-1).tolist()):
                if at != -1:
                    plane[at] += grad_output[n, c].reshape(-1)[k]
    return grad_input


def _rois(generator, count, batch, height, width, scale, *, integer=False):
    extent = torch.tensor([width, height], dtype=torch.float32) / scale
    corner = (torch.rand(count, 2, generator=generator) * 1.4 - 0.2) * extent
    size = (torch.rand(count, 2, generator=generator) * 1.2 - 0.15) * extent  # some negative: skipped
    rois = torch.cat([torch.randint(0, batch, (count, 1), generator=generator).float(), corner, corner + size], 1)
    if integer:
        rois = rois.round()
    rois[0, 1:] = torch.tensor([0.0, 0.0, width / scale - 1, height / scale - 1])
    return rois


@pytest.mark.parametrize("trial", range(24))
def test_roi_pool_matches_the_cuda_kernel(trial):
    g = torch.Generator().manual_seed(trial)
    n, c = 2, 3
    height, width = [(5, 7), (11, 12), (16, 9)][trial % 3]
    ph, pw = [(2, 2), (3, 4), (7, 7)][trial % 3]
    scale = [1.0, 0.5, 0.25, 1 / 3][trial % 4]
    features = torch.randn(n, c, height, width, generator=g)
    if trial % 5 == 0:
        features = features.round()  # ties: the first maximum in row-major order wins
    rois = _rois(g, 8, n, height, width, scale, integer=trial % 2 == 1)
    output = torch.zeros(8, c, ph, pw)
    argmax = torch.zeros(8, c, ph, pw, dtype=torch.int32)
    expected_out, expected_arg = reference_forward(features, rois, ph, pw, scale, output, argmax)
    roi_pool_module.roi_pool_forward(features, rois, output, argmax, ph, pw, scale)
    assert torch.equal(output, expected_out)
    assert torch.equal(argmax, expected_arg)
    grad_output = torch.randn(8, c, ph, pw, generator=g)
    grad_input = torch.randn(n, c, height, width, generator=g)
    expected_grad = reference_backward(grad_output, rois, argmax, grad_input)
    roi_pool_module.roi_pool_backward(grad_output, rois, argmax, grad_input, ph, pw, scale)
    torch.testing.assert_close(grad_input, expected_grad, rtol=1e-6, atol=1e-6)


def test_small_chunks(monkeypatch):
    monkeypatch.setattr(roi_pool_module, "POOL_BUDGET", 20)
    g = torch.Generator().manual_seed(99)
    features = torch.randn(2, 2, 14, 10, generator=g)
    rois = _rois(g, 12, 2, 14, 10, 0.5)
    output, argmax = torch.zeros(12, 2, 3, 3), torch.zeros(12, 2, 3, 3, dtype=torch.int32)
    expected = reference_forward(features, rois, 3, 3, 0.5, output, argmax)
    roi_pool_module.roi_pool_forward(features, rois, output, argmax, 3, 3, 0.5)
    assert torch.equal(output, expected[0]) and torch.equal(argmax, expected[1])


def test_half_and_double_pool_the_same_values():
    g = torch.Generator().manual_seed(3)
    features = torch.randn(1, 4, 12, 12, generator=g)
    rois = _rois(g, 6, 1, 12, 12, 1.0, integer=True)
    results = []
    for dtype in (torch.float32, torch.float64, torch.float16):
        output, argmax = torch.zeros(6, 4, 3, 3, dtype=dtype), torch.zeros(6, 4, 3, 3, dtype=torch.int32)
        roi_pool_module.roi_pool_forward(features.to(dtype), rois.to(dtype), output, argmax, 3, 3, 1.0)
        results.append((output, argmax))
    for output, argmax in results[1:]:
        torch.testing.assert_close(output.float(), results[0][0], rtol=1e-3, atol=1e-3)
        assert torch.equal(argmax, results[0][1])


def test_mmcv_roi_pool_module(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    g = torch.Generator().manual_seed(4)
    features = torch.randn(2, 3, 20, 24, generator=g, requires_grad=True)
    rois = _rois(g, 10, 2, 20, 24, 0.5)
    weights = torch.randn(10, 3, 4, 4, generator=g)
    with swap_ext(mmfix_ext):
        out = ops.RoIPool((4, 4), spatial_scale=0.5)(features, rois)
        (out * weights).sum().backward()
    # mmcv's wrapper passes zeros: skipped RoIs keep output 0 and argmax 0 (pixel 0 gets their gradient).
    expected_out, expected_arg = reference_forward(
        features.detach(), rois, 4, 4, 0.5, torch.zeros(10, 3, 4, 4), torch.zeros(10, 3, 4, 4, dtype=torch.int32)
    )
    torch.testing.assert_close(out.detach(), expected_out, rtol=0, atol=0)
    expected_grad = reference_backward(weights, rois, expected_arg, torch.zeros(2, 3, 20, 24))
    torch.testing.assert_close(features.grad, expected_grad, rtol=1e-6, atol=1e-6)


def test_gradient_of_the_forward(mmfix_ext):
    import_mmcv_ops(mmfix_ext)
    from mmcv.ops.roi_pool import RoIPoolFunction

    g = torch.Generator().manual_seed(5)
    features = torch.randn(1, 2, 8, 9, generator=g, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[0, 0.0, 0.0, 7.0, 6.0], [0, 2.0, 1.5, 8.0, 7.0]], dtype=torch.float64)
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(
            lambda x: RoIPoolFunction.apply(x, rois, (3, 2), 1.0), (features,), fast_mode=True
        )


def test_bad_input_is_refused_clearly(mmfix_ext):
    features = torch.randn(1, 2, 8, 8)
    output, argmax = torch.zeros(1, 2, 2, 2), torch.zeros(1, 2, 2, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="batch index"):
        mmfix_ext.roi_pool_forward(features, torch.tensor([[3.0, 0, 0, 2, 2]]), output, argmax, 2, 2, 1.0)
    with pytest.raises(ValueError, match="shape"):
        mmfix_ext.roi_pool_forward(features, torch.tensor([[0.0, 0, 0, 2, 2]]), output[:, :1], argmax, 2, 2, 1.0)
    with pytest.raises(ValueError, match="argmax holds pixel indices outside"):
        mmfix_ext.roi_pool_backward(
            torch.ones(1, 2, 2, 2),
            torch.tensor([[0.0, 0, 0, 2, 2]]),
            argmax + 64,
            torch.zeros_like(features),
            2,
            2,
            1.0,
        )


# --- torchvision's roi_pool, where the two conventions agree ---------------------------------


def test_agrees_with_torchvision_where_the_conventions_agree():
    """torchvision rounds the corners and counts the last pixel ((x2 - x1 + 1) wide); mmcv
    scales without rounding and spans [x1, x2 + 1). With scale 1, integer corners and sizes
    a multiple of the output (bins on whole pixels) both describe the same bins."""
    torchvision = pytest.importorskip("torchvision")
    try:
        torch.ops.torchvision.roi_pool  # noqa: B018
    except (AttributeError, RuntimeError):
        pytest.skip("torchvision's kernels do not load with this torch")
    g = torch.Generator().manual_seed(6)
    features = torch.randn(2, 4, 30, 40, generator=g)
    ph, pw = 4, 3
    corner = torch.randint(-3, 25, (50, 2), generator=g).float()
    size = torch.randint(1, 5, (50, 2), generator=g).float() * torch.tensor([pw, ph])
    rois = torch.cat([torch.randint(0, 2, (50, 1), generator=g).float(), corner, corner + size - 1], 1)
    expected, expected_arg = torch.ops.torchvision.roi_pool(features, rois, 1.0, ph, pw)
    output, argmax = torch.zeros(50, 4, ph, pw), torch.zeros(50, 4, ph, pw, dtype=torch.int32)
    roi_pool_module.roi_pool_forward(features, rois, output, argmax, ph, pw, 1.0)
    assert torch.equal(output, expected)
    assert torch.equal(argmax, expected_arg.to(torch.int32))
    assert torchvision is not None
