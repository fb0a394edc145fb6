"""MaskedConv2d's two kernels: ``masked_im2col_forward`` and ``masked_col2im_forward``.

As mmcv's CUDA kernels (``masked_conv2d_cuda_kernel.cuh``; compiled mmcv has no CPU kernel):
``masked_im2col_forward`` fills ``col`` (channels * kh * kw, masked positions) with the
``kh x kw`` patches of the first image around each masked output position (stride 1;
zeros outside the image); ``masked_col2im_forward`` writes column m of ``col`` (one value
per channel) to position (h, w) of ``im``, read as a (channels, height, width) block.
MaskedConv2dFunction does the GEMM between the two, and has no backward.

The gather runs one kernel tap at a time, so temporaries stay one channel x position
plane (the column matrix itself is the caller's).
"""

from __future__ import annotations

import torch

from . import _deform_checks as check


def _indices(op: str, mask_h_idx: torch.Tensor, mask_w_idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if mask_h_idx.dim() != 1 or mask_h_idx.shape != mask_w_idx.shape:
        raise check.fail(
            op,
            f"mask_h_idx has shape {tuple(mask_h_idx.shape)}, mask_w_idx {tuple(mask_w_idx.shape)}",
            "Pass two 1-D tensors of the same length (the rows and columns of the masked positions)",
        )
    for name, index in (("mask_h_idx", mask_h_idx), ("mask_w_idx", mask_w_idx)):
        if index.dtype.is_floating_point or index.dtype == torch.bool:
            raise check.fail(op, f"`{name}` is {index.dtype}", "Pass integer indices (torch.nonzero gives int64)")
    return mask_h_idx.long(), mask_w_idx.long()


def masked_im2col_forward(
    im: torch.Tensor,
    mask_h_idx: torch.Tensor,
    mask_w_idx: torch.Tensor,
    col: torch.Tensor,
    kernel_h: int,
    kernel_w: int,
    pad_h: int,
    pad_w: int,
) -> None:
    op = "masked_im2col_forward"
    check.dims(op, "im", im, 4, "(batch, channels, height, width); the first image is read")
    check.positive(op, kernel_h=kernel_h, kernel_w=kernel_w)
    rows, cols = _indices(op, mask_h_idx, mask_w_idx)
    check.same_kind(op, im=im, col=col)
    channels, height, width = im.shape[1:]
    if im.shape[0] == 0:
        raise check.fail(op, "`im` has no image", "Pass a batch of one image")
    count = rows.shape[0]
    target = check.view(op, "col", col, (channels, kernel_h * kernel_w, count))
    image = im[0]
    for i in range(kernel_h):
        h = rows - pad_h + i
        h_inside = (h >= 0) & (h < height)
        h = h.clamp(0, max(height - 1, 0))
        for j in range(kernel_w):
            w = cols - pad_w + j
            inside = h_inside & (w >= 0) & (w < width)
            w = w.clamp(0, max(width - 1, 0))
            values = image[:, h, w]
            target[:, i * kernel_w + j] = torch.where(
                inside, values, torch.zeros((), dtype=values.dtype, device=values.device)
            )


def masked_col2im_forward(
    col: torch.Tensor,
    mask_h_idx: torch.Tensor,
    mask_w_idx: torch.Tensor,
    im: torch.Tensor,
    height: int,
    width: int,
    channels: int,
) -> None:
    op = "masked_col2im_forward"
    rows, cols = _indices(op, mask_h_idx, mask_w_idx)
    check.same_kind(op, col=col, im=im)
    check.positive(op, height=height, width=width, channels=channels)
    count = rows.shape[0]
    if col.dim() != 2 or col.shape[0] < channels or col.shape[1] != count:
        raise check.fail(
            op,
            f"`col` has shape {tuple(col.shape)} for {channels} channels and {count} positions",
            "Pass (channels, number of masked positions)",
        )
    if im.numel() < channels * height * width:
        raise check.fail(
            op,
            f"`im` has {im.numel()} elements, fewer than channels x height x width = {channels * height * width}",
            "Pass the output tensor the masked positions are written into",
        )
    if count and bool(((rows < 0) | (rows >= height) | (cols < 0) | (cols >= width)).any()):
        raise check.fail(
            op, f"a masked position lies outside the {height} x {width} output", "Pass positions inside it"
        )
    plane = check.view(op, "im", im, (-1,))[: channels * height * width].view(channels, height * width)
    plane.index_copy_(1, rows * width + cols, col[:channels])
