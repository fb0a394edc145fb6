"""nms_rotated: mmfix's PyTorch version against mmcv 2.1.0's compiled CPU kernel (keep lists identical)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmfix._ops import _greedy_nms
from mmfix._ops._rotated_checks import OpArgumentError
from ops_support import assert_same_call, import_mmcv_ops, swap_ext

from .rotated_cases import chain_boxes, clustered_boxes, degenerate_pairs, random_boxes

NO_LABELS = torch.empty(0, dtype=torch.int)


def _keep(compiled_ext, mmfix_ext, dets, scores, threshold, labels=None):
    """Both kernels called as mmcv.ops.nms_rotated calls them; the keep lists must be identical."""
    multi_label = labels is not None
    dets_wl = torch.cat((dets, labels.unsqueeze(1).to(dets)), 1) if multi_label else dets
    order = scores.sort(0, descending=True)[1]
    keep, _ = assert_same_call(
        mmfix_ext,
        compiled_ext,
        "nms_rotated",
        dets_wl,
        scores,
        order,
        dets_wl.index_select(0, order),
        labels if multi_label else NO_LABELS,
        threshold,
        int(multi_label),
    )
    return keep


def test_the_family_supplies_the_name(mmfix_ext):
    assert mmfix_ext.__mmfix_families__["nms_rotated"] == "nms_rotated"


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("threshold", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_clustered_detections(compiled_ext, mmfix_ext, seed, threshold):
    gen = torch.Generator().manual_seed(seed)
    n = [40, 300, 700, 1][seed]  # 700 spans three blocks of mmfix's greedy pass
    dets = clustered_boxes(gen, n, clusters=max(1, n // 25))
    scores = torch.rand(n, generator=gen)
    keep = _keep(compiled_ext, mmfix_ext, dets, scores, threshold)
    if n > 1:
        assert 0 < keep.numel() < n or threshold >= 0.9


def test_tied_scores(compiled_ext, mmfix_ext):
    gen = torch.Generator().manual_seed(1)
    dets = clustered_boxes(gen, 400, clusters=12)
    scores = (torch.rand(400, generator=gen) * 4).round() / 4  # five distinct values
    _keep(compiled_ext, mmfix_ext, dets, scores, 0.3)


@pytest.mark.parametrize("threshold", [0.0, 1.0, -0.5, 1.5])
def test_extreme_thresholds(compiled_ext, mmfix_ext, threshold):
    """At 0 the CPU kernel suppresses boxes that do not even meet (IoU 0 >= 0)."""
    gen = torch.Generator().manual_seed(2)
    dets = random_boxes(gen, 90, spread=40.0)
    keep = _keep(compiled_ext, mmfix_ext, dets, torch.rand(90, generator=gen), threshold)
    if threshold <= 0:
        assert keep.numel() == 1


def test_chains_of_boxes(compiled_ext, mmfix_ext):
    """Each box overlaps only the next: greedy keeps every other one; resolving that takes
    mmfix's blockwise pass its longest (a round per box)."""
    dets = chain_boxes(600)
    scores = torch.linspace(1, 0, 600)
    keep = _keep(compiled_ext, mmfix_ext, dets, scores, 0.2)
    assert keep.numel() == 300


def test_small_blocks_change_nothing(compiled_ext, mmfix_ext, monkeypatch):
    monkeypatch.setattr(_greedy_nms, "BLOCK", 5)
    gen = torch.Generator().manual_seed(3)
    dets = clustered_boxes(gen, 120, clusters=6)
    _keep(compiled_ext, mmfix_ext, dets, torch.rand(120, generator=gen), 0.25)
    _keep(compiled_ext, mmfix_ext, chain_boxes(37), torch.linspace(1, 0, 37), 0.2)


def test_degenerate_boxes(compiled_ext, mmfix_ext):
    b1, b2 = degenerate_pairs(torch.Generator().manual_seed(4), 20)
    dets = torch.cat((b1, b2))
    gen = torch.Generator().manual_seed(5)
    for threshold in (0.05, 0.5, 0.95):
        _keep(compiled_ext, mmfix_ext, dets, torch.rand(dets.shape[0], generator=gen), threshold)


def test_labels_separate_nothing(compiled_ext, mmfix_ext):
    """With multi_label the label is a sixth column that both mmcv kernels skip."""
    gen = torch.Generator().manual_seed(6)
    dets = clustered_boxes(gen, 200, clusters=8)
    scores = torch.rand(200, generator=gen)
    labels = torch.randint(0, 3, (200,), generator=gen)
    with_labels = _keep(compiled_ext, mmfix_ext, dets, scores, 0.3, labels)
    without = _keep(compiled_ext, mmfix_ext, dets, scores, 0.3)
    assert torch.equal(with_labels, without)


def test_float64(compiled_ext, mmfix_ext):
    gen = torch.Generator().manual_seed(7)
    dets = clustered_boxes(gen, 150, clusters=5).double()
    _keep(compiled_ext, mmfix_ext, dets, torch.rand(150, generator=gen, dtype=torch.float64), 0.4)


def test_float16_is_computed_in_float32(mmfix_ext):
    """The CUDA kernel takes half boxes (the CPU kernel does not): mmfix computes them in float32."""
    gen = torch.Generator().manual_seed(8)
    dets = clustered_boxes(gen, 100, clusters=5, spread=20.0).half()
    scores = torch.rand(100, generator=gen).half()
    order = scores.sort(0, descending=True)[1]
    half = mmfix_ext.nms_rotated(dets, scores, order, dets[order], NO_LABELS, 0.3, 0)
    single = mmfix_ext.nms_rotated(dets.float(), scores.float(), order, dets[order].float(), NO_LABELS, 0.3, 0)
    assert torch.equal(half, single)


def test_empty(compiled_ext, mmfix_ext):
    keep = _keep(compiled_ext, mmfix_ext, torch.zeros(0, 5), torch.zeros(0), 0.5)
    assert keep.dtype == torch.long and keep.numel() == 0


_coordinate = st.one_of(st.integers(-6, 6).map(lambda v: v / 2), st.floats(-4, 4, width=32))
_side = st.one_of(st.sampled_from([0.0, 1.0, 2.0, 3.0]), st.floats(0, 5, width=32))
_angle = st.one_of(st.integers(-4, 4).map(lambda v: v * math.pi / 4), st.floats(-4, 4, width=32))
_detection = st.tuples(_coordinate, _coordinate, _side, _side, _angle, st.sampled_from([0.1, 0.5, 0.9]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_detection, min_size=1, max_size=30),
    st.sampled_from([0.0, 1 / 3, 0.25, 0.5, 0.7]) | st.floats(0, 1, width=32),
)
def test_hypothesis_detections(compiled_ext, mmfix_ext, detections, threshold):
    """Grid-aligned boxes give IoUs exactly at thresholds like 1/2 and ties in scores."""
    rows = torch.tensor(detections, dtype=torch.float32)
    _keep(compiled_ext, mmfix_ext, rows[:, :5].contiguous(), rows[:, 5].contiguous(), threshold)


# --- mmcv's own Python API, compiled vs mmfix --------------------------------------------


@pytest.mark.parametrize("clockwise", [True, False])
@pytest.mark.parametrize("with_labels", [False, True])
def test_through_mmcv_nms_rotated(compiled_ext, mmfix_ext, clockwise, with_labels):
    ops = import_mmcv_ops(mmfix_ext)
    gen = torch.Generator().manual_seed(9)
    dets = clustered_boxes(gen, 300, clusters=10)
    scores = torch.rand(300, generator=gen)
    labels = torch.randint(0, 4, (300,), generator=gen) if with_labels else None
    with swap_ext(compiled_ext):
        expected_dets, expected_keep = ops.nms_rotated(dets, scores, 0.3, labels=labels, clockwise=clockwise)
    with swap_ext(mmfix_ext):
        actual_dets, actual_keep = ops.nms_rotated(dets, scores, 0.3, labels=labels, clockwise=clockwise)
    assert torch.equal(actual_keep, expected_keep)
    assert torch.equal(actual_dets, expected_dets)


@pytest.mark.parametrize("class_agnostic", [False, True])
@pytest.mark.parametrize("split_thr", [10000, 50])
def test_through_mmcv_batched_nms_with_rotated_boxes(compiled_ext, mmfix_ext, class_agnostic, split_thr):
    """batched_nms with type='nms_rotated' keeps classes apart by offsetting the centres."""
    ops = import_mmcv_ops(mmfix_ext)
    gen = torch.Generator().manual_seed(10)
    boxes = clustered_boxes(gen, 240, clusters=9)
    scores = torch.rand(240, generator=gen)
    idxs = torch.randint(0, 5, (240,), generator=gen)
    cfg = {"type": "nms_rotated", "iou_threshold": 0.25, "split_thr": split_thr}
    with swap_ext(compiled_ext):
        expected = ops.batched_nms(boxes, scores, idxs, cfg, class_agnostic=class_agnostic)
    with swap_ext(mmfix_ext):
        actual = ops.batched_nms(boxes, scores, idxs, cfg, class_agnostic=class_agnostic)
    assert torch.equal(actual[1], expected[1])
    assert torch.equal(actual[0], expected[0])


@pytest.mark.slow
def test_through_mmdet3d_nms_bev_and_multiclass_nms(compiled_ext, mmfix_ext):
    """MMDetection3D's nms_bev (nms_rotated on xyxyr boxes) and box3d_multiclass_nms, which uses it."""
    import_mmcv_ops(mmfix_ext)
    from mmdet3d.models.layers.box3d_nms import box3d_multiclass_nms, nms_bev
    from mmengine.config import ConfigDict

    gen = torch.Generator().manual_seed(12)
    centres = clustered_boxes(gen, 500, clusters=20, spread=60.0)
    xyxyr = torch.stack(
        (
            centres[:, 0] - centres[:, 2] / 2,
            centres[:, 1] - centres[:, 3] / 2,
            centres[:, 0] + centres[:, 2] / 2,
            centres[:, 1] + centres[:, 3] / 2,
            centres[:, 4],
        ),
        1,
    )
    scores = torch.rand(500, generator=gen)
    boxes3d = torch.cat((centres[:, :2], torch.zeros(500, 1), centres[:, 2:4], torch.ones(500, 1), centres[:, 4:]), 1)
    class_scores = torch.rand(500, 4, generator=gen)
    cfg = ConfigDict(use_rotate_nms=True, nms_thr=0.2, nms_pre=400, max_num=100)
    results = []
    for ext in (compiled_ext, mmfix_ext):
        with swap_ext(ext):
            results.append(
                (
                    nms_bev(xyxyr, scores, 0.2, pre_max_size=400, post_max_size=150),
                    box3d_multiclass_nms(boxes3d, xyxyr, class_scores, 0.3, 100, cfg),
                )
            )
    (expected_keep, expected_multi), (actual_keep, actual_multi) = results
    assert 10 < expected_keep.numel() <= 150
    assert torch.equal(actual_keep, expected_keep)
    assert len(actual_multi) == len(expected_multi)
    for actual, expected in zip(actual_multi, expected_multi):
        assert torch.equal(actual, expected)


# --- bad input --------------------------------------------------------------------------------


def test_bad_input_is_named(mmfix_ext):
    dets, scores = torch.rand(4, 5), torch.rand(4)
    order = scores.sort(0, descending=True)[1]
    with pytest.raises(OpArgumentError, match=r"`dets` must have shape \(N, 5\).*got shape \(4, 4\)"):
        mmfix_ext.nms_rotated(dets[:, :4], scores, order, dets, NO_LABELS, 0.5, 0)
    with pytest.raises(OpArgumentError, match=r"`dets` must have shape \(N, 6\)"):
        mmfix_ext.nms_rotated(dets, scores, order, dets, NO_LABELS, 0.5, 1)
    with pytest.raises(
        OpArgumentError, match=r"`scores` must be a 1-D tensor with one score per box \(4\); got \(3,\)"
    ):
        mmfix_ext.nms_rotated(dets, scores[:3], order, dets, NO_LABELS, 0.5, 0)
    with pytest.raises(OpArgumentError, match=r"`scores` is float64.*dtype of `dets`"):
        mmfix_ext.nms_rotated(dets, scores.double(), order, dets, NO_LABELS, 0.5, 0)
    with pytest.raises(OpArgumentError, match=r"`dets` is int64"):
        mmfix_ext.nms_rotated(dets.long(), scores.long(), order, dets, NO_LABELS, 0.5, 0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_keeps_the_cpu_boxes(compiled_ext, mmfix_ext):
    gen = torch.Generator().manual_seed(22)
    dets = clustered_boxes(gen, 2000, clusters=60)
    scores = torch.rand(2000, generator=gen)
    order = scores.sort(0, descending=True)[1]
    expected = compiled_ext.nms_rotated(dets, scores, order, dets[order], NO_LABELS, 0.3, 0)
    d, s = dets.cuda(), scores.cuda()
    actual = mmfix_ext.nms_rotated(d, s, order.cuda(), d[order.cuda()], NO_LABELS.cuda(), 0.3, 0)
    assert torch.equal(actual.cpu(), expected)
