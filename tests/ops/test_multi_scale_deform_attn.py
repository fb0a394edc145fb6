"""ms_deform_attn_forward / _backward against the CUDA kernel's definition and mmcv's own PyTorch version.

Compiled mmcv has no CPU kernel for it. References: (a) the kernel's loops written out
(``ms_deformable_im2col_gpu_kernel`` and ``ms_deform_attn_col2im_bilinear``), forward and
the backward's closed-form gradients; (b) mmcv's ``multi_scale_deformable_attn_pytorch``
(grid_sample) and its autograd gradients, which the kernel equals except for points exactly
on the skip boundary (y or x = -1), where grid_sample still has a location gradient.
"""

from __future__ import annotations

import math

import pytest
import torch

from ops_support import import_mmcv_ops, swap_ext


def _levels(shapes: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor, int]:
    spatial = torch.tensor(shapes, dtype=torch.long)
    areas = spatial[:, 0] * spatial[:, 1]
    start = torch.cat([areas.new_zeros(1), areas.cumsum(0)[:-1]])
    return spatial, start, int(areas.sum())


def _inputs(batch, shapes, heads, channels, queries, points, dtype=torch.float64, seed=0, spread=(-0.15, 1.15)):
    generator = torch.Generator().manual_seed(seed)
    spatial, start, keys = _levels(shapes)
    levels = len(shapes)
    value = torch.randn(batch, keys, heads, channels, generator=generator, dtype=dtype)
    low, high = spread
    loc = torch.rand(batch, queries, heads, levels, points, 2, generator=generator, dtype=dtype) * (high - low) + low
    weight = torch.rand(batch, queries, heads, levels, points, generator=generator, dtype=dtype)
    return value, spatial, start, loc, weight


# --- the kernel, written out ------------------------------------------------------------------


def _reference(value, spatial, start, loc, weight, grad_output=None):
    """Forward output and, given grad_output, (grad_value, grad_loc, grad_weight) as the kernel computes them."""
    batch, _, heads, channels = value.shape
    _, queries, _, levels, points, _ = loc.shape
    v, L, A = value.tolist(), loc.tolist(), weight.tolist()
    out = [[[[0.0] * channels for _ in range(heads)] for _ in range(queries)] for _ in range(batch)]
    g_value = torch.zeros_like(value)
    g_loc = torch.zeros_like(loc)
    g_weight = torch.zeros_like(weight)
    top = grad_output.view(batch, queries, heads, channels).tolist() if grad_output is not None else None
    for b in range(batch):
        for q in range(queries):
            for m in range(heads):
                for lvl in range(levels):
                    height, width = (int(s) for s in spatial[lvl])
                    first = int(start[lvl])
                    for p in range(points):
                        x, y = L[b][q][m][lvl][p]
                        a = A[b][q][m][lvl][p]
                        h_im, w_im = y * height - 0.5, x * width - 0.5
                        if not (h_im > -1 and w_im > -1 and h_im < height and w_im < width):
                            continue
                        h_low, w_low = math.floor(h_im), math.floor(w_im)
                        lh, lw = h_im - h_low, w_im - w_low
                        hh, hw = 1 - lh, 1 - lw
                        corners = [(h_low, w_low, hh * hw), (h_low, w_low + 1, hh * lw),
                                   (h_low + 1, w_low, lh * hw), (h_low + 1, w_low + 1, lh * lw)]  # fmt: skip
                        for c in range(channels):
                            vals = []
                            for yy, xx, _ in corners:
                                inside = 0 <= yy < height and 0 <= xx < width
                                vals.append(v[b][first + yy * width + xx][m][c] if inside else 0.0)
                            sample = sum(w * val for (_, _, w), val in zip(corners, vals))
                            out[b][q][m][c] += sample * a
                            if top is None:
                                continue
                            t = top[b][q][m][c]
                            for (yy, xx, w), _ in zip(corners, vals):
                                if 0 <= yy < height and 0 <= xx < width:
                                    g_value[b, first + yy * width + xx, m, c] += w * t * a
                            v1, v2, v3, v4 = vals
                            grad_h = -hw * v1 - lw * v2 + hw * v3 + lw * v4
                            grad_w = -hh * v1 + hh * v2 - lh * v3 + lh * v4
                            g_weight[b, q, m, lvl, p] += t * sample
                            g_loc[b, q, m, lvl, p, 0] += width * grad_w * t * a
                            g_loc[b, q, m, lvl, p, 1] += height * grad_h * t * a
    output = torch.tensor(out, dtype=value.dtype).view(batch, queries, heads * channels)
    return output, (g_value, g_loc, g_weight)


def _on_pixel(size: int, dtype: torch.dtype) -> float:
    """A location in [0, 1] whose pixel coordinate loc · size - 0.5 is exactly an integer in ``dtype``."""
    for k in range(size):
        loc = torch.tensor((k + 0.5) / size, dtype=dtype)
        pixel = loc * size - 0.5
        if pixel == torch.round(pixel):
            return float(loc)
    raise AssertionError(f"no exact pixel location for size {size}")


CASES = [
    # (batch, level shapes, heads, channels, queries, points)
    (1, [(4, 5)], 1, 3, 5, 1),
    (2, [(6, 4), (3, 5), (1, 1)], 3, 5, 7, 4),
    (2, [(5, 7), (3, 4)], 2, 2, 6, 3),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("batch", "shapes", "heads", "channels", "queries", "points"), CASES)
def test_matches_the_cuda_kernel(mmfix_ext, dtype, batch, shapes, heads, channels, queries, points):
    value, spatial, start, loc, weight = _inputs(batch, shapes, heads, channels, queries, points, dtype, seed=queries)
    # Points exactly on the skip boundary: x = -1 (first point) and y = -1 (second) in pixel coordinates.
    height, width = shapes[0]
    loc[0, 0, 0, 0, 0] = torch.tensor([-0.5 / width, 0.5])
    loc[0, -1, 0, 0, -1] = torch.tensor([0.5, -0.5 / height])
    # A point exactly on a pixel row and column: the kernel takes the cell below/right (floor).
    loc[-1, 1, -1, 0, 0] = torch.tensor([_on_pixel(width, dtype), _on_pixel(height, dtype)])
    grad_output = torch.randn(batch, queries, heads * channels, dtype=dtype)
    expected, (g_value, g_loc, g_weight) = _reference(value.double(), spatial, start, loc.double(), weight.double(),
                                                      grad_output.double())  # fmt: skip
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)

    output = mmfix_ext.ms_deform_attn_forward(value, spatial, start, loc, weight, im2col_step=64)
    assert output.dtype == dtype
    torch.testing.assert_close(output, expected.to(dtype), **tolerance)

    grads = torch.zeros_like(value), torch.full_like(loc, 7.0), torch.full_like(weight, 7.0)
    mmfix_ext.ms_deform_attn_backward(value, spatial, start, loc, weight, grad_output, *grads, im2col_step=batch)
    for actual, wanted in zip(grads, (g_value, g_loc, g_weight)):
        torch.testing.assert_close(actual, wanted.to(dtype), **tolerance)
    # The skipped points: no gradient at all (grid_sample would give the x = -1 one an x gradient).
    assert torch.all(grads[1][0, 0, 0, 0, 0] == 0) and torch.all(grads[1][0, -1, 0, 0, -1] == 0)


def test_backward_accumulates_as_the_kernels_do(mmfix_ext):
    """grad_value is added to (atomicAdd); the location and weight gradients are overwritten up to
    512 channels per head and added to above (the kernels for wide heads use atomicAdd)."""
    for channels, accumulates in ((4, False), (513, True)):
        value, spatial, start, loc, weight = _inputs(1, [(3, 3)], 1, channels, 2, 2, seed=channels)
        grad_output = torch.randn(1, 2, channels, dtype=value.dtype)
        zero = torch.zeros_like(value), torch.zeros_like(loc), torch.zeros_like(weight)
        mmfix_ext.ms_deform_attn_backward(value, spatial, start, loc, weight, grad_output, *zero, im2col_step=1)
        ones = torch.ones_like(value), torch.ones_like(loc), torch.ones_like(weight)
        mmfix_ext.ms_deform_attn_backward(value, spatial, start, loc, weight, grad_output, *ones, im2col_step=1)
        torch.testing.assert_close(ones[0], zero[0] + 1)
        for from_ones, from_zero in zip(ones[1:], zero[1:]):
            torch.testing.assert_close(from_ones, from_zero + 1 if accumulates else from_zero)


# --- mmcv's own code --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_mmcv_pytorch_version(mmfix_ext, dtype):
    """Deformable DETR's shape (4 levels, 8 heads, 4 points), scaled down: forward and gradients."""
    import_mmcv_ops(mmfix_ext)
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction, multi_scale_deformable_attn_pytorch

    shapes = [(20, 13), (10, 7), (5, 4), (3, 2)]
    value, spatial, start, loc, weight = _inputs(2, shapes, 8, 32, 50, 4, dtype, seed=1)
    leaves = [t.clone().requires_grad_() for t in (value, loc, weight)]
    expected = multi_scale_deformable_attn_pytorch(leaves[0], spatial, leaves[1], leaves[2])
    grad_output = torch.randn_like(expected)
    expected_grads = torch.autograd.grad(expected, leaves, grad_output)

    mine = [t.clone().requires_grad_() for t in (value, loc, weight)]
    with swap_ext(mmfix_ext):
        output = MultiScaleDeformableAttnFunction.apply(mine[0], spatial, start, mine[1], mine[2], 64)
        grads = torch.autograd.grad(output, mine, grad_output)
    tolerance = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else {}
    torch.testing.assert_close(output, expected, **tolerance)
    for actual, wanted in zip(grads, expected_grads):
        torch.testing.assert_close(actual, wanted, **tolerance)


def test_gradcheck_through_mmcv(mmfix_ext):
    import_mmcv_ops(mmfix_ext)
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction

    value, spatial, start, loc, weight = _inputs(2, [(3, 4), (2, 2)], 2, 3, 3, 2, seed=4, spread=(0.05, 0.95))
    leaves = tuple(t.requires_grad_() for t in (value, loc, weight))
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(
            lambda v, s, w: MultiScaleDeformableAttnFunction.apply(v, spatial, start, s, w, 1), leaves
        )


def test_float16_gives_the_float32_result(mmfix_ext):
    """The CUDA kernel takes half (mmcv casts locations and weights to the value's dtype under AMP)."""
    import_mmcv_ops(mmfix_ext)
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction

    value, spatial, start, loc, weight = (t.half() if t.is_floating_point() else t for t in
                                          _inputs(2, [(8, 6), (4, 3)], 4, 16, 20, 4, torch.float32, seed=6))  # fmt: skip
    results = []
    for dtype in (torch.float32, torch.float16):
        leaves = [t.to(dtype).requires_grad_() for t in (value, loc, weight)]
        with swap_ext(mmfix_ext):
            output = MultiScaleDeformableAttnFunction.apply(leaves[0], spatial, start, leaves[1], leaves[2], 64)
            output.backward(torch.ones_like(output))
        assert output.dtype == dtype and all(leaf.grad.dtype == dtype for leaf in leaves)
        results.append([output.float(), *(leaf.grad.float() for leaf in leaves)])
    for half, single in zip(results[1], results[0]):
        torch.testing.assert_close(half, single, rtol=1e-2, atol=2e-2)


# --- edges ---------------------------------------------------------------------------------------


def test_im2col_step_does_not_change_the_result(mmfix_ext):
    value, spatial, start, loc, weight = _inputs(4, [(4, 4), (2, 3)], 2, 4, 5, 2, torch.float32, seed=8)
    outputs = [mmfix_ext.ms_deform_attn_forward(value, spatial, start, loc, weight, im2col_step=s) for s in (1, 2, 64)]
    assert torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[0], outputs[2])
    with pytest.raises(ValueError, match=r"batch \(4\) must be a multiple of im2col_step \(3"):
        mmfix_ext.ms_deform_attn_forward(value, spatial, start, loc, weight, im2col_step=3)


def test_query_chunks_give_the_same_result(mmfix_ext, monkeypatch):
    from mmfix._ops import multi_scale_deform_attn

    value, spatial, start, loc, weight = _inputs(2, [(5, 4), (2, 2)], 2, 3, 9, 2, torch.float32, seed=10)
    grad_output = torch.randn(2, 9, 6)

    def run():
        output = mmfix_ext.ms_deform_attn_forward(value, spatial, start, loc, weight, im2col_step=64)
        grads = torch.zeros_like(value), torch.zeros_like(loc), torch.zeros_like(weight)
        mmfix_ext.ms_deform_attn_backward(value, spatial, start, loc, weight, grad_output, *grads, im2col_step=64)
        return output, *grads

    whole = run()
    monkeypatch.setattr(multi_scale_deform_attn, "_CHUNK_ELEMENTS", 100)  # one query per chunk
    for a, b in zip(run(), whole):
        torch.testing.assert_close(a, b)


def test_empty_batch_and_queries(mmfix_ext):
    for batch, queries in ((0, 5), (2, 0)):
        value, spatial, start, loc, weight = _inputs(batch, [(3, 3)], 2, 4, queries, 2, torch.float32)
        output = mmfix_ext.ms_deform_attn_forward(value, spatial, start, loc, weight, im2col_step=64)
        assert output.shape == (batch, queries, 8)
        grads = torch.zeros_like(value), torch.zeros_like(loc), torch.zeros_like(weight)
        mmfix_ext.ms_deform_attn_backward(value, spatial, start, loc, weight, output, *grads, im2col_step=64)


def test_bad_shapes_are_named(mmfix_ext):
    value, spatial, start, loc, weight = _inputs(2, [(3, 3), (2, 2)], 2, 4, 5, 2, torch.float32)
    with pytest.raises(ValueError, match="`value` must be 4-D"):
        mmfix_ext.ms_deform_attn_forward(value[0], spatial, start, loc, weight, im2col_step=64)
    with pytest.raises(ValueError, match="`sampling_loc` must be"):
        mmfix_ext.ms_deform_attn_forward(value, spatial, start, loc[:, :, :, :1], weight, im2col_step=64)
    with pytest.raises(ValueError, match="`attn_weight` must be"):
        mmfix_ext.ms_deform_attn_forward(value, spatial, start, loc, weight[..., :1], im2col_step=64)
    with pytest.raises(ValueError, match="int64"):
        mmfix_ext.ms_deform_attn_forward(value, spatial.int(), start, loc, weight, im2col_step=64)
    with pytest.raises(ValueError, match="`grad_value` must have shape"):
        mmfix_ext.ms_deform_attn_backward(
            value, spatial, start, loc, weight, torch.zeros(2, 5, 8), value[:1], loc, weight, im2col_step=64
        )
