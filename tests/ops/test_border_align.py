"""border_align (BorderDet): mmfix against the CUDA kernels' definition.

Compiled mmcv has no CPU kernel (checked below); the reference is the kernels' loops over
(n, c, box, border) written out here: float32 positions stepped as the kernel steps them,
mmcv's bilinear_interpolate, strict ``>`` for the running maximum, atomicAdd as +=.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mmfix._ops._rotated_checks import OpArgumentError
from ops_support import import_mmcv_ops, swap_ext

F = np.float32


def _bilinear(plane, height, width, y, x):
    """mmcv's bilinear_interpolate(_gradient): [(flat index, weight)] (empty outside)."""
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return []
    y, x = max(y, F(0)), max(x, F(0))
    y_low, x_low = int(y), int(x)
    if y_low >= height - 1:
        y_high = y_low = height - 1
        y = F(y_low)
    else:
        y_high = y_low + 1
    if x_low >= width - 1:
        x_high = x_low = width - 1
        x = F(x_low)
    else:
        x_high = x_low + 1
    ly, lx = F(y - y_low), F(x - x_low)
    hy, hx = F(1) - ly, F(1) - lx
    return [
        (y_low * width + x_low, hy * hx),
        (y_low * width + x_high, hy * lx),
        (y_high * width + x_low, ly * hx),
        (y_high * width + x_high, ly * lx),
    ]


def _start_and_step(box, border, pool_size):
    x1, y1, x2, y2 = (F(v) for v in box)
    if border == 0:
        return x1, y1, F(x2 - x1) / F(pool_size), F(0)
    if border == 1:
        return x1, y1, F(0), F(y2 - y1) / F(pool_size)
    if border == 2:
        return x2, y2, -(F(x2 - x1) / F(pool_size)), F(0)
    return x2, y2, F(0), -(F(y2 - y1) / F(pool_size))


def ref_forward(features, boxes, pool_size):
    n_size, channels4, height, width = features.shape
    channels, k = channels4 // 4, boxes.shape[1]
    flat = features.double().reshape(n_size, 4, channels, height * width).numpy()
    out = np.zeros((n_size, channels, k, 4))
    arg = np.zeros((n_size, channels, k, 4), dtype=np.int32)
    for n in range(n_size):
        for b in range(k):
            for border in range(4):
                x0, y0, sx, sy = _start_and_step(boxes[n, b].tolist(), border, pool_size)
                for c in range(channels):
                    plane = flat[n, border, c]
                    x, y = x0, y0
                    best = sum(plane[i] * w for i, w in _bilinear(plane, height, width, y, x))
                    best_at = 0
                    for i in range(1, pool_size + 1):
                        x, y = F(x + sx), F(y + sy)
                        value = sum(plane[j] * w for j, w in _bilinear(plane, height, width, y, x))
                        if value > best:
                            best, best_at = value, i
                    out[n, c, b, border], arg[n, c, b, border] = best, best_at
    return torch.from_numpy(out), torch.from_numpy(arg)


def ref_backward(grad_output, boxes, argmax, shape, pool_size):
    n_size, channels4, height, width = shape
    channels, k = channels4 // 4, boxes.shape[1]
    grad = np.zeros((n_size, 4, channels, height * width))
    for n in range(n_size):
        for b in range(k):
            for border in range(4):
                x0, y0, sx, sy = _start_and_step(boxes[n, b].tolist(), border, pool_size)
                for c in range(channels):
                    steps = F(int(argmax[n, c, b, border]))
                    # x += x_stride * argmax: one fused multiply-add on the GPU
                    x = F(float(x0) + float(sx) * float(steps))
                    y = F(float(y0) + float(sy) * float(steps))
                    for j, w in _bilinear(None, height, width, y, x):
                        grad[n, border, c, j] += float(grad_output[n, c, b, border]) * float(w)
    return torch.from_numpy(grad.reshape(shape))


def _case(seed, n, c, height, width, k, spread=1.0):
    gen = torch.Generator().manual_seed(seed)
    features = torch.randn(n, 4 * c, height, width, generator=gen)
    corner = (torch.rand(n, k, 2, generator=gen) * torch.tensor([width, height]) * 1.3 - 1.5) * spread
    size = torch.rand(n, k, 2, generator=gen) * torch.tensor([width, height]) * 0.8
    boxes = torch.cat((corner, corner + size), 2)
    return features, boxes


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    features, boxes = _case(0, 1, 1, 4, 4, 2)
    with pytest.raises(RuntimeError, match="implementation for device cpu not found"):
        compiled_ext.border_align_forward(
            features, boxes, torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4, dtype=torch.int32), pool_size=3
        )


@pytest.mark.parametrize(
    ("n", "c", "height", "width", "k", "pool_size"),
    [(2, 3, 7, 9, 5, 4), (1, 2, 5, 5, 8, 1), (2, 1, 12, 6, 6, 10), (1, 4, 1, 3, 3, 2), (1, 2, 4, 4, 0, 3)],
)
def test_forward_and_backward_match_the_kernels(mmfix_ext, n, c, height, width, k, pool_size):
    features, boxes = _case(n + c + height + k, n, c, height, width, k)
    expected, expected_arg = ref_forward(features, boxes, pool_size)
    out = torch.full((n, c, k, 4), 5.0)
    arg = torch.full((n, c, k, 4), -3, dtype=torch.int32)
    mmfix_ext.border_align_forward(features, boxes, out, arg, pool_size=pool_size)
    torch.testing.assert_close(out, expected.float(), rtol=1e-5, atol=1e-5)
    assert torch.equal(arg, expected_arg)
    grad_output = torch.randn(n, c, k, 4)
    grad_input = torch.randn(features.shape)
    initial = grad_input.clone()
    mmfix_ext.border_align_backward(grad_output, boxes, arg, grad_input, pool_size=pool_size)
    expected_grad = ref_backward(grad_output, boxes, expected_arg, features.shape, pool_size)
    torch.testing.assert_close(grad_input, (initial.double() + expected_grad).float(), rtol=1e-5, atol=1e-5)


def test_half(mmfix_ext):
    features, boxes = _case(5, 2, 4, 8, 8, 6)
    out32, arg32 = torch.zeros(2, 4, 6, 4), torch.zeros(2, 4, 6, 4, dtype=torch.int32)
    out16, arg16 = torch.zeros(2, 4, 6, 4, dtype=torch.half), torch.zeros(2, 4, 6, 4, dtype=torch.int32)
    mmfix_ext.border_align_forward(features.half().float(), boxes.half().float(), out32, arg32, pool_size=5)
    mmfix_ext.border_align_forward(features.half(), boxes.half(), out16, arg16, pool_size=5)
    torch.testing.assert_close(out16.float(), out32, rtol=1e-3, atol=1e-3)


def test_through_mmcv_border_align(mmfix_ext):
    """mmcv.ops.BorderAlign as BorderDet calls it, forward and backward."""
    ops = import_mmcv_ops(mmfix_ext)
    features, boxes = _case(6, 2, 3, 6, 8, 7)
    features.requires_grad_(True)
    with swap_ext(mmfix_ext):
        out = ops.BorderAlign(pool_size=4)(features, boxes)
        grad_output = torch.randn_like(out)
        out.backward(grad_output)
    expected, arg = ref_forward(features.detach(), boxes, 4)
    torch.testing.assert_close(out.detach(), expected.float(), rtol=1e-5, atol=1e-5)
    expected_grad = ref_backward(grad_output, boxes, arg, features.shape, 4)
    torch.testing.assert_close(features.grad, expected_grad.float(), rtol=1e-5, atol=1e-5)


def test_bad_input_is_named(mmfix_ext):
    features, boxes = _case(0, 1, 1, 4, 4, 2)
    out, arg = torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4, dtype=torch.int32)
    with pytest.raises(OpArgumentError, match=r"four channel groups"):
        mmfix_ext.border_align_forward(features[:, :3], boxes, out, arg, pool_size=3)
    with pytest.raises(OpArgumentError, match=r"`argmax_idx` must be int32"):
        mmfix_ext.border_align_forward(features, boxes, out, arg.long(), pool_size=3)
    with pytest.raises(OpArgumentError, match=r"`boxes` must be \(N=1, K, 4\)"):
        mmfix_ext.border_align_forward(features, boxes[0], out, arg, pool_size=3)
    with pytest.raises(OpArgumentError, match=r"`pool_size` must be at least 1"):
        mmfix_ext.border_align_forward(features, boxes, out, arg, pool_size=0)
