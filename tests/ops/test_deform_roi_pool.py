"""deform_roi_pool_forward / _backward (DeformRoIPool, DeformRoIPoolPack, ModulatedDeformRoIPoolPack).

Compiled mmcv has no CPU kernel for this op (it raises "implementation for device cpu not
found"), so the ground truth is an independent reference written here from the CUDA kernel
(``deform_roi_pool_cuda_kernel.cuh``), one RoI, bin and sample at a time in float32 scalar
arithmetic; and gradcheck in float64 through mmcv's own autograd Function.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops_support import import_mmcv_ops, swap_ext

f32 = np.float32


def _bilinear(height, width, y, x):
    """bilinear_interpolate(_gradient) of common_cuda_helper.hpp: (weights, corners) or None when empty."""
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return None
    y = max(y, f32(0))
    x = max(x, f32(0))
    y_low, x_low = int(y), int(x)
    if y_low >= height - 1:
        y_high = y_low = height - 1
        y = f32(y_low)
    else:
        y_high = y_low + 1
    if x_low >= width - 1:
        x_high = x_low = width - 1
        x = f32(x_low)
    else:
        x_high = x_low + 1
    ly, lx = f32(y - y_low), f32(x - x_low)
    hy, hx = f32(1.0 - ly), f32(1.0 - lx)
    return (hy * hx, hy * lx, ly * hx, ly * lx), (y_low, x_low, y_high, x_high)


def _bins(roi, offset, ph, pw, scale, ratio, gamma):
    """For each bin (i, j): its samples (y, x), its count, the RoI size (the kernel's float32 arithmetic)."""
    r = roi.astype(np.float32)
    scale = f32(scale)
    start_w, start_h = f32(r[1] * scale - 0.5), f32(r[2] * scale - 0.5)
    end_w, end_h = f32(r[3] * scale - 0.5), f32(r[4] * scale - 0.5)
    roi_w, roi_h = f32(end_w - start_w), f32(end_h - start_h)
    bin_h, bin_w = f32(roi_h / f32(ph)), f32(roi_w / f32(pw))
    grid_h = ratio if ratio > 0 else int(np.ceil(f32(roi_h / f32(ph))))
    grid_w = ratio if ratio > 0 else int(np.ceil(f32(roi_w / f32(pw))))
    for i in range(ph):
        for j in range(pw):
            sh, sw = start_h, start_w
            if offset is not None:
                sw = f32(sw + f32(f32(f32(gamma) * roi_w) * f32(offset[0, i, j])))
                sh = f32(sh + f32(f32(f32(gamma) * roi_h) * f32(offset[1, i, j])))
            samples = []
            for iy in range(grid_h):
                y = f32(f32(sh + f32(i * bin_h)) + f32(f32(f32(iy + 0.5) * bin_h) / f32(grid_h)))
                for ix in range(grid_w):
                    x = f32(f32(sw + f32(j * bin_w)) + f32(f32(f32(ix + 0.5) * bin_w) / f32(grid_w)))
                    samples.append((y, x))
            yield i, j, samples, grid_h * grid_w, roi_w, roi_h


def reference_forward(x, rois, offset, ph, pw, scale, ratio, gamma):
    x = x.numpy()
    out = np.zeros((len(rois), x.shape[1], ph, pw), np.float32)
    for n, roi in enumerate(rois.numpy()):
        image = x[int(roi[0])]
        off = None if offset is None else offset[n].numpy()
        for i, j, samples, count, _, _ in _bins(roi, off, ph, pw, scale, ratio, gamma):
            acc = np.zeros(x.shape[1], np.float32)
            for y, xx in samples:
                found = _bilinear(x.shape[2], x.shape[3], y, xx)
                if found:
                    (w1, w2, w3, w4), (yl, xl, yh, xh) = found
                    acc += w1 * image[:, yl, xl] + w2 * image[:, yl, xh] + w3 * image[:, yh, xl] + w4 * image[:, yh, xh]
            out[n, :, i, j] = acc / f32(max(count, 1))
    return torch.from_numpy(out)


def reference_backward(grad_out, x, rois, offset, ph, pw, scale, ratio, gamma):
    x_np = x.numpy()
    grad_in = np.zeros_like(x_np)
    grad_off = None if offset is None else np.zeros(offset.shape, np.float32)
    for n, roi in enumerate(rois.numpy()):
        b = int(roi[0])
        image = x_np[b]
        off = None if offset is None else offset[n].numpy()
        for i, j, samples, count, roi_w, roi_h in _bins(roi, off, ph, pw, scale, ratio, gamma):
            g = grad_out[n, :, i, j].numpy() / f32(count) if count else None
            for y, xx in samples:
                found = _bilinear(x.shape[2], x.shape[3], y, xx)
                if not found:
                    continue
                (w1, w2, w3, w4), (yl, xl, yh, xh) = found
                for w, (cy, cx) in zip((w1, w2, w3, w4), ((yl, xl), (yl, xh), (yh, xl), (yh, xh))):
                    grad_in[b, :, cy, cx] += g * w
                if grad_off is not None:
                    v00, v10, v01, v11 = image[:, yl, xl], image[:, yl, xh], image[:, yh, xl], image[:, yh, xh]
                    # with the sample's unclamped y, x, as the kernel
                    ogx = f32(gamma) * roi_w * g * (v11 * (y - yl) + v10 * (yh - y) + v01 * (yl - y) + v00 * (y - yh))
                    ogy = (
                        f32(gamma) * roi_h * g * (v11 * (xx - xl) + v01 * (xh - xx) + v10 * (xl - xx) + v00 * (xx - xh))
                    )
                    grad_off[n, 0, i, j] += ogx.sum()
                    grad_off[n, 1, i, j] += ogy.sum()
    return torch.from_numpy(grad_in), None if grad_off is None else torch.from_numpy(grad_off)


def _inputs(seed=0, batch=2, channels=3, size=(10, 12), num_rois=7, pooled=(3, 2), with_offset=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, channels, *size, generator=g)
    # RoIs in image coordinates (spatial_scale 0.5): inside, across the border, outside, degenerate, reversed.
    xy = torch.rand(num_rois, 2, generator=g) * torch.tensor([size[1] * 2.0, size[0] * 2.0]) - 4
    wh = torch.rand(num_rois, 2, generator=g) * 14
    boxes = torch.cat([xy, xy + wh], 1)
    boxes[0] = torch.tensor([3.0, 2.0, 3.0, 2.0])  # a point
    boxes[1] = torch.tensor([10.0, 8.0, 4.0, 3.0])  # x2 < x1
    boxes[2] = torch.tensor([-30.0, -30.0, -20.0, -25.0])  # entirely outside
    index = torch.randint(0, batch, (num_rois, 1), generator=g).float()
    rois = torch.cat([index, boxes], 1)
    offset = torch.randn(num_rois, 2, *pooled, generator=g) * 0.3 if with_offset else None
    return x, rois, offset


CASES = {
    "adaptive-grid-with-offset": {"ratio": 0, "with_offset": True},
    "adaptive-grid-no-offset": {"ratio": 0, "with_offset": False},
    "ratio-2-with-offset": {"ratio": 2, "with_offset": True},
    "ratio-1-square-bins": {"ratio": 1, "with_offset": True, "pooled": (4, 4)},
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_forward_and_backward_equal_the_kernel_definition(mmfix_ext, case):
    ratio = case["ratio"]
    pooled = case.get("pooled", (3, 2))
    x, rois, offset = _inputs(with_offset=case["with_offset"], pooled=pooled)
    scale, gamma = 0.5, 0.1
    empty = torch.empty(0)
    off_arg = empty if offset is None else offset
    output = torch.full((len(rois), x.shape[1], *pooled), 3.0)  # overwritten
    mmfix_ext.deform_roi_pool_forward(x, rois, off_arg, output, pooled_height=pooled[0], pooled_width=pooled[1],
                                      spatial_scale=scale, sampling_ratio=ratio, gamma=gamma)  # fmt: skip
    expected = reference_forward(x, rois, offset, *pooled, scale, ratio, gamma)
    torch.testing.assert_close(output, expected, rtol=1e-5, atol=1e-5)
    assert output[2].abs().max() == 0  # the RoI outside the image

    grad_out = torch.randn(output.shape, generator=torch.Generator().manual_seed(9))
    grad_in = torch.randn_like(x)  # added into
    grad_off = empty if offset is None else torch.randn_like(offset)
    start_in, start_off = grad_in.clone(), grad_off.clone()
    mmfix_ext.deform_roi_pool_backward(grad_out, x, rois, off_arg, grad_in, grad_off, pooled_height=pooled[0],
                                       pooled_width=pooled[1], spatial_scale=scale, sampling_ratio=ratio, gamma=gamma)  # fmt: skip
    expected_in, expected_off = reference_backward(grad_out, x, rois, offset, *pooled, scale, ratio, gamma)
    torch.testing.assert_close(grad_in - start_in, expected_in, rtol=1e-5, atol=1e-5)
    if offset is None:
        assert grad_off.numel() == 0
    else:
        torch.testing.assert_close(grad_off - start_off, expected_off, rtol=1e-4, atol=1e-4)


def test_chunks_of_rois_give_the_same_result(mmfix_ext, monkeypatch):
    from mmfix._ops import deform_roi_pool

    x, rois, offset = _inputs(seed=3, num_rois=9)
    kw = dict(pooled_height=3, pooled_width=2, spatial_scale=0.5, sampling_ratio=0, gamma=0.1)
    whole = torch.empty(9, 3, 3, 2)
    mmfix_ext.deform_roi_pool_forward(x, rois, offset, whole, **kw)
    grads_whole = torch.zeros_like(x), torch.zeros_like(offset)
    mmfix_ext.deform_roi_pool_backward(whole, x, rois, offset, *grads_whole, **kw)
    monkeypatch.setattr(deform_roi_pool, "SAMPLE_BUDGET", 1)  # one RoI per chunk
    chunked = torch.empty(9, 3, 3, 2)
    mmfix_ext.deform_roi_pool_forward(x, rois, offset, chunked, **kw)
    grads_chunked = torch.zeros_like(x), torch.zeros_like(offset)
    mmfix_ext.deform_roi_pool_backward(whole, x, rois, offset, *grads_chunked, **kw)
    torch.testing.assert_close(chunked, whole)
    for a, b in zip(grads_chunked, grads_whole):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_no_rois(mmfix_ext):
    x = torch.randn(1, 2, 4, 4)
    out = torch.empty(0, 2, 3, 3)
    mmfix_ext.deform_roi_pool_forward(x, torch.empty(0, 5), torch.empty(0), out, pooled_height=3, pooled_width=3,
                                      spatial_scale=1.0, sampling_ratio=0, gamma=0.1)  # fmt: skip
    grad = torch.zeros_like(x)
    mmfix_ext.deform_roi_pool_backward(out, x, torch.empty(0, 5), torch.empty(0), grad, torch.empty(0), pooled_height=3,
                                       pooled_width=3, spatial_scale=1.0, sampling_ratio=0, gamma=0.1)  # fmt: skip
    assert grad.abs().max() == 0


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    # Why the reference above is the ground truth here.
    with pytest.raises(RuntimeError, match="cpu"):
        compiled_ext.deform_roi_pool_forward(torch.randn(1, 1, 4, 4), torch.tensor([[0.0, 0, 0, 2, 2]]), torch.empty(0),
                                             torch.empty(1, 1, 2, 2), pooled_height=2, pooled_width=2, spatial_scale=1.0,
                                             sampling_ratio=0, gamma=0.1)  # fmt: skip


# --- mmcv's own Python API -------------------------------------------------------------------------


def test_deform_roi_pool_layers_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    x, rois, offset = _inputs(seed=4, channels=4, pooled=(3, 3))
    rois[:, 1:] = rois[:, 1:].clamp(0, 20)
    torch.manual_seed(0)
    plain = ops.DeformRoIPool((3, 3), spatial_scale=0.5, sampling_ratio=2, gamma=0.1)
    pack = ops.DeformRoIPoolPack((3, 3), 4, deform_fc_channels=16, spatial_scale=0.5, sampling_ratio=2)
    modulated = ops.ModulatedDeformRoIPoolPack((3, 3), 4, deform_fc_channels=16, spatial_scale=0.5, sampling_ratio=2)
    for layer in (pack, modulated):  # non-zero offsets and masks (the last layers start at zero)
        for p in layer.parameters():
            torch.nn.init.normal_(p, std=0.1)
    xg = x.clone().requires_grad_()
    with swap_ext(mmfix_ext):
        out_plain = plain(xg, rois, offset)
        out_pack = pack(xg, rois)
        out_mod = modulated(xg, rois)
        (out_plain.sum() + out_pack.sum() + out_mod.sum()).backward()
    torch.testing.assert_close(out_plain, reference_forward(x, rois, offset, 3, 3, 0.5, 2, 0.1), rtol=1e-5, atol=1e-5)
    # The Packs: their offset (and mask) come from fully connected layers on a first, offset-free pooling.
    first = reference_forward(x, rois, None, 3, 3, 0.5, 2, 0.1)
    with torch.no_grad():
        pack_offset = pack.offset_fc(first.view(len(rois), -1)).view(-1, 2, 3, 3)
        torch.testing.assert_close(
            out_pack, reference_forward(x, rois, pack_offset, 3, 3, 0.5, 2, 0.1), rtol=1e-5, atol=1e-5
        )
        mod_offset = modulated.offset_fc(first.view(len(rois), -1)).view(-1, 2, 3, 3)
        mask = modulated.mask_fc(first.view(len(rois), -1)).view(-1, 1, 3, 3)
        expected_mod = reference_forward(x, rois, mod_offset, 3, 3, 0.5, 2, 0.1) * mask
        torch.testing.assert_close(out_mod, expected_mod, rtol=1e-5, atol=1e-5)
    assert xg.grad is not None and xg.grad.abs().sum() > 0
    assert all(p.grad is not None for p in pack.offset_fc.parameters())
    assert all(p.grad is not None for p in modulated.mask_fc.parameters())


@pytest.mark.slow
def test_gradients_are_the_derivatives_float64(mmfix_ext):
    # RoIs well inside the image (the kernel's offset gradient uses unclamped coordinates at the border).
    ops = import_mmcv_ops(mmfix_ext)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 1, 8, 8, generator=g, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[0, 4.1, 4.3, 12.2, 13.7], [1, 6.3, 2.2, 11.9, 9.1]], dtype=torch.float64)
    offset = (torch.randn(2, 2, 2, 2, generator=g, dtype=torch.float64) * 0.2).requires_grad_()

    def f(x, offset):
        return ops.deform_roi_pool(x, rois, offset, (2, 2), 0.5, 2, 0.1)

    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(f, (x, offset), eps=1e-6, atol=1e-6)


def test_half_inputs_give_the_float32_result(mmfix_ext):
    x, rois, offset = _inputs(seed=8)
    kw = dict(pooled_height=3, pooled_width=2, spatial_scale=0.5, sampling_ratio=0, gamma=0.1)
    expected = torch.empty(7, 3, 3, 2)
    mmfix_ext.deform_roi_pool_forward(x, rois, offset, expected, **kw)
    half = torch.empty(7, 3, 3, 2, dtype=torch.half)
    mmfix_ext.deform_roi_pool_forward(x.half(), rois.half(), offset.half(), half, **kw)
    torch.testing.assert_close(half.float(), expected, rtol=1e-2, atol=1e-2)


def test_bad_rois_are_named(mmfix_ext):
    x = torch.randn(1, 2, 4, 4)
    out = torch.empty(1, 2, 2, 2)
    kw = dict(pooled_height=2, pooled_width=2, spatial_scale=1.0, sampling_ratio=0, gamma=0.1)
    with pytest.raises(ValueError, match="batch index"):
        mmfix_ext.deform_roi_pool_forward(x, torch.tensor([[1.0, 0, 0, 2, 2]]), torch.empty(0), out, **kw)
    with pytest.raises(ValueError, match=r"\(num_rois, 5\)"):
        mmfix_ext.deform_roi_pool_forward(x, torch.tensor([[0, 0, 2, 2.0]]), torch.empty(0), out, **kw)
    # The kernel reads 1 x 2 x 2 x 2 elements from the offset's start: fewer would read past it.
    with pytest.raises(ValueError, match=r"`offset` has shape \(1, 2, 1, 3\).*reads 8 elements"):
        mmfix_ext.deform_roi_pool_forward(x, torch.tensor([[0.0, 0, 0, 2, 2]]), torch.zeros(1, 2, 1, 3), out, **kw)


@pytest.mark.parametrize("layout", ["larger", "flat", "sliced"])
def test_an_offset_of_another_shape_is_read_as_the_kernel_reads_it(mmfix_ext, layout):
    # The CUDA kernel indexes offset.data_ptr() (and grad_offset's) as (num_rois, 2, ph, pw) whatever
    # the tensor's shape: a larger or differently shaped offset is read from its start, row-major.
    x, rois, offset = _inputs(seed=11)
    n, needed = rois.shape[0], offset.numel()
    g = torch.Generator().manual_seed(12)
    given = {
        "larger": torch.randn(n + 1, 2, 4, 2, generator=g) * 0.3,
        "flat": torch.randn(needed, generator=g) * 0.3,
        "sliced": (torch.randn(n * 3, 2 * 3 * 2, generator=g) * 0.3)[:, 1:],
    }[layout]
    read = torch.as_strided(given, offset.shape, offset.stride(), given.storage_offset())  # row-major from the start
    scale, gamma, kw = 0.5, 0.1, dict(pooled_height=3, pooled_width=2, spatial_scale=0.5, sampling_ratio=0, gamma=0.1)
    output = torch.empty(n, 3, 3, 2)
    mmfix_ext.deform_roi_pool_forward(x, rois, given, output, **kw)
    torch.testing.assert_close(
        output, reference_forward(x, rois, read.clone(), 3, 2, scale, 0, gamma), rtol=1e-5, atol=1e-5
    )
    grad_out = torch.randn(output.shape, generator=g)
    grad_in, grad_off = torch.zeros_like(x), torch.full_like(given, 5.0)
    mmfix_ext.deform_roi_pool_backward(grad_out, x, rois, given, grad_in, grad_off, **kw)
    expected_in, expected_off = reference_backward(grad_out, x, rois, read.clone(), 3, 2, scale, 0, gamma)
    torch.testing.assert_close(grad_in, expected_in, rtol=1e-5, atol=1e-5)
    written = torch.as_strided(grad_off, offset.shape, offset.stride(), grad_off.storage_offset())
    torch.testing.assert_close(written - 5.0, expected_off, rtol=1e-4, atol=1e-4)  # added into, as atomicAdd
    untouched = torch.ones(grad_off.untyped_storage().nbytes() // 4, dtype=torch.bool)
    untouched[grad_off.storage_offset() : grad_off.storage_offset() + needed] = False
    assert bool(torch.as_strided(grad_off, (untouched.numel(),), (1,), 0)[untouched].eq(5.0).all())


def test_the_stand_in_serves_these_functions(mmfix_ext):
    for name in ['deform_roi_pool_forward', 'deform_roi_pool_backward']:
        assert mmfix_ext.__mmfix_families__[name] == "deform_roi_pool"
        assert not hasattr(getattr(mmfix_ext, name), "__mmfix_unavailable__")
