"""tin_shift (MMAction2's TIN): mmfix against the CUDA kernel's definition.

Compiled mmcv has no CPU kernel (checked below), so the reference is the kernel's loop
written out here: for every (n, c, hw) and frame i, ``out[i + shift] = in[i]`` when in range.
The backward kernel is that same loop on the gradient (see mmfix/_ops/tin_shift.py).
"""

from __future__ import annotations

import pytest
import torch

from mmfix._ops._rotated_checks import OpArgumentError
from ops_support import import_mmcv_ops, swap_ext


def reference(source: torch.Tensor, shift: torch.Tensor, destination: torch.Tensor) -> torch.Tensor:
    out = destination.clone()
    n_size, t_size, channels, _ = source.shape
    group_channel = channels // shift.shape[1]
    for n in range(n_size):
        for j in range(channels):
            t_shift = int(shift[n, j // group_channel])
            for i in range(t_size):
                now_t = i + t_shift
                if 0 <= now_t < t_size:
                    out[n, now_t, j, :] = source[n, i, j, :]
    return out


def _case(seed: int, n: int, t: int, c: int, hw: int, groups: int, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, t, c, hw, generator=gen).to(dtype)
    shift = torch.randint(-t - 1, t + 2, (n, groups), generator=gen, dtype=torch.int32)
    return x, shift


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    x, shift = _case(0, 1, 3, 2, 2, 1)
    with pytest.raises(RuntimeError, match="implementation for device cpu not found"):
        compiled_ext.tin_shift_forward(x, shift, torch.zeros_like(x))


@pytest.mark.parametrize(
    ("n", "t", "c", "hw", "groups"),
    [(2, 4, 6, 5, 3), (1, 8, 4, 1, 4), (3, 5, 8, 7, 2), (2, 1, 2, 3, 1), (0, 3, 4, 2, 2), (1, 6, 16, 9, 1)],
)
def test_forward_and_backward_match_the_kernel(mmfix_ext, n, t, c, hw, groups):
    x, shift = _case(n * 100 + t * 10 + c, n, t, c, hw, groups)
    # Random destinations: the kernels write only the frames that receive a shifted one.
    out = torch.randn_like(x)
    expected = reference(x, shift, out)
    mmfix_ext.tin_shift_forward(x, shift, out)
    assert torch.equal(out, expected)
    grad_output = torch.randn_like(x)
    grad_input = torch.randn_like(x)
    expected_grad = reference(grad_output, shift, grad_input)
    mmfix_ext.tin_shift_backward(grad_output, shift, grad_input)
    assert torch.equal(grad_input, expected_grad)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_half_and_double(mmfix_ext, dtype):
    x, shift = _case(7, 2, 5, 6, 4, 3, dtype)
    out = torch.zeros_like(x)
    mmfix_ext.tin_shift_forward(x, shift, out)
    assert out.dtype == dtype and torch.equal(out, reference(x, shift, torch.zeros_like(x)))


def test_through_mmcv_tin_shift(mmfix_ext):
    """mmcv.ops.tin_shift / TINShift: zeros shifted in; the gradient shifts like the forward."""
    ops = import_mmcv_ops(mmfix_ext)
    x, shift = _case(3, 2, 6, 8, 10, 4)
    x.requires_grad_(True)
    with swap_ext(mmfix_ext):
        out = ops.TINShift()(x, shift)
        grad_output = torch.randn_like(out)
        out.backward(grad_output)
    assert torch.equal(out, reference(x.detach(), shift, torch.zeros_like(x)))
    assert torch.equal(x.grad, reference(grad_output, shift, torch.zeros_like(x)))
    # mmcv's own CUDA test (tests/test_ops/test_tin_shift.py) expects this direction: a shift
    # of -2 over 4 frames passes the gradient of ones to frames 0 and 1, not 2 and 3.
    ones = torch.ones(1, 4, 1, 1)
    grad = torch.zeros_like(ones)
    mmfix_ext.tin_shift_backward(ones, torch.tensor([[-2]], dtype=torch.int32), grad)
    assert grad.flatten().tolist() == [1.0, 1.0, 0.0, 0.0]


def test_bad_input_is_named(mmfix_ext):
    x = torch.randn(2, 4, 6, 3)
    with pytest.raises(OpArgumentError, match=r"`shift` is int64.*int32"):
        mmfix_ext.tin_shift_forward(x, torch.zeros(2, 3, dtype=torch.long), torch.zeros_like(x))
    with pytest.raises(OpArgumentError, match=r"channels \(6\) must split into the 4 shift groups"):
        mmfix_ext.tin_shift_forward(x, torch.zeros(2, 4, dtype=torch.int32), torch.zeros_like(x))
    with pytest.raises(OpArgumentError, match=r"`shift` must have shape \(N=2, groups\)"):
        mmfix_ext.tin_shift_backward(x, torch.zeros(3, 3, dtype=torch.int32), torch.zeros_like(x))
    with pytest.raises(OpArgumentError, match=r"`input` must be 4-D"):
        mmfix_ext.tin_shift_forward(x[0], torch.zeros(2, 3, dtype=torch.int32), torch.zeros_like(x[0]))
