"""masked_im2col_forward / masked_col2im_forward (MaskedConv2d).

Compiled mmcv has no CPU kernel for them; the ground truth is a reference written here from
the CUDA kernels (masked_conv2d_cuda_kernel.cuh), and, through mmcv's MaskedConv2d, a plain
convolution read at the masked positions.
"""

from __future__ import annotations

import pytest
import torch

from ops_support import import_mmcv_ops, swap_ext


def reference_im2col(im, rows, cols, kh, kw, ph, pw):
    channels, height, width = im.shape[1:]
    col = torch.zeros(channels * kh * kw, len(rows), dtype=im.dtype)
    for m, (h_col, w_col) in enumerate(zip(rows.tolist(), cols.tolist())):
        for c in range(channels):
            for i in range(kh):
                for j in range(kw):
                    h, w = h_col - ph + i, w_col - pw + j
                    if 0 <= h < height and 0 <= w < width:
                        col[(c * kh + i) * kw + j, m] = im[0, c, h, w]
    return col


@pytest.mark.parametrize(
    "kernel,pad", [((3, 3), (1, 1)), ((1, 1), (0, 0)), ((3, 2), (0, 1)), ((5, 3), (2, 2))], ids=str
)
def test_im2col_equals_the_kernel_definition(mmfix_ext, kernel, pad):
    g = torch.Generator().manual_seed(0)
    im = torch.randn(1, 3, 6, 7, generator=g)
    # positions in the output grid, including its borders and corners
    mask = torch.rand(6, 7, generator=g) > 0.5
    mask[0, 0] = mask[-1, -1] = mask[0, -1] = True
    rows, cols = mask.nonzero().unbind(1)
    col = torch.full((3 * kernel[0] * kernel[1], len(rows)), 9.0)  # overwritten
    mmfix_ext.masked_im2col_forward(
        im, rows, cols, col, kernel_h=kernel[0], kernel_w=kernel[1], pad_h=pad[0], pad_w=pad[1]
    )
    assert torch.equal(col, reference_im2col(im, rows, cols, *kernel, *pad))


def test_im2col_reads_only_the_first_image_and_keeps_half(mmfix_ext):
    im = torch.randn(2, 2, 4, 4).half()
    rows, cols = torch.tensor([0, 3, 2]), torch.tensor([1, 3, 0])
    col = torch.empty(2 * 9, 3, dtype=torch.half)
    mmfix_ext.masked_im2col_forward(im, rows, cols, col, kernel_h=3, kernel_w=3, pad_h=1, pad_w=1)
    assert torch.equal(col, reference_im2col(im, rows, cols, 3, 3, 1, 1))


def test_col2im_writes_the_masked_positions_only(mmfix_ext):
    g = torch.Generator().manual_seed(1)
    rows, cols = torch.tensor([0, 2, 4, 1]), torch.tensor([3, 0, 5, 1])
    col = torch.randn(4, 4, generator=g)
    im = torch.full((1, 4, 5, 6), -1.0)
    mmfix_ext.masked_col2im_forward(col, rows, cols, im, height=5, width=6, channels=4)
    expected = torch.full((1, 4, 5, 6), -1.0)
    for m, (h, w) in enumerate(zip(rows.tolist(), cols.tolist())):
        expected[0, :, h, w] = col[:, m]
    assert torch.equal(im, expected)


def test_no_cpu_kernel_in_compiled_mmcv(compiled_ext):
    with pytest.raises(RuntimeError, match="cpu"):
        compiled_ext.masked_im2col_forward(torch.randn(1, 1, 3, 3), torch.tensor([1]), torch.tensor([1]), torch.empty(9, 1),
                                           kernel_h=3, kernel_w=3, pad_h=1, pad_w=1)  # fmt: skip


@pytest.mark.parametrize("kernel,padding", [(3, 1), (1, 0), (5, 2)])
def test_masked_conv2d_is_the_convolution_at_masked_positions(mmfix_ext, kernel, padding):
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(2)
    layer = ops.MaskedConv2d(4, 6, kernel, padding=padding)
    x = torch.randn(1, 4, 9, 11)
    mask = (torch.rand(1, 9, 11) > 0.6).float()
    with swap_ext(mmfix_ext), torch.no_grad():
        out = layer(x, mask)
        empty_mask = layer(x, torch.zeros(1, 9, 11))
    expected = torch.nn.functional.conv2d(x, layer.weight, layer.bias, padding=padding) * (mask[:, None] > 0)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert empty_mask.abs().max() == 0


def test_bad_positions_are_named(mmfix_ext):
    col = torch.randn(2, 2)
    im = torch.zeros(1, 2, 3, 3)
    with pytest.raises(ValueError, match="outside the 3 x 3 output"):
        mmfix_ext.masked_col2im_forward(
            col, torch.tensor([0, 3]), torch.tensor([0, 0]), im, height=3, width=3, channels=2
        )
    with pytest.raises(ValueError, match="integer indices"):
        mmfix_ext.masked_col2im_forward(
            col, torch.tensor([0.0, 1]), torch.tensor([0.0, 0]), im, height=3, width=3, channels=2
        )
    with pytest.raises(ValueError, match="`col` has shape"):
        mmfix_ext.masked_im2col_forward(im, torch.tensor([0, 1]), torch.tensor([0, 1]), torch.empty(5, 2), kernel_h=3,
                                        kernel_w=3, pad_h=1, pad_w=1)  # fmt: skip


def test_the_stand_in_serves_these_functions(mmfix_ext):
    for name in ['masked_im2col_forward', 'masked_col2im_forward']:
        assert mmfix_ext.__mmfix_families__[name] == "masked_conv"
        assert not hasattr(getattr(mmfix_ext, name), "__mmfix_unavailable__")
