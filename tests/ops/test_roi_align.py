"""roi_align forward and backward: the values (and max-pooling argmax) of compiled mmcv 2.1.0."""

from __future__ import annotations

import itertools

import pytest
import torch
from box_samples import fpn_rois

from mmfix._ops import _torchvision
from mmfix._ops import roi_align as roi_align_module
from ops_support import assert_same_call, import_mmcv_ops, swap_ext


@pytest.fixture(autouse=True)
def pure(monkeypatch):
    monkeypatch.setattr(_torchvision, "_ops", None)


#: mmfix reads windows of the maps channel-last (after one copy) or straight from the maps,
#: depending on how much the windows cover: both ways are tested.
LAYOUTS = {"channels-last": 1e12, "channels-first": 0.0}


@pytest.fixture(params=list(LAYOUTS))
def layout(request, monkeypatch):
    monkeypatch.setattr(roi_align_module, "CHANNELS_LAST_GAIN", LAYOUTS[request.param])
    return request.param


def _rois(generator, count, batch, height, width, scale, *, spread=1.4, largest=0.7):
    """RoIs in image coordinates: some beyond the map's edges, some tiny, some larger than it."""
    extent = torch.tensor([width, height], dtype=torch.float32) / scale
    centre = (torch.rand(count, 2, generator=generator) * spread - (spread - 1) / 2) * extent
    size = torch.rand(count, 2, generator=generator) ** 2 * largest * extent
    index = torch.randint(0, batch, (count, 1), generator=generator).float()
    rois = torch.cat([index, centre - size / 2, centre + size / 2], 1)
    rois[0, 1:] = torch.tensor([0.0, 0.0, width / scale, height / scale])  # the whole map
    if count > 2:
        rois[1, 3:] = rois[1, 1:3]  # zero size
    if count > 3:
        rois[2, 3:] = rois[2, 1:3] + 0.3 / scale  # under a pixel
    return rois


def _compare(
    compiled_ext, mmfix_ext, features, rois, ph, pw, scale, sampling_ratio, pool_mode, aligned, rtol=1e-5, atol=1e-5
):
    k, c = rois.shape[0], features.shape[1]
    shape = (k, c, ph, pw)
    output = features.new_zeros(shape)
    argmax = features.new_zeros(shape) if pool_mode == 0 else features.new_zeros(0)
    kwargs = dict(
        aligned_height=ph,
        aligned_width=pw,
        spatial_scale=scale,
        sampling_ratio=sampling_ratio,
        pool_mode=pool_mode,
        aligned=aligned,
    )
    _, after = assert_same_call(
        mmfix_ext,
        compiled_ext,
        "roi_align_forward",
        features,
        rois,
        output,
        argmax,
        argmax.clone(),
        rtol=rtol,
        atol=atol,
        **kwargs,
    )
    g = torch.Generator().manual_seed(k * c)
    grad_output = torch.randn(shape, generator=g, dtype=features.dtype)
    grad_input = torch.randn(features.shape, generator=g, dtype=features.dtype)  # the kernels add into it
    assert_same_call(
        mmfix_ext,
        compiled_ext,
        "roi_align_backward",
        grad_output,
        rois,
        after[3],
        after[4],
        grad_input,
        rtol=rtol,
        atol=atol,
        **kwargs,
    )
    return after


GRID = list(
    itertools.product(
        [(1, 3, 9, 13), (2, 4, 16, 11)],  # N, C, H, W
        [(2, 3), (7, 7)],  # pooled size
        [1.0, 0.25],  # spatial scale
        [0, 1, 2, 3],  # sampling ratio (0: adaptive)
        [True, False],  # aligned
        [1, 0],  # avg, max
    )
)


@pytest.mark.parametrize(("shape", "pooled", "scale", "sampling_ratio", "aligned", "pool_mode"), GRID)
def test_roi_align_as_compiled(
    compiled_ext, mmfix_ext, layout, shape, pooled, scale, sampling_ratio, aligned, pool_mode
):
    n, _, h, w = shape
    g = torch.Generator().manual_seed(sum(shape) + sampling_ratio)
    features = torch.randn(shape, generator=g)
    rois = _rois(g, 9, n, h, w, scale)
    _compare(compiled_ext, mmfix_ext, features, rois, *pooled, scale, sampling_ratio, pool_mode, aligned)


@pytest.mark.parametrize("pool_mode", [1, 0])
def test_small_chunks(compiled_ext, mmfix_ext, monkeypatch, layout, pool_mode):
    for name, value in {"WINDOW_BUDGET": 50, "SAMPLE_CHUNK": 2, "MAX_POOL_BUDGET": 30}.items():
        monkeypatch.setattr(roi_align_module, name, value)
    g = torch.Generator().manual_seed(2)
    features = torch.randn(2, 5, 30, 41, generator=g)
    rois = _rois(g, 40, 2, 30, 41, 0.5, largest=1.5)
    _compare(compiled_ext, mmfix_ext, features, rois, 7, 7, 0.5, 0, pool_mode, True)


@pytest.mark.parametrize("pool_mode", [1, 0])
def test_max_pooling_ties_and_plateaus(compiled_ext, mmfix_ext, layout, pool_mode):
    # Constant and stepped maps: many samples share the maximum; the first one wins.
    g = torch.Generator().manual_seed(4)
    features = torch.randn(1, 3, 12, 12, generator=g).round()
    features[:, 1] = 2.0
    features[:, 2] = -20000.0  # below the CPU kernel's -10000 start: nothing beats it
    rois = _rois(g, 12, 1, 12, 12, 1.0)
    _compare(compiled_ext, mmfix_ext, features, rois, 3, 3, 1.0, 2, pool_mode, False)


def test_no_rois(compiled_ext, mmfix_ext):
    features = torch.randn(1, 2, 5, 5)
    _compare(compiled_ext, mmfix_ext, features, torch.zeros(0, 5), 7, 7, 1.0, 0, 1, True)


def test_float64(compiled_ext, mmfix_ext, layout):
    g = torch.Generator().manual_seed(5)
    features = torch.randn(2, 3, 10, 14, generator=g, dtype=torch.float64)
    rois = _rois(g, 10, 2, 10, 14, 0.5).double()
    for pool_mode in (1, 0):
        _compare(compiled_ext, mmfix_ext, features, rois, 4, 4, 0.5, 0, pool_mode, True, rtol=1e-12, atol=1e-12)


def test_map_layouts(compiled_ext, mmfix_ext):
    g = torch.Generator().manual_seed(6)
    features = torch.randn(2, 6, 12, 15, generator=g)
    rois = _rois(g, 10, 2, 12, 15, 1.0)
    compiled_features = features.contiguous()
    for variant in (
        features.contiguous(memory_format=torch.channels_last),
        features.transpose(2, 3).contiguous().transpose(2, 3),
    ):
        for pool_mode in (1, 0):
            shape = (10, 6, 5, 5)
            kwargs = dict(
                aligned_height=5,
                aligned_width=5,
                spatial_scale=1.0,
                sampling_ratio=0,
                pool_mode=pool_mode,
                aligned=True,
            )
            expected = torch.zeros(shape)
            argmax = [torch.zeros(shape) if pool_mode == 0 else torch.zeros(0) for _ in range(4)]
            compiled_ext.roi_align_forward(compiled_features, rois, expected, argmax[0], argmax[1], **kwargs)
            actual = torch.zeros(shape)
            mmfix_ext.roi_align_forward(variant, rois, actual, argmax[2], argmax[3], **kwargs)
            torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_half_within_half_precision(compiled_ext, mmfix_ext):
    g = torch.Generator().manual_seed(7)
    features = torch.randn(2, 4, 20, 20, generator=g)
    rois = _rois(g, 12, 2, 20, 20, 0.5)
    for pool_mode in (1, 0):
        shape = (12, 4, 7, 7)
        kwargs = dict(
            aligned_height=7, aligned_width=7, spatial_scale=0.5, sampling_ratio=2, pool_mode=pool_mode, aligned=True
        )
        expected = torch.zeros(shape)
        spare = torch.zeros(shape) if pool_mode == 0 else torch.zeros(0)
        compiled_ext.roi_align_forward(features, rois, expected, spare, spare.clone(), **kwargs)
        actual = torch.zeros(shape, dtype=torch.half)
        spare = spare.half()
        mmfix_ext.roi_align_forward(features.half(), rois.half(), actual, spare, spare.clone(), **kwargs)
        torch.testing.assert_close(actual.float(), expected, rtol=1e-2, atol=2e-2)
        grad_input = torch.zeros(2, 4, 20, 20, dtype=torch.half)
        mmfix_ext.roi_align_backward(
            torch.ones(shape, dtype=torch.half), rois.half(), spare, spare.clone(), grad_input, **kwargs
        )
        assert torch.isfinite(grad_input).all()


@pytest.mark.slow
@pytest.mark.parametrize(("count", "pooled", "sampling_ratio"), [(512, 7, 0), (200, 14, 0), (300, 7, 2)])
def test_fpn_level_sizes(compiled_ext, mmfix_ext, count, pooled, sampling_ratio):
    # P2 of a 1333x800 batch of 2 (stride 4), RoIs of 16-112 pixels: the sizes MMDetection maps there.
    g = torch.Generator().manual_seed(count)
    features = torch.randn(2, 32, 200, 336, generator=g)
    rois = fpn_rois(count, seed=count)
    for pool_mode in (1, 0):
        _compare(
            compiled_ext,
            mmfix_ext,
            features,
            rois,
            pooled,
            pooled,
            0.25,
            sampling_ratio,
            pool_mode,
            True,
            rtol=1e-4,
            atol=1e-5,
        )


def test_negative_size_is_refused_as_compiled_refuses_it(compiled_ext, mmfix_ext):
    features = torch.randn(1, 2, 8, 8)
    rois = torch.tensor([[0.0, 5.0, 5.0, 2.0, 6.0]])
    kwargs = dict(aligned_height=2, aligned_width=2, spatial_scale=1.0, sampling_ratio=0, pool_mode=1, aligned=True)
    empty = torch.zeros(0)
    with pytest.raises(RuntimeError):
        compiled_ext.roi_align_forward(features, rois, torch.zeros(1, 2, 2, 2), empty, empty, **kwargs)
    with pytest.raises(ValueError, match="negative size"):
        mmfix_ext.roi_align_forward(features, rois, torch.zeros(1, 2, 2, 2), empty, empty, **kwargs)
    # Not aligned: the legacy 1-pixel minimum, no error.
    _compare(compiled_ext, mmfix_ext, features, rois, 2, 2, 1.0, 0, 1, False)


def test_bad_input_is_refused_clearly(mmfix_ext):
    features = torch.randn(1, 2, 8, 8)
    out = torch.zeros(1, 2, 2, 2)
    empty = torch.zeros(0)
    kwargs = dict(aligned_height=2, aligned_width=2, spatial_scale=1.0, sampling_ratio=0, pool_mode=1, aligned=True)
    with pytest.raises(ValueError, match="batch index"):
        mmfix_ext.roi_align_forward(features, torch.tensor([[1.0, 0, 0, 2, 2]]), out, empty, empty, **kwargs)
    with pytest.raises(TypeError, match="dtype"):
        mmfix_ext.roi_align_forward(features, torch.tensor([[0.0, 0, 0, 2, 2]]).double(), out, empty, empty, **kwargs)
    with pytest.raises(ValueError, match="NaN"):
        mmfix_ext.roi_align_forward(features, torch.tensor([[0.0, float("nan"), 0, 2, 2]]), out, empty, empty, **kwargs)
    with pytest.raises(ValueError, match=r"\(K, 5\)"):
        mmfix_ext.roi_align_forward(features, torch.zeros(1, 4), out, empty, empty, **kwargs)
    with pytest.raises(ValueError, match="pool_mode"):
        mmfix_ext.roi_align_forward(features, torch.zeros(1, 5), out, empty, empty, **{**kwargs, "pool_mode": 3})


# --- through mmcv's RoIAlign ------------------------------------------------------------------


@pytest.mark.parametrize("pool_mode", ["avg", "max"])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_mmcv_roi_align_module(compiled_ext, mmfix_ext, pool_mode, aligned, sampling_ratio):
    ops = import_mmcv_ops(mmfix_ext)
    g = torch.Generator().manual_seed(8)
    features = torch.randn(2, 8, 25, 34, generator=g)
    rois = fpn_rois(40, image=(136, 100), sizes=(4.0, 60.0), seed=8)
    layer = ops.RoIAlign(
        (7, 7), spatial_scale=0.25, sampling_ratio=sampling_ratio, pool_mode=pool_mode, aligned=aligned
    )
    weights = torch.randn(40, 8, 7, 7, generator=g)
    results = []
    for ext in (compiled_ext, mmfix_ext):
        x = features.clone().requires_grad_()
        with swap_ext(ext):
            out = layer(x, rois)
            (out * weights).sum().backward()
        results.append((out.detach(), x.grad))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(results[1][1], results[0][1], rtol=1e-5, atol=1e-5)


def test_gradient_of_the_forward(mmfix_ext):
    """The backward is the forward's derivative (average pooling is linear in the input)."""
    ops = import_mmcv_ops(mmfix_ext)
    from mmcv.ops.roi_align import RoIAlignFunction

    g = torch.Generator().manual_seed(9)
    features = torch.randn(1, 2, 6, 7, generator=g, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[0, 0.5, 0.7, 5.2, 4.9], [0, 2.0, 1.0, 6.5, 3.2]], dtype=torch.float64)
    assert ops is not None
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(
            lambda x: RoIAlignFunction.apply(x, rois, (3, 2), 1.0, 2, "avg", True), (features,), fast_mode=True
        )


# --- torchvision's kernel (where it loads: the tv environment) ------------------------------


@pytest.fixture
def torchvision_ops(monkeypatch):
    monkeypatch.setattr(_torchvision, "_ops", _torchvision._UNSET)
    monkeypatch.setenv("MMFIX_OPS_TORCHVISION", "1")
    from mmfix import _settings

    _settings.refresh()
    if _torchvision.ops() is None:
        pytest.skip("torchvision's kernels do not load with this torch")
    yield _torchvision.ops()
    _settings.refresh()


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("sampling_ratio", [0, 1, 2])
def test_torchvision_roi_align_computes_what_the_pure_path_computes(
    torchvision_ops, monkeypatch, aligned, sampling_ratio
):
    # The fast path serves CUDA tensors; its convention is checked here, on the CPU kernel.
    monkeypatch.setattr(_torchvision, "FAST_PATHS", frozenset({("roi_align", "cpu")}))
    g = torch.Generator().manual_seed(10)
    features = torch.randn(2, 5, 18, 23, generator=g)
    rois = _rois(g, 30, 2, 18, 23, 0.5)
    shape = (30, 5, 7, 7)
    kwargs = dict(
        aligned_height=7,
        aligned_width=7,
        spatial_scale=0.5,
        sampling_ratio=sampling_ratio,
        pool_mode=1,
        aligned=aligned,
    )
    empty = torch.zeros(0)
    grad_output = torch.randn(shape, generator=g)
    results = []
    for paths in (frozenset({("roi_align", "cpu")}), frozenset()):
        monkeypatch.setattr(_torchvision, "FAST_PATHS", paths)
        out = torch.zeros(shape)
        roi_align_module.roi_align_forward(features, rois, out, empty, empty, **kwargs)
        grad = torch.zeros_like(features)
        roi_align_module.roi_align_backward(grad_output, rois, empty, empty, grad, **kwargs)
        results.append((out, grad))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(results[0][1], results[1][1], rtol=1e-5, atol=1e-5)


# --- outputs of other shapes: the kernel writes through their data pointers -----------------------


@pytest.mark.parametrize("pool_mode", [0, 1])
@pytest.mark.parametrize(
    "shape", [(4, 3, 3, 2), (4, 18), (72,), (2, 3, 3, 2), (41,), "transposed"], ids=lambda s: str(s).replace(" ", "")
)
def test_outputs_of_other_shapes_are_written_as_compiled_writes_them(compiled_ext, mmfix_ext, pool_mode, shape):
    # The kernel pools output.numel() / (C * ph * pw) RoIs from the start of `rois` and writes
    # output (and argmax_y / argmax_x) row-major from their first element, whatever their shape.
    g = torch.Generator().manual_seed(21)
    x = torch.randn(2, 3, 12, 14, generator=g)
    rois = torch.tensor([[0, 1, 1, 8, 9], [1, 2, 3, 10, 11], [0, 0, 0, 5, 5], [1, 4, 2, 13, 7.0]])
    kw = dict(aligned_height=3, aligned_width=2, spatial_scale=1.0, sampling_ratio=2, pool_mode=pool_mode, aligned=True)
    if shape == "transposed":
        output = torch.full((2, 3, 3, 4), 9.0).permute(3, 2, 1, 0)  # (4, 3, 3, 2), not contiguous
    else:
        output = torch.full(shape, 9.0)
    argmax = [torch.full_like(output, 7.0), torch.full_like(output, 7.0)] if pool_mode == 0 else [torch.empty(0)] * 2
    assert_same_call(mmfix_ext, compiled_ext, "roi_align_forward", x, rois, output, *argmax, **kw)
    if pool_mode == 0 and shape == (72,):  # and the backward reads them so, for the RoIs of grad_output
        grad_output = torch.randn(3, 3, 3, 2, generator=g)
        compiled_ext.roi_align_forward(x, rois, output, *argmax, **kw)
        assert_same_call(mmfix_ext, compiled_ext, "roi_align_backward", grad_output, rois, *argmax,
                         torch.zeros_like(x), **kw)  # fmt: skip


def test_more_rois_than_given_are_refused(mmfix_ext):
    # The kernel would read RoIs past the end of `rois`: a clear error instead.
    x = torch.randn(1, 2, 6, 6)
    rois = torch.tensor([[0, 1, 1, 4, 4.0]])
    kw = dict(aligned_height=2, aligned_width=2, spatial_scale=1.0, sampling_ratio=2, pool_mode=1, aligned=True)
    empty = torch.empty(0)
    with pytest.raises(ValueError, match=r"room for 2 RoIs.*`rois` holds 1"):
        mmfix_ext.roi_align_forward(x, rois, torch.zeros(2, 2, 2, 2), empty, empty, **kw)
    with pytest.raises(ValueError, match=r"grad_output of shape \(1, 2, 2, 2\) \(or fewer RoIs\)"):
        mmfix_ext.roi_align_backward(torch.zeros(2, 2, 2, 2), rois, empty, empty, torch.zeros_like(x), **kw)
