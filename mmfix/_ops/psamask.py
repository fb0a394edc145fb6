"""mmcv's point-wise spatial attention mask (PSANet): ``psamask_forward`` / ``psamask_backward``.

MMSegmentation's ``PSAHead`` predicts, at every feature position (h, w), an ``h_mask × w_mask``
window of attention centred there (``half_h_mask``, ``half_w_mask`` above and left of it). The
op pastes each window onto the ``H × W`` feature grid, cropped at the borders:

* collect (``psa_type`` 0): ``output[n, y·W + x, h, w] = input[n, (y-h+half_h)·w_mask + (x-w+half_w), h, w]``
* distribute (1): ``output[n, h·W + w, y, x]`` = the same value

for every target (y, x) inside both the grid and the window; other output elements are left
as they were (mmcv passes zeros). The backward functions copy the gradient back along the
same correspondence into ``grad_input`` (again only where a window element lands on the grid).

Each image is one advanced-indexing gather over broadcast coordinate grids, in chunks of
target rows so the temporaries stay bounded (PSANet's 97×97 masks on 97×97 features make an
88-million-element output per image).
"""

from __future__ import annotations

from typing import Callable

import torch

#: Elements of one gathered chunk (64 MiB in float32).
_CHUNK_ELEMENTS = 1 << 24
_TYPES = {0: "collect", 1: "distribute"}

# For each (psa_type, direction): from the 4 destination coordinates (broadcast grids) and the
# geometry, the 4 source coordinates. Forward: destination (y, x, h, w) for collect and
# (h, w, y, x) for distribute, source (i, j, h, w) with i = y - h + half_h, j = x - w + half_w.
# Backward: destination (i, j, h, w), source the forward's destination with y = h + i - half_h.
_Coords = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _collect_forward(d: _Coords, half_h: int, half_w: int) -> _Coords:
    y, x, h, w = d
    return y - h + half_h, x - w + half_w, h, w


def _distribute_forward(d: _Coords, half_h: int, half_w: int) -> _Coords:
    h, w, y, x = d
    return y - h + half_h, x - w + half_w, h, w


def _collect_backward(d: _Coords, half_h: int, half_w: int) -> _Coords:
    i, j, h, w = d
    return h + i - half_h, w + j - half_w, h, w


def _distribute_backward(d: _Coords, half_h: int, half_w: int) -> _Coords:
    i, j, h, w = d
    return h, w, h + i - half_h, w + j - half_w


_MAPS: dict[tuple[int, str], Callable[[_Coords, int, int], _Coords]] = {
    (0, "forward"): _collect_forward,
    (1, "forward"): _distribute_forward,
    (0, "backward"): _collect_backward,
    (1, "backward"): _distribute_backward,
}


def _check(
    name: str,
    source: torch.Tensor,
    source_what: str,
    destination: torch.Tensor,
    destination_what: str,
    psa_type: int,
    num: int,
    h_feature: int,
    w_feature: int,
    h_mask: int,
    w_mask: int,
    forward: bool,
) -> None:
    if psa_type not in _TYPES:
        raise ValueError(f"{name}: psa_type must be 0 (collect) or 1 (distribute), got {psa_type!r}.")
    mask_shape = (num, h_mask * w_mask, h_feature, w_feature)
    attention_shape = (num, h_feature * w_feature, h_feature, w_feature)
    expected = {
        source_what: (source, mask_shape if forward else attention_shape),
        destination_what: (destination, attention_shape if forward else mask_shape),
    }
    for what, (tensor, shape) in expected.items():
        if tuple(tensor.shape) != shape:
            raise ValueError(
                f"{name}: `{what}` must have shape {shape} for num_={num}, a {h_feature}×{w_feature} feature map "
                f"and a {h_mask}×{w_mask} mask, got {tuple(tensor.shape)}. PSAMask needs an input of "
                "(batch, h_mask · w_mask, H, W)."
            )


def _paste(
    source: torch.Tensor,
    destination: torch.Tensor,
    source_shape: tuple[int, int, int, int],
    destination_shape: tuple[int, int, int, int],
    mapping: Callable[[_Coords, int, int], _Coords],
    half_h: int,
    half_w: int,
) -> None:
    """``destination[n][d] = source[n][mapping(d)]`` wherever the mapped coordinate is inside ``source``."""
    device = source.device
    first, second, third, fourth = destination_shape
    per_row = second * third * fourth
    step = max(1, _CHUNK_ELEMENTS // max(1, per_row))
    grids = [torch.arange(size, device=device) for size in destination_shape]
    broadcast = (grids[1].view(1, -1, 1, 1), grids[2].view(1, 1, -1, 1), grids[3].view(1, 1, 1, -1))
    for n in range(source.size(0)):
        image = source[n].reshape(source_shape)
        slab = destination[n]
        work = slab if slab.is_contiguous() else slab.contiguous()
        target = work.view(destination_shape)
        for start in range(0, first, step):
            rows = grids[0][start : start + step]
            coords: _Coords = (rows.view(-1, 1, 1, 1), *broadcast)
            inside = torch.ones((), dtype=torch.bool, device=device)
            clamped = []
            for coordinate, size in zip(mapping(coords, half_h, half_w), source_shape):
                inside = inside & (coordinate >= 0) & (coordinate < size)
                clamped.append(coordinate.clamp(0, size - 1))
            block = target[start : start + step]
            block.copy_(torch.where(inside, image[tuple(clamped)], block))
        if work is not slab:
            slab.copy_(work)


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
    _check(
        "psamask_forward", input, "input", output, "output", psa_type, num_, h_feature, w_feature, h_mask, w_mask, True
    )
    _paste(
        input,
        output,
        (h_mask, w_mask, h_feature, w_feature),
        (h_feature, w_feature, h_feature, w_feature),
        _MAPS[psa_type, "forward"],
        int(half_h_mask),
        int(half_w_mask),
    )


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
    _check(
        "psamask_backward",
        grad_output,
        "grad_output",
        grad_input,
        "grad_input",
        psa_type,
        num_,
        h_feature,
        w_feature,
        h_mask,
        w_mask,
        False,
    )
    _paste(
        grad_output,
        grad_input,
        (h_feature, w_feature, h_feature, w_feature),
        (h_mask, w_mask, h_feature, w_feature),
        _MAPS[psa_type, "backward"],
        int(half_h_mask),
        int(half_w_mask),
    )
