"""prroi_pool (Precise RoI Pooling): mmfix against the CUDA kernels' definition.

Compiled mmcv has no CPU kernel (checked below); the reference is ``prroi_pool_cuda_kernel.cuh``
written out here in float64: the cell-by-cell integrals, the edge integrals of the
coordinate gradient, atomicAdd as +=.
"""

from __future__ import annotations

import math

import pytest
import torch

from mmfix._ops._rotated_checks import OpArgumentError
from ops_support import import_mmcv_ops, swap_ext


def _data(plane, h, w):
    height, width = plane.shape
    return 0.0 if h < 0 or w < 0 or h >= height or w >= width else float(plane[h, w])


def _interpolation(plane, h, w):
    total = 0.0
    for dh in (0, 1):
        for dw in (0, 1):
            h1, w1 = math.floor(h) + dh, math.floor(w) + dw
            total += _data(plane, h1, w1) * (1 - abs(h - h1)) * (1 - abs(w - w1))
    return total


def _weight(lo, hi):
    return hi - 0.5 * hi * hi - lo + 0.5 * lo * lo


def _cells(plane, s_h, s_w, e_h, e_w, y0, x0, y1, x1):
    """PrRoIPoolingMatCalculation / MatDistributeDiff: [(h, w, weight)] of one cell."""
    wx_s, wy_s = _weight(x0 - s_w, x1 - s_w), _weight(y0 - s_h, y1 - s_h)
    wx_e, wy_e = _weight(e_w - x1, e_w - x0), _weight(e_h - y1, e_h - y0)
    return [(s_h, s_w, wx_s * wy_s), (s_h, e_w, wx_e * wy_s), (e_h, s_w, wx_s * wy_e), (e_h, e_w, wx_e * wy_e)]


def _bins(roi, ph, pw, pooled, scale):
    x1, y1, x2, y2 = (float(v) * scale for v in roi[1:])
    bw, bh = max(x2 - x1, 0.0) / pooled[1], max(y2 - y1, 0.0) / pooled[0]
    bx1, by1 = x1 + bw * pw, y1 + bh * ph
    return bx1, by1, bx1 + bw, by1 + bh, max(0.0, bw * bh)


def _cell_list(plane, bx1, by1, bx2, by2):
    out = []
    for bin_x in range(math.floor(bx1), math.ceil(bx2)):
        for bin_y in range(math.floor(by1), math.ceil(by2)):
            out += _cells(
                plane,
                bin_y,
                bin_x,
                bin_y + 1,
                bin_x + 1,
                max(by1, bin_y),
                max(bx1, bin_x),
                min(by2, bin_y + 1),
                min(bx2, bin_x + 1),
            )
    return out


def ref_forward(features, rois, pooled, scale):
    out = torch.zeros(rois.shape[0], features.shape[1], *pooled, dtype=torch.float64)
    for r, roi in enumerate(rois.tolist()):
        for c in range(features.shape[1]):
            plane = features[int(roi[0]), c]
            for ph in range(pooled[0]):
                for pw in range(pooled[1]):
                    bx1, by1, bx2, by2, size = _bins(roi, ph, pw, pooled, scale)
                    if size == 0:
                        continue
                    total = sum(_data(plane, h, w) * wt for h, w, wt in _cell_list(plane, bx1, by1, bx2, by2))
                    out[r, c, ph, pw] = total / size
    return out


def ref_backward(grad_output, rois, shape, pooled, scale):
    grad = torch.zeros(shape, dtype=torch.float64)
    height, width = shape[2:]
    for r, roi in enumerate(rois.tolist()):
        for c in range(shape[1]):
            for ph in range(pooled[0]):
                for pw in range(pooled[1]):
                    bx1, by1, bx2, by2, size = _bins(roi, ph, pw, pooled, scale)
                    top = 0.0 if size == 0 else float(grad_output[r, c, ph, pw]) / size
                    for h, w, wt in _cell_list(None, bx1, by1, bx2, by2):
                        if 0 <= h < height and 0 <= w < width:
                            grad[int(roi[0]), c, h, w] += top * wt
    return grad


def _single(s, t, c1, c2):
    return 0.5 * (t * t - s * s) * (c2 - c1) + (t - s) * c1


def ref_coor_backward(output, grad_output, features, rois, grad_rois, pooled, scale):
    grad = grad_rois.double().clone()
    for r, roi in enumerate(rois.tolist()):
        for c in range(features.shape[1]):
            plane = features[int(roi[0]), c]
            for ph in range(pooled[0]):
                for pw in range(pooled[1]):
                    bx1, by1, bx2, by2, size = _bins(roi, ph, pw, pooled, scale)
                    g = float(grad_output[r, c, ph, pw])
                    if size == 0 or g / size == 0:
                        continue
                    value = float(output[r, c, ph, pw])
                    gx1 = gx2 = gy1 = gy2 = 0.0
                    for y in range(math.floor(by1), math.ceil(by2)):
                        s, t = max(by1, y) - y, min(by2, y + 1) - y
                        gx1 += _single(s, t, _interpolation(plane, y, bx1), _interpolation(plane, y + 1, bx1))
                        gx2 += _single(s, t, _interpolation(plane, y, bx2), _interpolation(plane, y + 1, bx2))
                    for x in range(math.floor(bx1), math.ceil(bx2)):
                        s, t = max(bx1, x) - x, min(bx2, x + 1) - x
                        gy1 += _single(s, t, _interpolation(plane, by1, x), _interpolation(plane, by1, x + 1))
                        gy2 += _single(s, t, _interpolation(plane, by2, x), _interpolation(plane, by2, x + 1))
                    p_x1 = (-gx1 + (by2 - by1) * value) / size * scale
                    p_y1 = (-gy1 + (bx2 - bx1) * value) / size * scale
                    p_x2 = (gx2 - (by2 - by1) * value) / size * scale
                    p_y2 = (gy2 - (bx2 - bx1) * value) / size * scale
                    ph_, pw_ = pooled
                    grad[r, 0] = 0
                    grad[r, 1] += (p_x1 * (1 - pw / pw_) + p_x2 * (1 - (pw + 1) / pw_)) * g
                    grad[r, 2] += (p_y1 * (1 - ph / ph_) + p_y2 * (1 - (ph + 1) / ph_)) * g
                    grad[r, 3] += (p_x2 * (pw + 1) / pw_ + p_x1 * pw / pw_) * g
                    grad[r, 4] += (p_y2 * (ph + 1) / ph_ + p_y1 * ph / ph_) * g
    return grad


def _case(seed, n, c, height, width, k, scale):
    gen = torch.Generator().manual_seed(seed)
    features = torch.randn(n, c, height, width, generator=gen)
    extent = torch.tensor([width, height]) / scale
    corner = torch.rand(k, 2, generator=gen) * extent * 1.2 - extent * 0.15
    size = torch.rand(k, 2, generator=gen) * extent * 0.7
    batch = torch.randint(0, n, (k, 1), generator=gen).float()
    rois = torch.cat((batch, corner, corner + size), 1)
    if k > 2:
        rois[1, 3:] = rois[1, 1:3]  # an empty RoI
        rois[2, 1:3] = rois[2, 1:3].round()  # corners on the grid
    return features, rois


CASES = [
    (2, 3, 7, 9, 6, (2, 3), 1.0),
    (1, 2, 6, 6, 5, (3, 3), 0.5),
    (2, 1, 10, 5, 4, (1, 2), 0.25),
    (1, 2, 4, 4, 0, (2, 2), 1.0),
]


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    features, rois = _case(0, 1, 1, 4, 4, 2, 1.0)
    with pytest.raises(RuntimeError, match="implementation for device cpu not found"):
        compiled_ext.prroi_pool_forward(
            features, rois, torch.zeros(2, 1, 2, 2), pooled_height=2, pooled_width=2, spatial_scale=1.0
        )


@pytest.mark.parametrize(("n", "c", "height", "width", "k", "pooled", "scale"), CASES)
def test_three_kernels_match(mmfix_ext, n, c, height, width, k, pooled, scale):
    features, rois = _case(n + c + height + k, n, c, height, width, k, scale)
    params = dict(pooled_height=pooled[0], pooled_width=pooled[1], spatial_scale=scale)
    out = torch.full((k, c, *pooled), 9.0)
    mmfix_ext.prroi_pool_forward(features, rois, out, **params)
    expected = ref_forward(features, rois, pooled, scale)
    torch.testing.assert_close(out, expected.float(), rtol=1e-4, atol=1e-5)
    grad_output = torch.randn(k, c, *pooled)
    grad_input = torch.randn(features.shape)
    initial = grad_input.clone()
    mmfix_ext.prroi_pool_backward(grad_output, rois, grad_input, **params)
    expected_grad = initial.double() + ref_backward(grad_output, rois, features.shape, pooled, scale)
    torch.testing.assert_close(grad_input, expected_grad.float(), rtol=1e-4, atol=1e-5)
    grad_rois = torch.randn(rois.shape)
    expected_rois = ref_coor_backward(out, grad_output, features, rois, grad_rois, pooled, scale)
    mmfix_ext.prroi_pool_coor_backward(out, grad_output, features, rois, grad_rois, **params)
    torch.testing.assert_close(grad_rois, expected_rois.float(), rtol=1e-4, atol=1e-4)


def test_through_mmcv_prroi_pool(mmfix_ext):
    """mmcv.ops.PrRoIPool: the gradients are those of the exact integral (finite differences)."""
    ops = import_mmcv_ops(mmfix_ext)
    features, rois = _case(3, 2, 3, 8, 8, 5, 0.5)
    features.requires_grad_(True)
    rois.requires_grad_(True)
    layer = ops.PrRoIPool((2, 2), 0.5)
    with swap_ext(mmfix_ext):
        out = layer(features, rois)
        grad_output = torch.randn_like(out)
        out.backward(grad_output)
    torch.testing.assert_close(
        out.detach(), ref_forward(features.detach(), rois.detach(), (2, 2), 0.5).float(), rtol=1e-4, atol=1e-5
    )
    # Coordinates: central differences of the (float64) reference integral, away from
    # RoIs whose edges sit on grid lines (the kink of the hat functions).
    smooth = [0, 3, 4]
    base = rois.detach().double()
    for r in smooth:
        for j in range(1, 5):
            step = torch.zeros_like(base)
            step[r, j] = 1e-4
            plus = (ref_forward(features.detach().double(), base + step, (2, 2), 0.5) * grad_output.double()).sum()
            minus = (ref_forward(features.detach().double(), base - step, (2, 2), 0.5) * grad_output.double()).sum()
            assert float(rois.grad[r, j]) == pytest.approx(float((plus - minus) / 2e-4), rel=2e-3, abs=2e-3)


def test_bad_input_is_named(mmfix_ext):
    features, rois = _case(0, 1, 1, 4, 4, 2, 1.0)
    params = dict(pooled_height=2, pooled_width=2, spatial_scale=1.0)
    with pytest.raises(OpArgumentError, match=r"`input` is float64.*float32"):
        mmfix_ext.prroi_pool_forward(features.double(), rois, torch.zeros(2, 1, 2, 2), **params)
    with pytest.raises(OpArgumentError, match=r"`rois` must have shape \(N, 5\)"):
        mmfix_ext.prroi_pool_forward(features, rois[:, :4], torch.zeros(2, 1, 2, 2), **params)
    with pytest.raises(OpArgumentError, match=r"`output` must have shape \(2, 1, 2, 2\)"):
        mmfix_ext.prroi_pool_forward(features, rois, torch.zeros(2, 1, 3, 2), **params)
