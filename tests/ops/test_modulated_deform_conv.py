"""Deformable convolution v2 (modulated_deform_conv_forward / _backward) against compiled mmcv 2.1.0.

The backward adds into grad_input, grad_weight and grad_bias and overwrites grad_offset and
grad_mask; all are pre-filled with noise so that both semantics are checked.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops_support import assert_same_call, call, import_mmcv_ops, swap_ext

TOL = {"rtol": 1e-5, "atol": 1e-4}


def _call_args(batch=2, channels=4, out_channels=6, size=(7, 8), kernel=(3, 3), stride=(1, 1), pad=(1, 1),
               dilation=(1, 1), groups=1, deform_groups=1, bias=True, offsets="random", seed=0):  # fmt: skip
    g = torch.Generator().manual_seed(seed)
    (kh, kw), (h, w) = kernel, size
    out_h = (h + 2 * pad[0] - (dilation[0] * (kh - 1) + 1)) // stride[0] + 1
    out_w = (w + 2 * pad[1] - (dilation[1] * (kw - 1) + 1)) // stride[1] + 1
    offset = torch.randn(batch, deform_groups * 2 * kh * kw, out_h, out_w, generator=g)
    offset = {"random": offset * 3, "far": offset * 20, "integer": (offset * 3).round(), "zero": offset * 0}[offsets]
    tensors = {
        "input": torch.randn(batch, channels, h, w, generator=g),
        "weight": torch.randn(out_channels, channels // groups, kh, kw, generator=g),
        "bias": torch.randn(out_channels, generator=g) if bias else torch.empty(0),
        "offset": offset,
        "mask": torch.rand(batch, deform_groups * kh * kw, out_h, out_w, generator=g),
        "grad_output": torch.randn(batch, out_channels, out_h, out_w, generator=g),
    }
    keywords = dict(kernel_h=kh, kernel_w=kw, stride_h=stride[0], stride_w=stride[1], pad_h=pad[0], pad_w=pad[1],
                    dilation_h=dilation[0], dilation_w=dilation[1], group=groups, deformable_group=deform_groups,
                    with_bias=bias)  # fmt: skip
    return tensors, keywords


def _assert_both_match(mmfix_ext, compiled_ext, t, keywords):
    empty = torch.empty(0)
    output = torch.randn_like(t["grad_output"])  # zeroed and overwritten
    assert_same_call(mmfix_ext, compiled_ext, "modulated_deform_conv_forward", t["input"], t["weight"], t["bias"], empty,
                     t["offset"], t["mask"], output, empty, **keywords, **TOL)  # fmt: skip
    grads = [torch.randn_like(t[k]) for k in ("input", "weight", "bias", "offset", "mask")]
    assert_same_call(mmfix_ext, compiled_ext, "modulated_deform_conv_backward", t["input"], t["weight"], t["bias"], empty,
                     t["offset"], t["mask"], empty, *grads, t["grad_output"], **keywords, **TOL)  # fmt: skip


CASES = {
    "3x3-bias": {},
    "no-bias": {"bias": False},
    "far-offsets": {"offsets": "far"},
    "integer-offsets": {"offsets": "integer"},
    "zero-offsets": {"offsets": "zero"},
    "groups-and-deform-groups": {"channels": 8, "out_channels": 6, "groups": 2, "deform_groups": 4},
    "deform-groups-across-groups": {"channels": 6, "out_channels": 4, "groups": 2, "deform_groups": 3, "batch": 3},
    "stride-dilation-no-pad": {"size": (11, 9), "stride": (2, 1), "pad": (0, 2), "dilation": (2, 1), "kernel": (3, 2)},
    "1x1": {"kernel": (1, 1), "pad": (0, 0), "size": (1, 1), "batch": 1},
    "kernel-larger-than-input": {"kernel": (5, 5), "pad": (2, 2), "size": (3, 4)},
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_forward_and_backward_equal_compiled(compiled_ext, mmfix_ext, case):
    tensors, keywords = _call_args(**case)
    _assert_both_match(mmfix_ext, compiled_ext, tensors, keywords)


def test_chunked_columns_equal_compiled(compiled_ext, mmfix_ext, monkeypatch):
    from mmfix._ops import _deform_im2col

    monkeypatch.setattr(_deform_im2col, "COLUMN_BUDGET", 16)
    tensors, keywords = _call_args(batch=3, size=(6, 5), deform_groups=2, seed=3)
    _assert_both_match(mmfix_ext, compiled_ext, tensors, keywords)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    groups=st.sampled_from([1, 2]),
    deform_groups=st.sampled_from([1, 2]),
    offsets=st.sampled_from(["random", "far", "integer"]),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_geometries_equal_compiled(
    compiled_ext, mmfix_ext, data, kernel, groups, deform_groups, offsets, bias, seed
):
    case = dict(
        batch=data.draw(st.integers(1, 3)),
        channels=2 * groups * deform_groups,
        out_channels=groups * data.draw(st.integers(1, 3)),
        size=(data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9))),
        kernel=kernel,
        stride=(data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))),
        pad=(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))),
        dilation=(data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))),
        groups=groups,
        deform_groups=deform_groups,
        bias=bias,
        offsets=offsets,
        seed=seed,
    )
    if any(case["size"][i] + 2 * case["pad"][i] < case["dilation"][i] * (kernel[i] - 1) + 1 for i in range(2)):
        return  # no output position
    tensors, keywords = _call_args(**case)
    _assert_both_match(mmfix_ext, compiled_ext, tensors, keywords)


def test_a_callers_ones_weighs_the_bias_gradient_like_compiled(compiled_ext, mmfix_ext):
    # The kernel keeps a 2-D `ones` of out_h * out_w elements (mmcv passes an empty one).
    t, keywords = _call_args(size=(4, 5), seed=4)
    ones = torch.rand(4, 5)
    grads = [torch.zeros_like(t[k]) for k in ("input", "weight", "bias", "offset", "mask")]
    assert_same_call(mmfix_ext, compiled_ext, "modulated_deform_conv_backward", t["input"], t["weight"], t["bias"], ones,
                     t["offset"], t["mask"], torch.empty(0), *grads, t["grad_output"], **keywords, **TOL)  # fmt: skip


# --- offsets and masks larger than the output (DyHead) --------------------------------------------
# The kernel reads offset[b] and mask[b] from their first element on in the OUTPUT's layout and
# ignores the rest (DyHead applies one FPN level's offset and mask to the next, smaller level);
# grad_offset and grad_mask are overwritten there only, the rest keeps what the caller put in.


def _oversized(t, keywords, extra, sliced, channels_last, g):
    """t's offset and mask replaced by larger tensors (extra channels, rows, columns); channels_last:
    those and the input in channels-last memory."""
    batch, offset_channels, out_h, out_w = t["offset"].shape
    mask_channels = t["mask"].shape[1]
    more_c, more_h, more_w = extra
    h, w = out_h + more_h, out_w + more_w
    if sliced:  # DyHead: one conv's output, sliced into offset and (sigmoid) mask
        both = torch.randn(batch, offset_channels + mask_channels + more_c, h, w, generator=g) * 3
        offset, mask = both[:, :offset_channels], both[:, offset_channels : offset_channels + mask_channels].sigmoid()
    else:
        offset = torch.randn(batch, offset_channels + more_c, h, w, generator=g) * 3
        mask = torch.rand(batch, mask_channels + more_c, h, w, generator=g)
    image = t["input"]
    if channels_last:  # read (and their gradients written) as their memory lies, as the kernel does
        offset, mask, image = (x.contiguous(memory_format=torch.channels_last) for x in (offset, mask, image))
    return {**t, "input": image, "offset": offset, "mask": mask}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    extra=st.tuples(st.integers(0, 3), st.integers(0, 6), st.integers(0, 6)),
    stride=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    deform_groups=st.sampled_from([1, 2]),
    batch=st.integers(1, 3),
    sliced=st.booleans(),
    channels_last=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_larger_offsets_and_masks_are_read_as_compiled_reads_them(
    compiled_ext, mmfix_ext, extra, stride, deform_groups, batch, sliced, channels_last, seed
):
    g = torch.Generator().manual_seed(seed)
    t, keywords = _call_args(batch=batch, size=(6, 7), stride=stride, deform_groups=deform_groups, seed=seed)
    t = _oversized(t, keywords, extra, sliced, channels_last, g)
    _assert_both_match(mmfix_ext, compiled_ext, t, keywords)


def test_dyhead_spatial_conv_high_equals_compiled(compiled_ext, mmfix_ext):
    # mmdet's DyDCNv2 as DyHead's spatial_conv_high runs it: the offset and mask of a 10 x 14 level
    # applied to the 5 x 7 level above, through mmcv's own ModulatedDeformConv2d.
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(2)
    layer = ops.ModulatedDeformConv2d(8, 8, 3, stride=1, padding=1, bias=False)
    offset_and_mask = torch.randn(2, 27, 10, 14) * 2
    offset, mask = offset_and_mask[:, :18], offset_and_mask[:, 18:].sigmoid()
    x = torch.randn(2, 8, 5, 7)
    actual, expected = _run(mmfix_ext, layer, x, offset, mask), _run(compiled_ext, layer, x, offset, mask)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, **TOL)
    # The kernel read (and wrote the gradient of) each image's first 18 * 5 * 7 elements only.
    read = actual[2].flatten(1)
    assert bool(read[:, 18 * 5 * 7 :].eq(0).all()) and bool(read[:, : 18 * 5 * 7].ne(0).any())


def test_an_offset_smaller_than_the_kernels_read_is_refused(mmfix_ext):
    # The kernel would read past the tensor (or into the next image): a clear error instead.
    t, keywords = _call_args(size=(6, 7))
    empty = torch.empty(0)
    out = torch.empty_like(t["grad_output"])
    with pytest.raises(ValueError, match=r"`offset` has shape \(2, 18, 6, 6\).*reads 756 elements per image"):
        mmfix_ext.modulated_deform_conv_forward(t["input"], t["weight"], t["bias"], empty, t["offset"][..., :6],
                                                t["mask"], out, empty, **keywords)  # fmt: skip
    with pytest.raises(ValueError, match=r"`mask` has shape \(1, 9, 6, 7\), fewer than the 2 image"):
        mmfix_ext.modulated_deform_conv_forward(t["input"], t["weight"], t["bias"], empty, t["offset"], t["mask"][:1],
                                                out, empty, **keywords)  # fmt: skip
    grads = [torch.zeros_like(t[k]) for k in ("input", "weight", "bias", "offset", "mask")]
    grads[3] = grads[3][:, :, :3]
    with pytest.raises(ValueError, match="`grad_offset` has shape"):
        mmfix_ext.modulated_deform_conv_backward(t["input"], t["weight"], t["bias"], empty, t["offset"], t["mask"],
                                                 empty, *grads, t["grad_output"], **keywords)  # fmt: skip


# --- mmcv's own Python API ------------------------------------------------------------------------


def _run(ext, layer, *inputs):
    layer.zero_grad()
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    with swap_ext(ext):
        out = layer(*inputs)
        (out * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum().backward()
    return (
        [out.detach()] + [x.grad for x in inputs] + [p.grad.clone() for p in layer.parameters() if p.grad is not None]
    )


@pytest.mark.parametrize("bias", [True, False])
def test_modulated_deform_conv2d_layer_equals_compiled(compiled_ext, mmfix_ext, bias):
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(0)
    layer = ops.ModulatedDeformConv2d(8, 6, 3, stride=2, padding=1, groups=2, deform_groups=2, bias=bias)
    if bias:
        torch.nn.init.normal_(layer.bias)
    x = torch.randn(2, 8, 9, 8)
    offset = torch.randn(2, 2 * 2 * 9, 5, 4) * 2
    mask = torch.rand(2, 2 * 9, 5, 4)
    for actual, expected in zip(_run(mmfix_ext, layer, x, offset, mask), _run(compiled_ext, layer, x, offset, mask)):
        torch.testing.assert_close(actual, expected, **TOL)


@pytest.mark.parametrize("offset_init", ["zero", "random"])
def test_modulated_deform_conv2d_pack_equals_compiled(compiled_ext, mmfix_ext, offset_init):
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(1)
    layer = ops.ModulatedDeformConv2dPack(6, 8, 3, padding=1, deform_groups=2)
    if offset_init == "random":
        torch.nn.init.normal_(layer.conv_offset.weight, std=0.3)
    x = torch.randn(2, 6, 8, 7)
    for actual, expected in zip(_run(mmfix_ext, layer, x), _run(compiled_ext, layer, x)):
        torch.testing.assert_close(actual, expected, **TOL)


@pytest.mark.slow
def test_gradients_are_the_derivatives_float64(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    g = torch.Generator().manual_seed(5)
    f64 = {"generator": g, "dtype": torch.float64}
    x = torch.randn(1, 4, 4, 3, **f64).requires_grad_()
    weight = torch.randn(2, 2, 2, 2, **f64).requires_grad_()
    bias = torch.randn(2, **f64).requires_grad_()
    offset = (torch.randn(1, 2 * 2 * 4, 3, 2, **f64) * 1.5).requires_grad_()
    mask = torch.rand(1, 2 * 4, 3, 2, **f64).requires_grad_()

    def f(x, offset, mask, weight, bias):
        return ops.modulated_deform_conv2d(x, offset, mask, weight, bias, 1, 0, 1, 2, 2)

    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(f, (x, offset, mask, weight, bias), eps=1e-6, atol=1e-5)


def test_half_inputs_give_the_float32_result(compiled_ext, mmfix_ext):
    t, keywords = _call_args(channels=8, out_channels=4, seed=7)
    t["weight"] = t["weight"] * 0.1
    empty = torch.empty(0)
    _, expected_args, _ = call(compiled_ext, "modulated_deform_conv_forward", t["input"], t["weight"], t["bias"], empty,
                               t["offset"], t["mask"], torch.empty(2, 4, 7, 8), empty, **keywords)  # fmt: skip
    h = {k: v.half() for k, v in t.items()}
    output = torch.empty(2, 4, 7, 8, dtype=torch.half)
    mmfix_ext.modulated_deform_conv_forward(h["input"], h["weight"], h["bias"], empty.half(), h["offset"], h["mask"], output,
                                            empty.half(), **keywords)  # fmt: skip
    assert output.dtype == torch.half
    torch.testing.assert_close(output.float(), expected_args[6], rtol=1e-2, atol=2e-2)


def test_bad_arguments_are_named(mmfix_ext):
    t, keywords = _call_args()
    empty = torch.empty(0)
    out = torch.empty_like(t["grad_output"])
    with pytest.raises(ValueError, match="`mask` has shape"):
        mmfix_ext.modulated_deform_conv_forward(t["input"], t["weight"], t["bias"], empty, t["offset"], t["mask"][:, :4],
                                                out, empty, **keywords)  # fmt: skip
    with pytest.raises(ValueError, match="the bias has 5 elements"):
        mmfix_ext.modulated_deform_conv_forward(t["input"], t["weight"], t["bias"][:5], empty, t["offset"], t["mask"], out,
                                                empty, **keywords)  # fmt: skip
    with pytest.raises(ValueError, match="weight's kernel"):
        mmfix_ext.modulated_deform_conv_forward(t["input"], t["weight"], t["bias"], empty, t["offset"], t["mask"], out,
                                                empty, **{**keywords, "kernel_w": 2})  # fmt: skip


# --- torchvision's kernel as the forward's fast path ---------------------------------------------


TORCHVISION_CASES = (
    "3x3-bias",
    "no-bias",
    "far-offsets",
    "integer-offsets",
    "groups-and-deform-groups",
    "deform-groups-across-groups",
    "stride-dilation-no-pad",
    "kernel-larger-than-input",
)


@pytest.mark.parametrize("name", TORCHVISION_CASES)
def test_torchvision_forward_equals_the_pure_path(mmfix_ext, monkeypatch, name):
    # The fast path is taken on CUDA tensors; here it is forced on CPU to compare the two.
    from mmfix._ops import _deform_im2col, _torchvision

    tv = _torchvision.ops()
    if tv is None:
        pytest.skip("torchvision's compiled kernels do not load here (they do in the torch 2.14 + torchvision venv)")
    t, keywords = _call_args(**CASES[name])
    results = []
    for ops in (None, tv):
        monkeypatch.setattr(_deform_im2col, "torchvision_ops", lambda tensor, ops=ops: ops)
        output = torch.empty_like(t["grad_output"])
        mmfix_ext.modulated_deform_conv_forward(t["input"], t["weight"], t["bias"], torch.empty(0), t["offset"], t["mask"],
                                                output, torch.empty(0), **keywords)  # fmt: skip
        results.append(output)
    torch.testing.assert_close(results[1], results[0], **TOL)


def test_the_stand_in_serves_these_functions(mmfix_ext):
    for name in ['modulated_deform_conv_forward', 'modulated_deform_conv_backward']:
        assert mmfix_ext.__mmfix_families__[name] == "modulated_deform_conv"
        assert not hasattr(getattr(mmfix_ext, name), "__mmfix_unavailable__")
