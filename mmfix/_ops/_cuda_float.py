"""float32 arithmetic as nvcc compiles it, for kernels whose results hang on the last bit.

Some of mmcv's CUDA kernels take decisions on values that are pure rounding noise (the sign
of a cross product of collinear points, say), so the result depends on exactly how the GPU
rounds. Two things differ from rounding every operation on its own, as PyTorch does:

* contraction: nvcc (default ``--fmad=true``) fuses a multiply into the add or subtract that
  uses it, rounding once. Which product it fuses was read off the SASS that CUDA 12.1's
  NVVM and ptxas make for sm_80 from the kernel's source: in ``a*b - c*d`` the minuend is
  fused (``fma(a, b, -(c*d))``), in ``a*b + c*d`` the second product (``fma(c, d, a*b)``);
* ``sinf``/``cosf``: libdevice's ``__nv_sinf``/``__nv_cosf`` (within 1.5 ulp, not always
  the correctly rounded value that CPU libraries usually give), transcribed below.

A fused multiply-add is computed in float64 and rounded to float32: the product of two
float32 is exact in float64 and the sum rounds twice, which differs from one rounding only
when the float64 result falls exactly halfway between two float32 (practically never).
"""

from __future__ import annotations

import struct

import torch
from torch import Tensor


def fma(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """``fmaf(a, b, c)`` of float32 tensors (broadcasting)."""
    return (a.double() * b.double() + c.double()).float()


def mul_sub(a: Tensor, b: Tensor, c: Tensor, d: Tensor) -> Tensor:
    """``a*b - c*d`` as nvcc contracts it: ``fma(a, b, -(c*d))``."""
    return fma(a, b, -(c * d))


def mul_add(a: Tensor, b: Tensor, c: Tensor, d: Tensor) -> Tensor:
    """``a*b + c*d`` as nvcc contracts it: ``fma(c, d, a*b)``."""
    return fma(c, d, a * b)


def _bits(hex_word: str) -> float:
    value: float = struct.unpack(">f", bytes.fromhex(hex_word))[0]
    return value


# __nv_sinf / __nv_cosf (libdevice, CUDA 12.1): Cody-Waite reduction by pi/2 in three
# fused steps, then a minimax polynomial for sin or cos of the remainder.
_TWO_OVER_PI = _bits("3F22F983")
_PI_OVER_TWO = (_bits("BFC90FDA"), _bits("B3A22168"), _bits("A7C234C5"))
_SIN = (_bits("B94D4153"), _bits("3C0885E4"), _bits("BE2AAAA8"))
_COS = (_bits("37CBAC00"), _bits("BAB607ED"), _bits("3D2AAABB"), _bits("BEFFFFFF"))
#: Beyond this the library reduces the argument another way (Payne-Hanek); PyTorch's
#: sin/cos are used there instead (no heading or angle is that large in practice).
_FAST_PATH_LIMIT = 105615.0


def _sin_cos(x: Tensor, quadrant_shift: int) -> Tensor:
    x = x.float()
    j = torch.round(x * _TWO_OVER_PI)  # round half to even, as cvt.rni
    r = x
    for step in _PI_OVER_TWO:
        r = fma(j, x.new_tensor(step), r)
    q = j.to(torch.int64) + quadrant_shift
    even = (q & 1) == 0
    one = torch.ones_like(r)
    t = torch.where(even, r, one)
    s = r * r
    cos_start = fma(x.new_tensor(_COS[0]), s, x.new_tensor(_COS[1]))
    p = torch.where(even, x.new_tensor(_SIN[0]), cos_start)
    p = fma(p, s, torch.where(even, x.new_tensor(_SIN[1]), x.new_tensor(_COS[2])))
    p = fma(p, s, torch.where(even, x.new_tensor(_SIN[2]), x.new_tensor(_COS[3])))
    result = fma(p, s * t, t)
    result = torch.where((q & 2) != 0, -result, result)
    fallback = torch.cos(x) if quadrant_shift else torch.sin(x)
    return torch.where(x.abs() < _FAST_PATH_LIMIT, result, fallback)


def sinf(x: Tensor) -> Tensor:
    return _sin_cos(x, 0)


def cosf(x: Tensor) -> Tensor:
    return _sin_cos(x, 1)
