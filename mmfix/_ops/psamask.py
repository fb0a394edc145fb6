"""mmcv's point-wise spatial attention mask (PSANet): ``psamask_forward`` / ``psamask_backward``.

MMSegmentation's ``PSAHead`` predicts, at every feature position (h, w), an ``h_mask × w_mask``
window of attention centred there (``half_h_mask``, ``half_w_mask`` above and left of it). The
op pastes each window onto the ``H × W`` feature grid, cropped at the borders:

* collect (``psa_type`` 0): ``output[n, y·W + x, h, w] = input[n, (y-h+half_h)·w_mask + (x-w+half_w), h, w]``
* distribute (1): ``output[n, h·W + w, y, x]`` = the same value

for every target (y, x) inside both the grid and the window; other output elements are left
as they were (mmcv passes zeros). The backward functions copy the gradient back along the
same correspondence into ``grad_input`` (again only where a window element lands on the grid).

Viewed as (y, x, h, w) — collect's layout, distribute's permuted — both types are one
operation. Two ways to run it, the same values:

* on CPU, one strided copy per window element (a, b): every (h, w) whose element lands on the
  grid forms a rectangle, and its targets lie on a diagonal of the output with fixed strides.
  No temporaries at all, and memory-bound; ``h_mask · w_mask`` small copies per image;
* elsewhere (CUDA), one gather per chunk of destination rows over broadcast coordinate grids:
  a few kernels instead of thousands of tiny ones, temporaries bounded by the chunk size
  (PSANet's 97×97 masks on 97×97 features make an 88-million-element output per image).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch

#: Elements of one gathered chunk (64 MiB in float32).
_CHUNK_ELEMENTS = 1 << 24
_TYPES = {0: "collect", 1: "distribute"}


class _Geometry(NamedTuple):
    h_feature: int
    w_feature: int
    h_mask: int
    w_mask: int
    half_h: int
    half_w: int


def _check(
    name: str,
    source: torch.Tensor,
    source_what: str,
    destination: torch.Tensor,
    destination_what: str,
    psa_type: int,
    num: int,
    g: _Geometry,
    *,
    forward: bool,
) -> None:
    if psa_type not in _TYPES:
        raise ValueError(f"{name}: psa_type must be 0 (collect) or 1 (distribute), got {psa_type!r}.")
    mask_shape = (num, g.h_mask * g.w_mask, g.h_feature, g.w_feature)
    attention_shape = (num, g.h_feature * g.w_feature, g.h_feature, g.w_feature)
    expected = {
        source_what: (source, mask_shape if forward else attention_shape),
        destination_what: (destination, attention_shape if forward else mask_shape),
    }
    for what, (tensor, shape) in expected.items():
        if tuple(tensor.shape) != shape:
            raise ValueError(
                f"{name}: `{what}` must have shape {shape} for num_={num}, a {g.h_feature}×{g.w_feature} feature "
                f"map and a {g.h_mask}×{g.w_mask} mask, got {tuple(tensor.shape)}. PSAMask needs an input of "
                "(batch, h_mask · w_mask, H, W)."
            )


def _attention_view(attention: torch.Tensor, psa_type: int, g: _Geometry) -> torch.Tensor:
    """One image's (H·W, H, W) attention map as (y, x, h, w): target (y, x) of the window around (h, w)."""
    four = attention.view(g.h_feature, g.w_feature, g.h_feature, g.w_feature)
    return four if psa_type == 0 else four.permute(2, 3, 0, 1)  # distribute stores (h, w, y, x)


def _copy_windows(mask: torch.Tensor, attention: torch.Tensor, g: _Geometry, forward: bool) -> None:
    """CPU: for each window element (a, b), one strided copy between ``mask[a, b]`` and the grid."""
    sy, sx, sh, sw = attention.stride()
    base = attention.storage_offset()
    for a in range(g.h_mask):
        # Rows h whose element a lands on the grid: 0 <= a + h - half_h < H.
        h0, h1 = max(0, g.half_h - a), min(g.h_feature, g.h_feature + g.half_h - a)
        if h0 >= h1:
            continue
        for b in range(g.w_mask):
            w0, w1 = max(0, g.half_w - b), min(g.w_feature, g.w_feature + g.half_w - b)
            if w0 >= w1:
                continue
            # attention[a + h - half_h, b + w - half_w, h, w] for h in [h0, h1), w in [w0, w1)
            offset = base + (a + h0 - g.half_h) * sy + (b + w0 - g.half_w) * sx + h0 * sh + w0 * sw
            pasted = attention.as_strided((h1 - h0, w1 - w0), (sy + sh, sx + sw), offset)
            window = mask[a, b, h0:h1, w0:w1]
            if forward:
                pasted.copy_(window)
            else:
                window.copy_(pasted)


def _gather_windows(mask: torch.Tensor, attention: torch.Tensor, g: _Geometry, forward: bool) -> None:
    """Any device: destination[i, j, h, w] = source[i ∓ (h - half_h), j ∓ (w - half_w), h, w] where inside."""
    destination, source = (attention, mask) if forward else (mask, attention)
    sign = -1 if forward else 1  # forward: mask row a = y - (h - half_h); backward: y = a + (h - half_h)
    device = mask.device
    first, second, height, width = destination.shape
    step = max(1, _CHUNK_ELEMENTS // max(1, second * height * width))
    j = torch.arange(second, device=device).view(1, -1, 1, 1)
    h = torch.arange(height, device=device).view(1, 1, -1, 1)
    w = torch.arange(width, device=device).view(1, 1, 1, -1)
    source_j = j + sign * (w - g.half_w)
    inside_j = (source_j >= 0) & (source_j < source.size(1))
    source_j = source_j.clamp(0, source.size(1) - 1)
    for start in range(0, first, step):
        i = torch.arange(start, min(first, start + step), device=device).view(-1, 1, 1, 1)
        source_i = i + sign * (h - g.half_h)
        inside = (source_i >= 0) & (source_i < source.size(0)) & inside_j
        values = source[source_i.clamp(0, source.size(0) - 1), source_j, h, w]
        block = destination[start : start + step]
        block.copy_(torch.where(inside, values, block))


#: The strided copies where small operations are cheap; other devices gather.
_STRATEGIES: dict[str, Callable[[torch.Tensor, torch.Tensor, _Geometry, bool], None]] = {"cpu": _copy_windows}


def _paste(masks: torch.Tensor, attentions: torch.Tensor, psa_type: int, g: _Geometry, forward: bool) -> None:
    """Image by image, between the (N, h_mask·w_mask, H, W) masks and the (N, H·W, H, W) attention maps."""
    run = _STRATEGIES.get(masks.device.type, _gather_windows)
    for n in range(masks.size(0)):
        # Splitting a dimension is always a view, whatever the strides: results land in place.
        mask = masks[n].view(g.h_mask, g.w_mask, g.h_feature, g.w_feature)
        run(mask, _attention_view(attentions[n], psa_type, g), g, forward)


def psamask_forward(
    input: torch.Tensor,
    output: torch.Tensor,
    psa_type: int,
    num_: int,
    h_feature: int,
    w_feature: int,
    h_mask: int,
    w_mask: int,
    half_h_mask: int,
    half_w_mask: int,
) -> None:
    """Pastes each position's attention window into ``output`` (see the module docstring)."""
    psa_type = int(psa_type)
    g = _Geometry(int(h_feature), int(w_feature), int(h_mask), int(w_mask), int(half_h_mask), int(half_w_mask))
    _check("psamask_forward", input, "input", output, "output", psa_type, int(num_), g, forward=True)
    _paste(input, output, psa_type, g, forward=True)


def psamask_backward(
    grad_output: torch.Tensor,
    grad_input: torch.Tensor,
    psa_type: int,
    num_: int,
    h_feature: int,
    w_feature: int,
    h_mask: int,
    w_mask: int,
    half_h_mask: int,
    half_w_mask: int,
) -> None:
    """Copies the gradient of every pasted window element back to the mask channel it came from."""
    psa_type = int(psa_type)
    g = _Geometry(int(h_feature), int(w_feature), int(h_mask), int(w_mask), int(half_h_mask), int(half_w_mask))
    _check(
        "psamask_backward", grad_output, "grad_output", grad_input, "grad_input", psa_type, int(num_), g, forward=False
    )
    _paste(grad_input, grad_output, psa_type, g, forward=False)
