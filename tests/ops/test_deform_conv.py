"""Deformable convolution v1 (deform_conv_forward, _backward_input, _backward_parameters) against compiled mmcv 2.1.0.

Every comparison runs both extensions on copies of the same seeded tensors and compares
every argument after the call (the functions write into output, gradInput, gradOffset and
gradWeight; gradInput and gradWeight are pre-filled with noise, because the kernels add
into them). Offsets include points far outside the image and exact integers (points on
the pixel grid and on the -1 / H borders, where the bilinear gradients switch corners).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops_support import assert_same_call, call, import_mmcv_ops, swap_ext

TOL = {"rtol": 1e-5, "atol": 1e-4}


def _offsets(kind: str, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    noise = torch.randn(shape, generator=generator)
    if kind == "random":  # mostly inside, some outside
        return noise * 3
    if kind == "far":  # most points outside (-1, H) x (-1, W)
        return noise * 20
    if kind == "integer":  # exactly on the grid, including the -1 and H borders
        return (noise * 3).round()
    if kind == "zero":  # DeformConv2dPack's initial offsets
        return torch.zeros(shape)
    raise ValueError(kind)


def _call_args(batch=2, channels=4, out_channels=6, size=(7, 8), kernel=(3, 3), stride=(1, 1), pad=(1, 1),
               dilation=(1, 1), groups=1, deform_groups=1, step=None, offsets="random", seed=0):  # fmt: skip
    g = torch.Generator().manual_seed(seed)
    (kh, kw), (h, w) = kernel, size
    out_h = (h + 2 * pad[0] - (dilation[0] * (kh - 1) + 1)) // stride[0] + 1
    out_w = (w + 2 * pad[1] - (dilation[1] * (kw - 1) + 1)) // stride[1] + 1
    tensors = {
        "input": torch.randn(batch, channels, h, w, generator=g),
        "weight": torch.randn(out_channels, channels // groups, kh, kw, generator=g),
        "offset": _offsets(offsets, (batch, deform_groups * 2 * kh * kw, out_h, out_w), g),
        "grad_output": torch.randn(batch, out_channels, out_h, out_w, generator=g),
    }
    keywords = dict(kW=kw, kH=kh, dW=stride[1], dH=stride[0], padW=pad[1], padH=pad[0], dilationW=dilation[1],
                    dilationH=dilation[0], group=groups, deformable_group=deform_groups, im2col_step=step or batch)  # fmt: skip
    return tensors, keywords


def _assert_all_three_match(mmfix_ext, compiled_ext, tensors, keywords, scale=1.0):
    x, weight, offset, grad_out = tensors["input"], tensors["weight"], tensors["offset"], tensors["grad_output"]
    empty = torch.empty(0)
    output = torch.full_like(grad_out, 7.0)  # overwritten
    assert_same_call(
        mmfix_ext, compiled_ext, "deform_conv_forward", x, weight, offset, output, empty, empty, **keywords, **TOL
    )
    grad_input, grad_offset = torch.randn_like(x), torch.randn_like(offset)  # added into / overwritten
    assert_same_call(mmfix_ext, compiled_ext, "deform_conv_backward_input", x, offset, grad_out, grad_input, grad_offset,
                     weight, empty, **keywords, **TOL)  # fmt: skip
    grad_weight = torch.randn_like(weight)  # added into
    assert_same_call(mmfix_ext, compiled_ext, "deform_conv_backward_parameters", x, offset, grad_out, grad_weight, empty,
                     empty, scale=scale, **keywords, **TOL)  # fmt: skip


CASES = {
    "3x3": {},
    "far-offsets": {"offsets": "far"},
    "integer-offsets": {"offsets": "integer"},
    "zero-offsets": {"offsets": "zero", "size": (5, 6)},
    "groups-and-deform-groups": {"channels": 8, "out_channels": 6, "groups": 2, "deform_groups": 4},
    "deform-groups-across-groups": {"channels": 6, "out_channels": 4, "groups": 2, "deform_groups": 3, "batch": 3},
    "stride-dilation-no-pad": {"size": (11, 9), "stride": (2, 1), "pad": (0, 2), "dilation": (2, 1), "kernel": (3, 2)},
    "im2col-step-1": {"batch": 4, "step": 1},
    "im2col-step-2": {"batch": 4, "step": 2, "offsets": "integer"},
    "1x1": {"kernel": (1, 1), "pad": (0, 0), "size": (1, 1), "batch": 1},
    "5x5-large-stride": {"kernel": (5, 5), "stride": (3, 3), "pad": (2, 2), "size": (13, 10), "channels": 3},
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_forward_and_both_backwards_equal_compiled(compiled_ext, mmfix_ext, case):
    tensors, keywords = _call_args(**case)
    _assert_all_three_match(mmfix_ext, compiled_ext, tensors, keywords, scale=0.5)


@pytest.mark.parametrize("step", [1, 2])
def test_chunked_columns_equal_compiled(compiled_ext, mmfix_ext, monkeypatch, step):
    # Large feature maps are processed in chunks of output rows so that the column matrix stays bounded;
    # a tiny budget makes every row its own chunk, across image groups.
    from mmfix._ops import _deform_im2col

    monkeypatch.setattr(_deform_im2col, "COLUMN_BUDGET", 16)
    tensors, keywords = _call_args(batch=4, step=step, size=(6, 5), deform_groups=2, seed=3)
    _assert_all_three_match(mmfix_ext, compiled_ext, tensors, keywords)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    groups=st.sampled_from([1, 2]),
    deform_groups=st.sampled_from([1, 2]),
    offsets=st.sampled_from(["random", "far", "integer"]),
    seed=st.integers(0, 2**16),
)
def test_random_geometries_equal_compiled(compiled_ext, mmfix_ext, data, kernel, groups, deform_groups, offsets, seed):
    size = (data.draw(st.integers(kernel[0], 9)), data.draw(st.integers(kernel[1], 9)))
    batch = data.draw(st.integers(1, 3))
    case = dict(
        batch=batch,
        channels=2 * groups * deform_groups,
        out_channels=groups * data.draw(st.integers(1, 3)),
        size=size,
        kernel=kernel,
        stride=(data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))),
        pad=(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))),
        dilation=(data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))),
        groups=groups,
        deform_groups=deform_groups,
        step=data.draw(st.sampled_from([d for d in (1, 2, 3) if batch % d == 0])),
        offsets=offsets,
        seed=seed,
    )
    extent = [case["dilation"][i] * (kernel[i] - 1) + 1 for i in range(2)]
    if any(size[i] + 2 * case["pad"][i] < extent[i] for i in range(2)):
        return  # no output position
    tensors, keywords = _call_args(**case)
    _assert_all_three_match(mmfix_ext, compiled_ext, tensors, keywords, scale=2.0)


def test_points_outside_the_image_ignore_non_finite_pixels(compiled_ext, mmfix_ext):
    # The kernels never read the image for a point outside it: an inf pixel must not leak in as 0 * inf.
    tensors, keywords = _call_args(seed=11)
    tensors["input"][:, :, 0, 0] = float("inf")
    tensors["offset"] = torch.full_like(tensors["offset"], 100.0)
    _assert_all_three_match(mmfix_ext, compiled_ext, tensors, keywords)


def test_empty_batch_equals_compiled(compiled_ext, mmfix_ext):
    tensors, keywords = _call_args(batch=0, step=1)
    _assert_all_three_match(mmfix_ext, compiled_ext, tensors, keywords)


# --- mmcv's own Python API (the code users run) -----------------------------------------------


def _run_layer(ext, layer, x, offset=None):
    layer.zero_grad()
    x = x.detach().clone().requires_grad_()
    inputs = [x]
    if offset is not None:
        offset = offset.detach().clone().requires_grad_()
        inputs.append(offset)
    with swap_ext(ext):
        out = layer(*inputs)
        (out * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum().backward()
    grads = [t.grad for t in inputs] + [p.grad.clone() for p in layer.parameters() if p.grad is not None]
    return out.detach(), grads


@pytest.mark.parametrize(
    "config",
    [
        dict(in_channels=4, out_channels=6, kernel_size=3, padding=1),
        dict(in_channels=8, out_channels=4, kernel_size=3, stride=2, padding=2, dilation=2, groups=2, deform_groups=2),
        dict(in_channels=4, out_channels=4, kernel_size=(3, 1), padding=(1, 0), im2col_step=2),
    ],
)
def test_deform_conv2d_layer_equals_compiled(compiled_ext, mmfix_ext, config):
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(0)
    layer = ops.DeformConv2d(**config)
    x = torch.randn(4, config["in_channels"], 9, 10)
    kh, kw = layer.kernel_size
    out_size = torch.nn.functional.conv2d(x, layer.weight.detach(), stride=layer.stride, padding=layer.padding,
                                          dilation=layer.dilation, groups=layer.groups).shape[2:]  # fmt: skip
    offset = torch.randn(4, layer.deform_groups * 2 * kh * kw, *out_size) * 2
    expected, expected_grads = _run_layer(compiled_ext, layer, x, offset)
    actual, actual_grads = _run_layer(mmfix_ext, layer, x, offset)
    torch.testing.assert_close(actual, expected, **TOL)
    for a, e in zip(actual_grads, expected_grads):
        torch.testing.assert_close(a, e, **TOL)


@pytest.mark.parametrize("offset_init", ["zero", "random"])
def test_deform_conv2d_pack_equals_compiled(compiled_ext, mmfix_ext, offset_init):
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(1)
    layer = ops.DeformConv2dPack(6, 8, 3, padding=1, deform_groups=2)
    if offset_init == "random":
        torch.nn.init.normal_(layer.conv_offset.weight, std=0.3)
    x = torch.randn(2, 6, 8, 7)
    expected, expected_grads = _run_layer(compiled_ext, layer, x)
    actual, actual_grads = _run_layer(mmfix_ext, layer, x)
    torch.testing.assert_close(actual, expected, **TOL)
    for a, e in zip(actual_grads, expected_grads):
        torch.testing.assert_close(a, e, **TOL)


def test_input_smaller_than_kernel_through_the_layer(compiled_ext, mmfix_ext):
    # DeformConv2d pads such inputs to the kernel size and crops the output again.
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(2)
    layer = ops.DeformConv2d(3, 4, 5, padding=2)
    x = torch.randn(1, 3, 3, 4)
    offset = torch.randn(1, 2 * 25, 3, 4)
    expected, expected_grads = _run_layer(compiled_ext, layer, x, offset)
    actual, actual_grads = _run_layer(mmfix_ext, layer, x, offset)
    torch.testing.assert_close(actual, expected, **TOL)
    for a, e in zip(actual_grads, expected_grads):
        torch.testing.assert_close(a, e, **TOL)


@pytest.mark.slow
def test_gradients_are_the_derivatives_float64(mmfix_ext):
    # Away from the grid lines (random offsets) the kernels' gradients are the true derivatives.
    ops = import_mmcv_ops(mmfix_ext)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 4, 4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(2, 2, 2, 2, generator=g, dtype=torch.float64, requires_grad=True)
    offset = (torch.randn(1, 2 * 2 * 4, 3, 2, generator=g, dtype=torch.float64) * 1.5).requires_grad_()

    def f(x, offset, weight):
        return ops.deform_conv2d(x, offset, weight, 1, 0, 1, 2, 2, False, 1)

    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(f, (x, offset, weight), eps=1e-6, atol=1e-5)


def test_half_inputs_give_the_float32_result(compiled_ext, mmfix_ext):
    tensors, keywords = _call_args(channels=8, out_channels=4, seed=7)
    tensors["weight"] = tensors["weight"] * 0.1
    _, (*_, expected, _, _), _ = call(compiled_ext, "deform_conv_forward", tensors["input"], tensors["weight"],
                                      tensors["offset"], torch.empty(2, 4, 7, 8), torch.empty(0), torch.empty(0), **keywords)  # fmt: skip
    half = {k: v.half() for k, v in tensors.items()}
    output = torch.empty(2, 4, 7, 8, dtype=torch.half)
    mmfix_ext.deform_conv_forward(
        half["input"], half["weight"], half["offset"], output, torch.empty(0), torch.empty(0), **keywords
    )
    assert output.dtype == torch.half
    torch.testing.assert_close(output.float(), expected, rtol=1e-2, atol=2e-2)
    grad_input, grad_offset = torch.zeros_like(half["input"]), torch.zeros_like(half["offset"])
    mmfix_ext.deform_conv_backward_input(half["input"], half["offset"], half["grad_output"], grad_input, grad_offset,
                                         half["weight"], torch.empty(0), **keywords)  # fmt: skip
    _, expected_args, _ = call(compiled_ext, "deform_conv_backward_input", tensors["input"], tensors["offset"],
                               tensors["grad_output"], torch.zeros_like(tensors["input"]), torch.zeros_like(tensors["offset"]),
                               tensors["weight"], torch.empty(0), **keywords)  # fmt: skip
    torch.testing.assert_close(grad_input.float(), expected_args[3], rtol=1e-2, atol=2e-2)
    torch.testing.assert_close(grad_offset.float(), expected_args[4], rtol=1e-2, atol=5e-2)


# --- bad input ----------------------------------------------------------------------------------

BAD = {
    "im2col_step does not divide the batch": ({"batch": 3}, {"im2col_step": 2}, "im2col_step 2 does not divide"),
    "offset channels": ({}, {"deformable_group": 2}, "offset"),
    "kernel size differs from the weight": ({}, {"kW": 2}, "weight's kernel"),
    "input smaller than kernel": ({"size": (2, 8), "pad": (2, 2)}, {}, "smaller than the 3 x 3 kernel"),
}


@pytest.mark.parametrize("case", BAD.values(), ids=BAD.keys())
def test_bad_arguments_are_refused_like_compiled(compiled_ext, mmfix_ext, case):
    shape_args, keyword_changes, message = case
    tensors, keywords = _call_args(**shape_args)
    keywords.update(keyword_changes)
    args = (
        tensors["input"],
        tensors["weight"],
        tensors["offset"],
        torch.empty_like(tensors["grad_output"]),
        torch.empty(0),
        torch.empty(0),
    )
    with pytest.raises(RuntimeError):
        compiled_ext.deform_conv_forward(*args, **keywords)
    with pytest.raises(ValueError, match=message):
        mmfix_ext.deform_conv_forward(*args, **keywords)


def test_mismatched_dtype_and_unwritable_output_are_named(mmfix_ext):
    tensors, keywords = _call_args()
    x, weight, offset = tensors["input"], tensors["weight"], tensors["offset"]
    out = torch.empty_like(tensors["grad_output"])
    with pytest.raises(ValueError, match=r"`weight` is torch\.float64"):
        mmfix_ext.deform_conv_forward(x, weight.double(), offset, out, torch.empty(0), torch.empty(0), **keywords)
    with pytest.raises(ValueError, match="`output` has shape"):
        mmfix_ext.deform_conv_forward(x, weight, offset, out[:, :2], torch.empty(0), torch.empty(0), **keywords)


# --- torchvision's kernel as the forward's fast path ---------------------------------------------


def torchvision_or_skip():
    from mmfix._ops import _torchvision

    tv = _torchvision.ops()
    if tv is None:
        pytest.skip("torchvision's compiled kernels do not load here (they do in the torch 2.14 + torchvision venv)")
    return tv


TORCHVISION_CASES = (
    "3x3",
    "far-offsets",
    "integer-offsets",
    "groups-and-deform-groups",
    "stride-dilation-no-pad",
    "deform-groups-across-groups",
    "1x1",
)


@pytest.mark.parametrize("name", TORCHVISION_CASES)
def test_torchvision_forward_equals_the_pure_path(mmfix_ext, monkeypatch, name):
    # The fast path is taken on CUDA tensors; here it is forced on CPU to compare the two.
    from mmfix._ops import _deform_im2col

    tv = torchvision_or_skip()
    tensors, keywords = _call_args(**CASES[name])
    results = []
    for ops in (None, tv):
        monkeypatch.setattr(_deform_im2col, "torchvision_ops", lambda tensor, ops=ops: ops)
        output = torch.empty_like(tensors["grad_output"])
        mmfix_ext.deform_conv_forward(tensors["input"], tensors["weight"], tensors["offset"], output, torch.empty(0),
                                      torch.empty(0), **keywords)  # fmt: skip
        results.append(output)
    torch.testing.assert_close(results[1], results[0], **TOL)


def test_the_stand_in_serves_these_functions(mmfix_ext):
    for name in ['deform_conv_forward', 'deform_conv_backward_input', 'deform_conv_backward_parameters']:
        assert mmfix_ext.__mmfix_families__[name] == "deform_conv"
        assert not hasattr(getattr(mmfix_ext, name), "__mmfix_unavailable__")
