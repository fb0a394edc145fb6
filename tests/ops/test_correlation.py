"""correlation (MMFlow's cost volume): mmfix against the CUDA kernels' definition.

Compiled mmcv has no CPU kernel (checked below); the reference is the three kernels of
``correlation_cuda.cuh`` written out as loops over a small input, in float64.
"""

from __future__ import annotations

import pytest
import torch

from mmfix._ops._rotated_checks import OpArgumentError
from ops_support import import_mmcv_ops, swap_ext


def _inside(y: int, x: int, h: int, w: int) -> bool:
    return 0 <= y < h and 0 <= x < w


def ref_forward(in1, in2, p):
    n_size, _, i_h, i_w = in1.shape
    o_h = (i_h + 2 * p["padH"] - ((p["kH"] - 1) * p["dilationH"] + 1)) // p["dH"] + 1
    o_w = (i_w + 2 * p["padW"] - ((p["kW"] - 1) * p["dilationW"] + 1)) // p["dW"] + 1
    out = torch.zeros(n_size, p["patchH"], p["patchW"], o_h, o_w, dtype=torch.float64)
    rad_h = p["dilation_patchH"] * (p["patchH"] - 1) // 2
    rad_w = p["dilation_patchW"] * (p["patchW"] - 1) // 2
    for n in range(n_size):
        for h in range(o_h):
            for w in range(o_w):
                start_i, start_j = -p["padH"] + h * p["dH"], -p["padW"] + w * p["dW"]
                for ph in range(p["patchH"]):
                    for pw in range(p["patchW"]):
                        total = 0.0
                        for i in range(p["kH"]):
                            i1 = start_i + i * p["dilationH"]
                            i2 = i1 + ph * p["dilation_patchH"] - rad_h
                            if not (0 <= i1 < i_h and 0 <= i2 < i_h):
                                continue
                            for j in range(p["kW"]):
                                j1 = start_j + j * p["dilationW"]
                                j2 = j1 + pw * p["dilation_patchW"] - rad_w
                                if 0 <= j1 < i_w and 0 <= j2 < i_w:
                                    total += float((in1[n, :, i1, j1].double() * in2[n, :, i2, j2].double()).sum())
                        out[n, ph, pw, h, w] = total
    return out


def _cache(grad_output, n, ph, pw, y, x, p):
    """The kernels' grad_cache entry: grad_output summed over the outputs whose taps read (y, x)."""
    o_h, o_w = grad_output.shape[3:]
    total = 0.0
    h_2, w_2 = y + p["padH"], x + p["padW"]
    for h_3 in range(h_2, h_2 - p["kH"] * p["dilationH"], -p["dilationH"]):
        i2 = int(h_3 / p["dH"])  # C division truncates
        if i2 * p["dH"] != h_3:
            continue
        for w_3 in range(w_2, w_2 - p["kW"] * p["dilationW"], -p["dilationW"]):
            j2 = int(w_3 / p["dW"])
            if j2 * p["dW"] != w_3:
                continue
            if _inside(i2, j2, o_h, o_w):
                total += float(grad_output[n, ph, pw, i2, j2])
    return total


def ref_backward(grad_output, in1, in2, p):
    n_size, _, i_h, i_w = in1.shape
    rad_h, rad_w = (p["patchH"] - 1) // 2, (p["patchW"] - 1) // 2
    g1 = torch.zeros(in1.shape, dtype=torch.float64)
    g2 = torch.zeros(in1.shape, dtype=torch.float64)
    for n in range(n_size):
        for h in range(i_h):
            for w in range(i_w):
                for ph in range(p["patchH"]):
                    for pw in range(p["patchW"]):
                        i1 = h + p["dilation_patchH"] * (ph - rad_h)
                        j1 = w + p["dilation_patchW"] * (pw - rad_w)
                        if _inside(i1, j1, i_h, i_w):
                            g1[n, :, h, w] += in2[n, :, i1, j1].double() * _cache(grad_output, n, ph, pw, h, w, p)
                        i1 = h - p["dilation_patchH"] * (ph - rad_h)
                        j1 = w - p["dilation_patchW"] * (pw - rad_w)
                        if _inside(i1, j1, i_h, i_w):
                            g2[n, :, h, w] += in1[n, :, i1, j1].double() * _cache(grad_output, n, ph, pw, i1, j1, p)
    return g1, g2


def _params(k=1, patch=3, pad=0, dil=1, dil_patch=1, stride=1, kw=None, patch_w=None):
    return dict(
        kH=k,
        kW=k if kw is None else kw,
        patchH=patch,
        patchW=patch if patch_w is None else patch_w,
        padH=pad,
        padW=pad,
        dilationH=dil,
        dilationW=dil,
        dilation_patchH=dil_patch,
        dilation_patchW=dil_patch,
        dH=stride,
        dW=stride,
    )


CASES = [
    ((2, 3, 6, 7), _params()),
    ((1, 4, 5, 5), _params(k=3, patch=5, pad=1)),
    ((2, 2, 8, 6), _params(k=2, patch=3, pad=2, dil=2, dil_patch=2, stride=2)),
    ((1, 5, 7, 9), _params(k=1, patch=9, dil_patch=1)),  # PWC-Net: max displacement 4
    ((1, 3, 6, 5), _params(k=3, patch=3, pad=0, stride=3, kw=1)),
    ((1, 2, 4, 4), _params(patch=4, patch_w=2)),  # even windows: backward radius differs
    ((1, 2, 3, 3), _params(patch=7, dil_patch=2)),  # window beyond the image
]


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    x = torch.rand(1, 2, 3, 3)
    with pytest.raises(RuntimeError, match="implementation for device cpu not found"):
        compiled_ext.correlation_forward(x, x, torch.zeros(1, 3, 3, 3, 3), **_params())


@pytest.mark.parametrize(("shape", "params"), CASES)
def test_forward_and_backward_match_the_kernels(mmfix_ext, shape, params):
    gen = torch.Generator().manual_seed(sum(shape) + params["patchH"])
    in1, in2 = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    expected = ref_forward(in1, in2, params)
    out = torch.full(expected.shape, 7.0)
    mmfix_ext.correlation_forward(in1, in2, out, **params)
    torch.testing.assert_close(out, expected.float(), rtol=1e-5, atol=1e-5)
    grad_output = torch.randn(expected.shape, generator=gen)
    g1, g2 = torch.full(shape, 3.0), torch.full(shape, 3.0)
    mmfix_ext.correlation_backward(grad_output, in1, in2, g1, g2, **params)
    e1, e2 = ref_backward(grad_output, in1, in2, params)
    torch.testing.assert_close(g1, e1.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g2, e2.float(), rtol=1e-5, atol=1e-5)


def test_half(mmfix_ext):
    params = _params(k=3, patch=5, pad=1)
    gen = torch.Generator().manual_seed(1)
    in1, in2 = torch.randn(1, 8, 6, 6, generator=gen), torch.randn(1, 8, 6, 6, generator=gen)
    out32, out16 = torch.zeros(1, 5, 5, 6, 6), torch.zeros(1, 5, 5, 6, 6, dtype=torch.half)
    mmfix_ext.correlation_forward(in1, in2, out32, **params)
    mmfix_ext.correlation_forward(in1.half(), in2.half(), out16, **params)
    torch.testing.assert_close(out16.float(), out32, rtol=1e-2, atol=5e-2)


def test_through_mmcv_correlation(mmfix_ext):
    """mmcv.ops.Correlation (as MMFlow's PWC-Net builds it), forward, backward and gradcheck."""
    ops = import_mmcv_ops(mmfix_ext)
    gen = torch.Generator().manual_seed(2)
    in1 = torch.randn(2, 3, 5, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    in2 = torch.randn(2, 3, 5, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    layer = ops.Correlation(kernel_size=3, max_displacement=2, stride=1, padding=1, dilation=1, dilation_patch=1)
    with swap_ext(mmfix_ext):
        out = layer(in1, in2)
        torch.autograd.gradcheck(lambda a, b: layer(a, b), (in1, in2))
        out.backward(torch.ones_like(out))
    params = _params(k=3, patch=5, pad=1)
    torch.testing.assert_close(out.detach(), ref_forward(in1.detach(), in2.detach(), params))
    e1, e2 = ref_backward(torch.ones_like(out), in1.detach(), in2.detach(), params)
    torch.testing.assert_close(in1.grad, e1)
    torch.testing.assert_close(in2.grad, e2)


def test_bad_input_is_named(mmfix_ext):
    x = torch.rand(1, 2, 3, 3)
    with pytest.raises(OpArgumentError, match=r"`output` must be float32 of shape \(1, 3, 3, 3, 3\)"):
        mmfix_ext.correlation_forward(x, x, torch.zeros(1, 3, 3, 2, 2), **_params())
    with pytest.raises(OpArgumentError, match=r"one shape and dtype"):
        mmfix_ext.correlation_forward(x, x.double(), torch.zeros(1, 3, 3, 3, 3), **_params())
    with pytest.raises(OpArgumentError, match=r"`dH` must be at least 1"):
        mmfix_ext.correlation_forward(x, x, torch.zeros(1, 3, 3, 3, 3), **_params(stride=0))
