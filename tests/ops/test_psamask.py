"""psamask_forward / psamask_backward (PSANet) against compiled mmcv 2.1.0's CPU kernel and the definition."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ops_support import assert_same_call, import_mmcv_ops, swap_ext

COLLECT, DISTRIBUTE = 0, 1


@pytest.fixture(params=["strided copies", "gather"])
def strategy(request, monkeypatch):
    """Both ways mmfix runs the op (CPU: strided copies; CUDA: gathers), here on CPU."""
    from mmfix._ops import psamask

    if request.param == "gather":
        monkeypatch.setattr(psamask, "_STRATEGIES", {})
    return request.param


def _geometry(num: int, h: int, w: int, hm: int, wm: int, half_h: int | None = None, half_w: int | None = None) -> dict:
    return dict(
        num_=num,
        h_feature=h,
        w_feature=w,
        h_mask=hm,
        w_mask=wm,
        half_h_mask=(hm - 1) // 2 if half_h is None else half_h,
        half_w_mask=(wm - 1) // 2 if half_w is None else half_w,
    )


def _reference_forward(mask: torch.Tensor, psa_type: int, g: dict, output: torch.Tensor) -> torch.Tensor:
    """Straight from the kernel's loops: paste every position's window onto the grid."""
    out = output.clone()
    h_feature, w_feature = g["h_feature"], g["w_feature"]
    for n in range(g["num_"]):
        for h in range(h_feature):
            for w in range(w_feature):
                for i in range(g["h_mask"]):
                    for j in range(g["w_mask"]):
                        y, x = i + h - g["half_h_mask"], j + w - g["half_w_mask"]
                        if 0 <= y < h_feature and 0 <= x < w_feature:
                            value = mask[n, i * g["w_mask"] + j, h, w]
                            if psa_type == COLLECT:
                                out[n, y * w_feature + x, h, w] = value
                            else:
                                out[n, h * w_feature + w, y, x] = value
    return out


SHAPES = [
    # (batch, H, W, h_mask, w_mask, half_h, half_w)
    (2, 5, 6, 3, 3, None, None),
    (1, 4, 4, 7, 5, None, None),  # window larger than the map
    (2, 6, 3, 2, 4, None, None),  # even mask sizes
    (1, 1, 1, 1, 1, None, None),
    (2, 3, 5, 5, 9, None, None),
    (1, 5, 5, 9, 9, None, None),  # PSANet's shape: mask = 2·feature - 1
    (1, 4, 5, 3, 3, 0, 2),  # an off-centre window
    (0, 3, 3, 3, 3, None, None),  # empty batch
]


@pytest.mark.parametrize("psa_type", [COLLECT, DISTRIBUTE])
@pytest.mark.parametrize(("num", "h", "w", "hm", "wm", "half_h", "half_w"), SHAPES)
def test_matches_compiled(compiled_ext, mmfix_ext, strategy, psa_type, num, h, w, hm, wm, half_h, half_w):
    g = _geometry(num, h, w, hm, wm, half_h, half_w)
    torch.manual_seed(num * 1000 + h * 100 + w * 10 + hm + psa_type)
    mask = torch.randn(num, hm * wm, h, w)
    # Random, not zero, outputs: the kernels write only where a window lands on the grid.
    output = torch.randn(num, h * w, h, w)
    assert_same_call(mmfix_ext, compiled_ext, "psamask_forward", mask, output, psa_type=psa_type, **g)
    grad_output = torch.randn(num, h * w, h, w)
    grad_input = torch.randn(num, hm * wm, h, w)
    assert_same_call(mmfix_ext, compiled_ext, "psamask_backward", grad_output, grad_input, psa_type=psa_type, **g)


@settings(max_examples=25, deadline=None)
@given(
    psa_type=st.sampled_from([COLLECT, DISTRIBUTE]),
    num=st.integers(1, 2),
    h=st.integers(1, 6),
    w=st.integers(1, 6),
    hm=st.integers(1, 8),
    wm=st.integers(1, 8),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_matches_compiled_on_random_geometry(compiled_ext, mmfix_ext, psa_type, num, h, w, hm, wm, dtype):
    from mmfix._ops import psamask

    g = _geometry(num, h, w, hm, wm)
    generator = torch.Generator().manual_seed(h * 64 + w * 8 + hm)
    mask = torch.randn(num, hm * wm, h, w, generator=generator, dtype=dtype)
    output = torch.zeros(num, h * w, h, w, dtype=dtype)
    grad_output = torch.randn(num, h * w, h, w, generator=generator, dtype=dtype)
    grad_input = torch.zeros(num, hm * wm, h, w, dtype=dtype)
    for strategies in (psamask._STRATEGIES, {}):  # strided copies, then gathers
        saved, psamask._STRATEGIES = psamask._STRATEGIES, strategies
        try:
            assert_same_call(mmfix_ext, compiled_ext, "psamask_forward", mask, output, psa_type=psa_type, **g)
            assert_same_call(
                mmfix_ext, compiled_ext, "psamask_backward", grad_output, grad_input, psa_type=psa_type, **g
            )
        finally:
            psamask._STRATEGIES = saved


@pytest.mark.parametrize("psa_type", [COLLECT, DISTRIBUTE])
def test_matches_the_definition(mmfix_ext, strategy, psa_type):
    """Without the compiled wheel too: the kernel's loops written out."""
    g = _geometry(2, 4, 5, 5, 3)
    torch.manual_seed(psa_type)
    mask = torch.randn(2, 15, 4, 5)
    output = torch.randn(2, 20, 4, 5)
    expected = _reference_forward(mask, psa_type, g, output)
    mmfix_ext.psamask_forward(mask, output, psa_type=psa_type, **g)
    assert torch.equal(output, expected)
    # The backward is the forward's transpose: <forward(m), go> == <m, backward(go)>.
    grad_output = torch.randn(2, 20, 4, 5)
    grad_input = torch.zeros_like(mask)
    mmfix_ext.psamask_backward(grad_output, grad_input, psa_type=psa_type, **g)
    pasted = _reference_forward(mask, psa_type, g, torch.zeros(2, 20, 4, 5))
    torch.testing.assert_close((pasted * grad_output).sum(), (mask * grad_input).sum())


def test_non_contiguous_tensors(mmfix_ext, strategy):
    """Results land in the tensors passed in, whatever their strides."""
    g = _geometry(2, 3, 4, 3, 3)
    mask = torch.randn(2, 9, 3, 4)
    for psa_type in (COLLECT, DISTRIBUTE):
        expected = torch.zeros(2, 12, 3, 4)
        mmfix_ext.psamask_forward(mask, expected, psa_type=psa_type, **g)
        strided = torch.zeros(2, 3, 4, 12).permute(0, 3, 1, 2)
        assert not strided.is_contiguous()
        strided_mask = mask.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
        mmfix_ext.psamask_forward(strided_mask, strided, psa_type=psa_type, **g)
        assert torch.equal(strided, expected)

        expected_grad = torch.zeros(2, 9, 3, 4)
        mmfix_ext.psamask_backward(expected, expected_grad, psa_type=psa_type, **g)
        strided_grad = torch.zeros(2, 3, 4, 9).permute(0, 3, 1, 2)
        mmfix_ext.psamask_backward(strided, strided_grad, psa_type=psa_type, **g)
        assert torch.equal(strided_grad, expected_grad)


@pytest.mark.parametrize("psa_type", ["collect", "distribute"])
@pytest.mark.parametrize(("h", "w", "mask_size"), [(6, 5, (5, 5)), (4, 7, (7, 13)), (5, 5, (9, 9))])
def test_mmcv_psamask_module(compiled_ext, mmfix_ext, strategy, psa_type, h, w, mask_size):
    """mmcv.ops.PSAMask (what MMSegmentation's PSAHead runs), forward and backward, on either extension."""
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(h * w)
    x = torch.randn(2, mask_size[0] * mask_size[1], h, w)
    grad = torch.randn(2, h * w, h, w)
    results = []
    for ext in (compiled_ext, mmfix_ext):
        leaf = x.clone().requires_grad_()
        with swap_ext(ext):
            out = ops.PSAMask(psa_type, mask_size)(leaf)
            out.backward(grad)
        results.append((out.detach(), leaf.grad))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=0, atol=0)
    torch.testing.assert_close(results[1][1], results[0][1], rtol=0, atol=0)


def test_gradcheck_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    from mmcv.ops.psa_mask import psa_mask

    x = torch.randn(1, 9, 3, 4, dtype=torch.float64, requires_grad=True)
    with swap_ext(mmfix_ext):
        assert ops.PSAMask("distribute", (3, 3))(x).shape == (1, 12, 3, 4)
        assert torch.autograd.gradcheck(lambda t: psa_mask(t, 0, (3, 3)), (x,))
        assert torch.autograd.gradcheck(lambda t: psa_mask(t, 1, (3, 3)), (x,))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(psa_type=2), r"psa_type must be 0 \(collect\) or 1 \(distribute\)"),
        (dict(h_mask=4), "`input` must have shape"),
        (dict(num_=3), "`input` must have shape"),
    ],
)
def test_bad_arguments_are_named(mmfix_ext, change, message):
    arguments = dict(psa_type=COLLECT, **_geometry(2, 3, 4, 3, 3))
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        mmfix_ext.psamask_forward(torch.randn(2, 9, 3, 4), torch.zeros(2, 12, 3, 4), **arguments)
    with pytest.raises(ValueError, match="`output` must have shape"):
        mmfix_ext.psamask_forward(
            torch.randn(2, 9, 3, 4), torch.zeros(2, 12, 4, 3), psa_type=COLLECT, **_geometry(2, 3, 4, 3, 3)
        )


def test_chunks_give_the_same_result(mmfix_ext, monkeypatch):
    from mmfix._ops import psamask

    monkeypatch.setattr(psamask, "_STRATEGIES", {})  # chunks are the gathering strategy's
    g = _geometry(2, 5, 6, 7, 7)
    mask = torch.randn(2, 49, 5, 6)
    whole = torch.zeros(2, 30, 5, 6)
    mmfix_ext.psamask_forward(mask, whole, psa_type=DISTRIBUTE, **g)
    monkeypatch.setattr(psamask, "_CHUNK_ELEMENTS", 100)  # one destination row per chunk
    chunked = torch.zeros(2, 30, 5, 6)
    mmfix_ext.psamask_forward(mask, chunked, psa_type=DISTRIBUTE, **g)
    assert torch.equal(whole, chunked)


@pytest.mark.slow  # importing MMSegmentation's models takes a while
@pytest.mark.parametrize("psa_type", ["collect", "distribute", "bi-direction"])
def test_mmseg_psa_head(compiled_ext, mmfix_ext, psa_type):
    """MMSegmentation's PSAHead (PSANet's decode head) on either extension: outputs and gradients."""
    import_mmcv_ops(mmfix_ext)
    pytest.importorskip("mmseg", reason="MMSegmentation is installed with requirements/toolboxes.txt")
    from mmengine.registry import DefaultScope
    from mmseg.models.decode_heads.psa_head import PSAHead

    torch.manual_seed(0)
    # PSANet's geometry, scaled down: the mask is 2·(shrunk feature) - 1 on a side. Built in
    # MMSegmentation's scope (its loss is looked up there): an earlier test in the same process
    # may have left another toolbox's scope current.
    with DefaultScope.overwrite_default_scope("mmseg"):
        head = PSAHead(
            mask_size=(9, 9), psa_type=psa_type, compact=False, shrink_factor=2, in_channels=16, channels=8,
            num_classes=3, dropout_ratio=0.0, norm_cfg=dict(type="BN"),
        )  # fmt: skip
    head.train()
    features = torch.randn(2, 16, 10, 10)
    grad = torch.randn(2, 3, 10, 10)
    results = []
    for ext in (compiled_ext, mmfix_ext):
        leaf = features.clone().requires_grad_()
        head.zero_grad()
        with swap_ext(ext):
            out = head([leaf])
            out.backward(grad)
        results.append([out.detach(), leaf.grad, *(p.grad.clone() for p in head.parameters())])
    for actual, expected in zip(results[1], results[0]):
        torch.testing.assert_close(actual, expected)
