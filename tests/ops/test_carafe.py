"""CARAFE: carafe_forward / _backward and carafe_naive_forward / _backward.

Compiled mmcv has no CPU kernels for them. Ground truths: a reference written here from
the naive CUDA kernel (carafe_naive_cuda_kernel.cuh), element by element; an independent
definition by ``F.unfold`` whose autograd gives the gradients; gradcheck in float64 through
mmcv's CARAFEFunction; and mmcv's CARAFE, CARAFENaive and CARAFEPack layers.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ops_support import import_mmcv_ops, swap_ext


def loop_reference(features, masks, k, group, scale, top_grad=None):
    """The naive CUDA kernels, one output element at a time: (output, d features, d masks)."""
    n, c, h, w = features.shape
    H, W, r = h * scale, w * scale, (k - 1) // 2
    out = np.zeros((n, c, H, W))
    d_feat = np.zeros(features.shape)
    d_mask = np.zeros(masks.shape)
    f, m = features.double().numpy(), masks.double().numpy()
    t = None if top_grad is None else top_grad.double().numpy()
    for b in range(n):
        for ch in range(c):
            g = ch // (c // group)
            for ph in range(H):
                for pw in range(W):
                    dh, dw = ph // scale, pw // scale
                    for iy in range(dh - r, dh + r + 1):
                        for ix in range(dw - r, dw + r + 1):
                            if iy < 0 or iy > h - 1 or ix < 0 or ix > w - 1:
                                continue
                            mc = (g * k + iy - dh + r) * k + ix - dw + r
                            out[b, ch, ph, pw] += f[b, ch, iy, ix] * m[b, mc, ph, pw]
                            if t is not None:
                                d_feat[b, ch, iy, ix] += m[b, mc, ph, pw] * t[b, ch, ph, pw]
                                d_mask[b, mc, ph, pw] += f[b, ch, iy, ix] * t[b, ch, ph, pw]
    return torch.from_numpy(out), torch.from_numpy(d_feat), torch.from_numpy(d_mask)


def unfold_reference(features, masks, k, group, scale):
    """CARAFE by its definition: each output pixel reassembles the k x k window around its source pixel."""
    n, c, h, w = features.shape
    windows = F.unfold(features, k, padding=(k - 1) // 2).view(n, group, c // group, k * k, h, w)
    windows = windows.repeat_interleave(scale, 4).repeat_interleave(scale, 5)
    weights = masks.view(n, group, 1, k * k, h * scale, w * scale)
    return (windows * weights).sum(3).view(n, c, h * scale, w * scale)


def _inputs(n=1, c=4, h=4, w=5, k=3, group=2, scale=2, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(n, c, h, w, generator=g, dtype=dtype)
    masks = torch.rand(n, group * k * k, h * scale, w * scale, generator=g, dtype=dtype)
    top_grad = torch.randn(n, c, h * scale, w * scale, generator=g, dtype=dtype)
    return features, masks, top_grad


GEOMETRIES = {
    "k3-g2-s2": dict(k=3, group=2, scale=2),
    "k5-g1-s2": dict(k=5, group=1, scale=2, h=4, w=3),
    "k1-g4-s3": dict(k=1, group=4, scale=3),
    "k3-g1-s1": dict(k=3, group=1, scale=1),
}


@pytest.mark.parametrize("geo", GEOMETRIES.values(), ids=GEOMETRIES.keys())
def test_naive_pair_equals_the_kernel_definition(mmfix_ext, geo):
    k, group, scale = geo["k"], geo["group"], geo["scale"]
    features, masks, top_grad = _inputs(**geo)
    expected, expected_feat, expected_mask = loop_reference(features, masks, k, group, scale, top_grad.double())
    output = torch.full(expected.shape, 5.0)  # overwritten
    mmfix_ext.carafe_naive_forward(features, masks, output, kernel_size=k, group_size=group, scale_factor=scale)
    torch.testing.assert_close(output.double(), expected, rtol=1e-5, atol=1e-5)
    bottom_grad, mask_grad = torch.randn_like(features), torch.randn_like(masks)  # added into (atomicAdd)
    start = bottom_grad.clone(), mask_grad.clone()
    mmfix_ext.carafe_naive_backward(top_grad, features, masks, bottom_grad, mask_grad, kernel_size=k, group_size=group,
                                    scale_factor=scale)  # fmt: skip
    torch.testing.assert_close((bottom_grad - start[0]).double(), expected_feat, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close((mask_grad - start[1]).double(), expected_mask, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("geo", GEOMETRIES.values(), ids=GEOMETRIES.keys())
def test_carafe_pair_equals_the_kernel_definition(mmfix_ext, geo):
    k, group, scale = geo["k"], geo["group"], geo["scale"]
    features, masks, top_grad = _inputs(**geo, seed=1)
    expected, expected_feat, expected_mask = loop_reference(features, masks, k, group, scale, top_grad.double())
    n, c, h, w = features.shape
    output = torch.full(expected.shape, 5.0)
    rfeatures, routput, rmasks = torch.zeros_like(features), torch.zeros_like(output), torch.zeros_like(masks)
    mmfix_ext.carafe_forward(features, masks, rfeatures, routput, rmasks, output, kernel_size=k, group_size=group,
                             scale_factor=scale)  # fmt: skip
    torch.testing.assert_close(output.double(), expected, rtol=1e-5, atol=1e-5)
    # The CUDA launcher's NHWC buffers: the features (read by the backward) and masks; routput only resized.
    assert torch.equal(rfeatures, features.permute(0, 2, 3, 1))
    assert torch.equal(rmasks, masks.permute(0, 2, 3, 1))
    assert routput.shape == (n, h * scale, w * scale, c)
    scratch = [
        torch.zeros_like(top_grad),
        torch.zeros_like(top_grad),
        torch.zeros_like(features),
        torch.zeros_like(masks),
    ]
    bottom_grad, mask_grad = torch.randn_like(features), torch.randn_like(masks)  # overwritten (a transpose into them)
    mmfix_ext.carafe_backward(top_grad, rfeatures, masks, *scratch, bottom_grad, mask_grad, kernel_size=k,
                              group_size=group, scale_factor=scale)  # fmt: skip
    torch.testing.assert_close(bottom_grad.double(), expected_feat, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mask_grad.double(), expected_mask, rtol=1e-5, atol=1e-5)
    rtop_grad, rbottom_grad_hs, rbottom_grad, rmask_grad = scratch
    assert torch.equal(rtop_grad, top_grad.permute(0, 2, 3, 1))
    assert torch.equal(rbottom_grad, bottom_grad.permute(0, 2, 3, 1))
    assert torch.equal(rmask_grad, mask_grad.permute(0, 2, 3, 1))
    assert rbottom_grad_hs.shape == (n, h * scale, w * scale, c)


def test_out_of_image_taps_ignore_their_mask_values(mmfix_ext):
    # The kernels skip taps outside the image: a NaN mask value there does not reach the output.
    features, masks, _ = _inputs(seed=6)
    masks[:, 0, 0, :] = float("nan")  # tap (0, 0) of the top output row reads above the image
    output = torch.empty(1, 4, 8, 10)
    mmfix_ext.carafe_naive_forward(features, masks, output, kernel_size=3, group_size=2, scale_factor=2)
    assert not output[:, :2, 0].isnan().any()


def test_row_chunks_give_the_same_result(mmfix_ext, monkeypatch):
    from mmfix._ops import carafe

    features, masks, top_grad = _inputs(seed=2, h=6, w=5)
    kw = dict(kernel_size=3, group_size=2, scale_factor=2)
    whole = torch.empty(1, 4, 12, 10)
    mmfix_ext.carafe_naive_forward(features, masks, whole, **kw)
    grads_whole = torch.zeros_like(features), torch.zeros_like(masks)
    mmfix_ext.carafe_naive_backward(top_grad, features, masks, *grads_whole, **kw)
    monkeypatch.setattr(carafe, "ELEMENT_BUDGET", 1)  # one output row per chunk
    chunked = torch.empty(1, 4, 12, 10)
    mmfix_ext.carafe_naive_forward(features, masks, chunked, **kw)
    grads_chunked = torch.zeros_like(features), torch.zeros_like(masks)
    mmfix_ext.carafe_naive_backward(top_grad, features, masks, *grads_chunked, **kw)
    torch.testing.assert_close(chunked, whole)
    for a, b in zip(grads_chunked, grads_whole):
        torch.testing.assert_close(a, b)


def test_no_cpu_kernels_in_compiled_mmcv(compiled_ext):
    features, masks, _ = _inputs()
    with pytest.raises(RuntimeError, match="cpu"):
        compiled_ext.carafe_naive_forward(features, masks, torch.empty(1, 4, 8, 10), kernel_size=3, group_size=2,
                                          scale_factor=2)  # fmt: skip


# --- mmcv's own Python API ------------------------------------------------------------------------


def test_carafe_and_carafe_naive_layers(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    features, masks, top_grad = _inputs(seed=3, c=6, group=3, k=5)
    f = features.clone().requires_grad_()
    m = masks.clone().requires_grad_()
    with swap_ext(mmfix_ext):
        out = ops.CARAFE(5, 3, 2)(f, m)
        out.backward(top_grad)
        naive = ops.CARAFENaive(5, 3, 2)(features, masks)  # its backward asserts CUDA
    fr = features.clone().requires_grad_()
    mr = masks.clone().requires_grad_()
    expected = unfold_reference(fr, mr, 5, 3, 2)
    expected.backward(top_grad)
    torch.testing.assert_close(out, expected.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(naive, expected.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(f.grad, fr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m.grad, mr.grad, rtol=1e-5, atol=1e-5)


def test_carafe_pack_upsampler(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(4)
    pack = ops.CARAFEPack(8, 2, up_kernel=5, up_group=2, compressed_channels=4)
    x = torch.randn(2, 8, 6, 7)
    xg = x.clone().requires_grad_()
    with swap_ext(mmfix_ext):
        out = pack(xg)
        out.square().sum().backward()
    grads = [xg.grad] + [p.grad.clone() for p in pack.parameters()]
    # The same network with the reassembly written by its definition.
    pack.zero_grad()
    xr = x.clone().requires_grad_()
    mask = pack.kernel_normalizer(pack.content_encoder(pack.channel_compressor(xr)))
    expected = unfold_reference(xr, mask, 5, 2, 2)
    expected.square().sum().backward()
    torch.testing.assert_close(out, expected.detach(), rtol=1e-5, atol=1e-5)
    for a, b in zip(grads, [xr.grad] + [p.grad for p in pack.parameters()]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_gradients_are_the_derivatives_float64(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    features, masks, _ = _inputs(n=1, c=2, h=3, w=3, k=3, group=1, scale=2, dtype=torch.float64)
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(
            lambda f, m: ops.carafe(f, m, 3, 1, 2), (features.requires_grad_(), masks.requires_grad_()), atol=1e-6
        )


def test_half_inputs_give_the_float32_result(mmfix_ext):
    features, masks, _ = _inputs(seed=5)
    expected = torch.empty(1, 4, 8, 10)
    mmfix_ext.carafe_naive_forward(features, masks, expected, kernel_size=3, group_size=2, scale_factor=2)
    half = torch.empty(1, 4, 8, 10, dtype=torch.half)
    mmfix_ext.carafe_naive_forward(features.half(), masks.half(), half, kernel_size=3, group_size=2, scale_factor=2)
    torch.testing.assert_close(half.float(), expected, rtol=1e-2, atol=1e-2)


def test_bad_arguments_are_named(mmfix_ext):
    features, masks, _ = _inputs()
    out = torch.empty(1, 4, 8, 10)
    with pytest.raises(ValueError, match="`masks` has shape"):
        mmfix_ext.carafe_naive_forward(features, masks[:, :9], out, kernel_size=3, group_size=2, scale_factor=2)
    with pytest.raises(ValueError, match="odd size"):
        mmfix_ext.carafe_naive_forward(features, masks, out, kernel_size=2, group_size=2, scale_factor=2)
    with pytest.raises(ValueError, match="group_size must divide"):
        mmfix_ext.carafe_naive_forward(features, masks, out, kernel_size=3, group_size=3, scale_factor=2)


def test_the_stand_in_serves_these_functions(mmfix_ext):
    for name in ['carafe_forward', 'carafe_backward', 'carafe_naive_forward', 'carafe_naive_backward']:
        assert mmfix_ext.__mmfix_families__[name] == "carafe"
        assert not hasattr(getattr(mmfix_ext, name), "__mmfix_unavailable__")
