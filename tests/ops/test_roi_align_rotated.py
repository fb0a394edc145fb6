"""roi_align_rotated forward/backward: mmfix's PyTorch version against mmcv 2.1.0's compiled CPU kernel."""

from __future__ import annotations

import pytest
import torch

from mmfix._ops import roi_align_rotated as family
from mmfix._ops._rotated_checks import OpArgumentError
from ops_support import assert_same_call, import_mmcv_ops, swap_ext

TOL = {"rtol": 1e-5, "atol": 1e-5}


def _case(seed, batch=2, channels=5, height=17, width=23, num_rois=30, max_size=20.0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    features = torch.randn(batch, channels, height, width, generator=gen).to(dtype)
    rois = torch.zeros(num_rois, 6)
    rois[:, 0] = torch.randint(0, batch, (num_rois,), generator=gen).float()
    # Centres also outside the map (down to -6 and past the far border) and up to 2x the map
    # for spatial_scale 0.5; sizes from 0.
    rois[:, 1] = torch.rand(num_rois, generator=gen) * (width + 6) * 2 - 6
    rois[:, 2] = torch.rand(num_rois, generator=gen) * (height + 6) * 2 - 6
    rois[:, 3:5] = torch.rand(num_rois, 2, generator=gen) * max_size
    rois[:, 5] = (torch.rand(num_rois, generator=gen) - 0.5) * 7
    return features, rois.to(dtype)


def _both(compiled_ext, mmfix_ext, features, rois, pooled, scale, sampling_ratio, aligned, clockwise, tol=TOL):
    params = {
        "pooled_height": pooled[0],
        "pooled_width": pooled[1],
        "spatial_scale": scale,
        "sampling_ratio": sampling_ratio,
        "aligned": aligned,
        "clockwise": clockwise,
    }
    output = features.new_zeros(rois.shape[0], features.shape[1], *pooled)
    assert_same_call(mmfix_ext, compiled_ext, "roi_align_rotated_forward", features, rois, output, **params, **tol)
    grad_output = torch.randn(output.shape, generator=torch.Generator().manual_seed(99)).to(features.dtype)
    grad_input = torch.zeros_like(features)
    # Called by position, as mmcv calls it (the binding's keyword names are in another order).
    assert_same_call(
        mmfix_ext, compiled_ext, "roi_align_rotated_backward", grad_output, rois, grad_input, **params, **tol
    )


def test_the_family_supplies_the_names(mmfix_ext):
    for name in ("roi_align_rotated_forward", "roi_align_rotated_backward"):
        assert mmfix_ext.__mmfix_families__[name] == "roi_align_rotated"


@pytest.mark.parametrize("sampling_ratio", [0, 1, 2, 3])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("clockwise", [True, False])
def test_random_rois(compiled_ext, mmfix_ext, sampling_ratio, aligned, clockwise):
    features, rois = _case(sampling_ratio * 4 + 2 * aligned + clockwise)
    _both(compiled_ext, mmfix_ext, features, rois, (7, 7), 0.5, sampling_ratio, aligned, clockwise)


@pytest.mark.parametrize("pooled", [(3, 5), (1, 1), (2, 7)])
@pytest.mark.parametrize("scale", [1.0, 0.25])
def test_pooled_sizes_and_scales(compiled_ext, mmfix_ext, pooled, scale):
    features, rois = _case(17, max_size=40.0)
    _both(compiled_ext, mmfix_ext, features, rois, pooled, scale, 0, True, False)


def test_rois_larger_than_the_chunks(compiled_ext, mmfix_ext, monkeypatch):
    """Big RoIs with sampling_ratio 0 have thousands of samples per bin: memory stays bounded
    by chunking RoIs and taps, and the chunks change nothing."""
    monkeypatch.setattr(family, "TAP_CHUNK", 3000)
    monkeypatch.setattr(family, "VALUE_CHUNK", 5000)
    features, rois = _case(5, height=40, width=50, num_rois=12, max_size=120.0)
    _both(compiled_ext, mmfix_ext, features, rois, (7, 7), 1.0, 0, True, True)


def test_degenerate_rois(compiled_ext, mmfix_ext):
    """Zero-sized RoIs (aligned: no samples, output 0; not aligned: sizes floored at 1), RoIs
    on the border, a 1 x 1 feature map."""
    features, rois = _case(6, num_rois=8)
    rois[:4, 3:5] = 0.0
    rois[4, 1:3] = torch.tensor([0.0, 0.0])
    rois[5, 1:3] = torch.tensor([23.0 * 2, 17.0 * 2])
    for aligned in (True, False):
        _both(compiled_ext, mmfix_ext, features, rois, (7, 7), 0.5, 0, aligned, False)
    tiny, tiny_rois = _case(7, height=1, width=1, num_rois=5, max_size=3.0)
    _both(compiled_ext, mmfix_ext, tiny, tiny_rois, (2, 2), 1.0, 2, True, False)


def test_float64(compiled_ext, mmfix_ext):
    features, rois = _case(8, dtype=torch.float64)
    _both(compiled_ext, mmfix_ext, features, rois, (7, 7), 0.5, 2, True, False, {"rtol": 1e-10, "atol": 1e-10})


def test_float16_within_half_tolerance(compiled_ext, mmfix_ext):
    """The kernels take half; mmfix computes it in float32 (the compiled CPU kernel in half)."""
    features, rois = _case(9)
    half_out = torch.zeros(rois.shape[0], features.shape[1], 7, 7, dtype=torch.float16)
    mmfix_ext.roi_align_rotated_forward(
        features.half(),
        rois.half(),
        half_out,
        pooled_height=7,
        pooled_width=7,
        spatial_scale=0.5,
        sampling_ratio=2,
        aligned=True,
        clockwise=False,
    )
    full_out = torch.zeros(rois.shape[0], features.shape[1], 7, 7)
    compiled_ext.roi_align_rotated_forward(
        features.half().float(),
        rois.half().float(),
        full_out,
        pooled_height=7,
        pooled_width=7,
        spatial_scale=0.5,
        sampling_ratio=2,
        aligned=True,
        clockwise=False,
    )
    torch.testing.assert_close(half_out.float(), full_out, rtol=1e-2, atol=2e-3)


def test_empty(compiled_ext, mmfix_ext):
    features, rois = _case(10, num_rois=0)
    _both(compiled_ext, mmfix_ext, features, rois, (7, 7), 0.5, 2, True, False)


# --- mmcv's own module and autograd Function -----------------------------------------------


@pytest.mark.parametrize("clockwise", [True, False])
def test_through_mmcv_roi_align_rotated(compiled_ext, mmfix_ext, clockwise):
    ops = import_mmcv_ops(mmfix_ext)
    features, rois = _case(11, channels=8, num_rois=40)
    layer = ops.RoIAlignRotated((7, 7), spatial_scale=0.5, sampling_ratio=2, aligned=True, clockwise=clockwise)
    results = []
    for ext in (compiled_ext, mmfix_ext):
        x = features.clone().requires_grad_()
        with swap_ext(ext):
            out = layer(x, rois)
            (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        results.append((out.detach(), x.grad))
    (expected, expected_grad), (actual, actual_grad) = results
    torch.testing.assert_close(actual, expected, **TOL)
    torch.testing.assert_close(actual_grad, expected_grad, **TOL)
    assert expected_grad.abs().sum() > 0


def test_gradcheck_through_mmcv(mmfix_ext):
    """float64 gradcheck of mmcv's RoIAlignRotatedFunction on mmfix's forward and backward."""
    ops = import_mmcv_ops(mmfix_ext)
    from mmcv.ops.roi_align_rotated import RoIAlignRotatedFunction

    features, rois = _case(12, batch=2, channels=2, height=6, width=7, num_rois=4, max_size=6.0, dtype=torch.float64)
    rois[:, 1:3] = rois[:, 1:3] / 4  # inside the small map
    x = features.requires_grad_()
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(
            lambda t: RoIAlignRotatedFunction.apply(t, rois, (3, 3), 1.0, 2, True, False), (x,), eps=1e-6, atol=1e-6
        )
    assert ops is not None


# --- bad input --------------------------------------------------------------------------------


def test_bad_input_is_named(mmfix_ext):
    features, rois = _case(13, num_rois=3)
    out = torch.zeros(3, 5, 7, 7)
    kw = {"pooled_height": 7, "pooled_width": 7, "spatial_scale": 0.5, "sampling_ratio": 2, "clockwise": False}
    with pytest.raises(OpArgumentError, match=r"`rois` must have shape \(N, 6\)"):
        mmfix_ext.roi_align_rotated_forward(features, rois[:, :5], out, aligned=True, **kw)
    with pytest.raises(OpArgumentError, match=r"batch index.*\[0, 2\)"):
        bad = rois.clone()
        bad[0, 0] = 2
        mmfix_ext.roi_align_rotated_forward(features, bad, out, aligned=True, **kw)
    with pytest.raises(OpArgumentError, match=r"non-negative width and height"):
        bad = rois.clone()
        bad[1, 3] = -1
        mmfix_ext.roi_align_rotated_forward(features, bad, out, aligned=True, **kw)
    with pytest.raises(OpArgumentError, match=r"must be 4-D"):
        mmfix_ext.roi_align_rotated_forward(features[0], rois, out, aligned=True, **kw)
    with pytest.raises(OpArgumentError, match=r"`output` has 3 elements"):
        mmfix_ext.roi_align_rotated_forward(features, rois, torch.zeros(3), aligned=True, **kw)
