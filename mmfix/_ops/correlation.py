"""``correlation_forward`` / ``correlation_backward``: MMFlow's cost volume (FlowNetC, PWC-Net).

For every displacement (ph, pw) of the ``patchH × patchW`` window and output position
(h, w), the CUDA kernel (mmcv has no CPU one) sums over the ``kH × kW`` taps (stride
``dH``/``dW``, ``dilation``, zero ``pad``) and the channels::

    i1 = h·dH - padH + i·dilationH,   i2 = i1 + ph·dilation_patchH - dilation_patchH·(patchH-1)//2
    output[n, ph, pw, h, w] = Σ input1[n, c, i1, j1] · input2[n, c, i2, j2]

taking only terms whose (i1, j1) and (i2, j2) both lie in the image. Here: one channel
reduction per displacement on the full grid (``input1`` times ``input2`` shifted), then the
taps as strided slices.

The backward kernels compute ``grad_input1`` and ``grad_input2`` in full (overwriting),
with their own window radius ``(patch - 1)//2 · dilation_patch`` — the same as the forward
one for the odd windows mmcv makes (``2·max_displacement + 1``). Half inputs are computed in
float32 and rounded once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _rotated_checks as check

_FLOATS = (torch.float16, torch.float32, torch.float64)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _compute(t: Tensor) -> Tensor:
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


def _shifted(x: Tensor, dy: int, dx: int) -> Tensor:
    """``y[..., h, w] = x[..., h + dy, w + dx]``, zero where that is outside ``x``."""
    height, width = x.shape[-2:]
    if abs(dy) >= height or abs(dx) >= width:
        return torch.zeros_like(x)
    return F.pad(x, (-dx, dx, -dy, dy))


def _output_hw(
    i_h: int, i_w: int, k: tuple[int, int], pad: tuple[int, int], dil: tuple[int, int], stride: tuple[int, int]
) -> tuple[int, int]:
    o_h = (i_h + 2 * pad[0] - ((k[0] - 1) * dil[0] + 1)) // stride[0] + 1
    o_w = (i_w + 2 * pad[1] - ((k[1] - 1) * dil[1] + 1)) // stride[1] + 1
    return o_h, o_w


def _check_inputs(op: str, input1: Tensor, input2: Tensor, params: dict[str, int]) -> None:
    for name, t in (("input1", input1), ("input2", input2)):
        if t.dim() != 4:
            check._fail(op, f"`{name}` must be 4-D (N, C, H, W); got shape {tuple(t.shape)}.")
        check.dtype(op, name, t, _FLOATS, "mmcv's CUDA kernel takes half, float and double")
    if input1.shape != input2.shape or input1.dtype != input2.dtype:
        check._fail(
            op,
            f"`input1` and `input2` must have one shape and dtype; got {tuple(input1.shape)} {input1.dtype} "
            f"and {tuple(input2.shape)} {input2.dtype}.",
        )
    for name in (
        "kH",
        "kW",
        "patchH",
        "patchW",
        "dilationH",
        "dilationW",
        "dilation_patchH",
        "dilation_patchW",
        "dH",
        "dW",
    ):
        if int(params[name]) < 1:
            check._fail(op, f"`{name}` must be at least 1; got {params[name]}.")
    for name in ("padH", "padW"):
        if int(params[name]) < 0:
            check._fail(op, f"`{name}` must not be negative; got {params[name]}.")


def correlation_forward(
    input1: Tensor,
    input2: Tensor,
    output: Tensor,
    kH: int,
    kW: int,
    patchH: int,
    patchW: int,
    padH: int,
    padW: int,
    dilationH: int,
    dilationW: int,
    dilation_patchH: int,
    dilation_patchW: int,
    dH: int,
    dW: int,
) -> None:
    op = "correlation_forward"
    params = dict(locals())
    _check_inputs(op, input1, input2, params)
    n, _, i_h, i_w = input1.shape
    o_h, o_w = _output_hw(i_h, i_w, (kH, kW), (padH, padW), (dilationH, dilationW), (dH, dW))
    expected = (n, patchH, patchW, o_h, o_w)
    if tuple(output.shape) != expected or output.dtype != input1.dtype:
        check._fail(
            op,
            f"`output` must be {_name(input1.dtype)} of shape {expected}; got {_name(output.dtype)} {tuple(output.shape)}.",
        )
    check.same_device(op, input1=input1, input2=input2, output=output)
    if output.numel() == 0:
        return
    with torch.no_grad():
        a, b = _compute(input1), _compute(input2)
        radius_h = dilation_patchH * (patchH - 1) // 2
        radius_w = dilation_patchW * (patchW - 1) // 2
        result = a.new_zeros(expected)
        span_h, span_w = (o_h - 1) * dH + 1, (o_w - 1) * dW + 1
        for ph in range(patchH):
            for pw in range(patchW):
                dy, dx = ph * dilation_patchH - radius_h, pw * dilation_patchW - radius_w
                products = (a * _shifted(b, dy, dx)).sum(1)  # (N, iH, iW), zero where (i2, j2) is outside
                products = F.pad(products, (padW, padW, padH, padH))  # zero where (i1, j1) is outside
                total = result[:, ph, pw]
                for i in range(kH):
                    for j in range(kW):
                        y, x = i * dilationH, j * dilationW
                        total += products[:, y : y + span_h : dH, x : x + span_w : dW]
        output.copy_(result)


def _grad_window_sums(grad_output: Tensor, i_h: int, i_w: int, params: dict[str, int]) -> Tensor:
    """For each input position, the grad_output summed over the output positions whose taps read it."""
    n, patch_h, patch_w, o_h, o_w = grad_output.shape
    sums = grad_output.new_zeros(n, patch_h, patch_w, i_h, i_w)
    device = grad_output.device
    for i in range(params["kH"]):
        rows = torch.arange(i_h, device=device) + params["padH"] - i * params["dilationH"]
        row_ok = (torch.remainder(rows, params["dH"]) == 0) & (rows >= 0) & (rows // params["dH"] < o_h)
        row_index = torch.where(row_ok, rows // params["dH"], 0)
        for j in range(params["kW"]):
            cols = torch.arange(i_w, device=device) + params["padW"] - j * params["dilationW"]
            col_ok = (torch.remainder(cols, params["dW"]) == 0) & (cols >= 0) & (cols // params["dW"] < o_w)
            col_index = torch.where(col_ok, cols // params["dW"], 0)
            picked = grad_output.index_select(3, row_index).index_select(4, col_index)
            sums += picked * (row_ok[:, None] & col_ok[None, :])
    return sums


def correlation_backward(
    grad_output: Tensor,
    input1: Tensor,
    input2: Tensor,
    grad_input1: Tensor,
    grad_input2: Tensor,
    kH: int,
    kW: int,
    patchH: int,
    patchW: int,
    padH: int,
    padW: int,
    dilationH: int,
    dilationW: int,
    dilation_patchH: int,
    dilation_patchW: int,
    dH: int,
    dW: int,
) -> None:
    op = "correlation_backward"
    params = dict(locals())
    _check_inputs(op, input1, input2, params)
    n, _, i_h, i_w = input1.shape
    if grad_output.dim() != 5 or tuple(grad_output.shape[:3]) != (n, patchH, patchW):
        check._fail(
            op,
            f"`grad_output` must be (N={n}, patchH={patchH}, patchW={patchW}, H, W); got {tuple(grad_output.shape)}.",
        )
    for name, t in (("grad_input1", grad_input1), ("grad_input2", grad_input2)):
        if t.shape != input1.shape or t.dtype != input1.dtype:
            check._fail(op, f"`{name}` must have the shape and dtype of `input1`; got {tuple(t.shape)} {t.dtype}.")
    check.same_device(
        op, grad_output=grad_output, input1=input1, input2=input2, grad_input1=grad_input1, grad_input2=grad_input2
    )
    if input1.numel() == 0:
        return
    with torch.no_grad():
        a, b = _compute(input1), _compute(input2)
        sums = _grad_window_sums(_compute(grad_output).to(a.dtype), i_h, i_w, params)
        radius_h, radius_w = (patchH - 1) // 2, (patchW - 1) // 2
        grad1, grad2 = torch.zeros_like(a), torch.zeros_like(b)
        for ph in range(patchH):
            for pw in range(patchW):
                dy, dx = dilation_patchH * (ph - radius_h), dilation_patchW * (pw - radius_w)
                weight = sums[:, ph, pw, None]
                grad1 += _shifted(b, dy, dx) * weight
                grad2 += _shifted(a * weight, -dy, -dx)
        grad_input1.copy_(grad1)
        grad_input2.copy_(grad2)
