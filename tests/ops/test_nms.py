"""nms, softnms, nms_match: identical keep lists to compiled mmcv 2.1.0 (and through mmcv's own API)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from box_samples import class_offset, detections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmfix._ops import _greedy, _torchvision
from mmfix._ops import nms as nms_module
from ops_support import assert_same_call, import_mmcv_ops, swap_ext


@pytest.fixture(autouse=True)
def pure(monkeypatch):
    """The comparisons test mmfix's own code: torchvision's kernels (where installed) are off."""
    monkeypatch.setattr(_torchvision, "_ops", None)


# --- nms ------------------------------------------------------------------------------------

CASES = [
    # n, objects, classes, ties
    (1, 1, 1, False),
    (2, 1, 1, True),
    (7, 2, 1, False),
    (60, 3, 1, True),
    (300, 10, 1, False),
    (300, 10, 5, True),
    (900, 20, 80, False),
    (1500, 30, 1, True),
]


@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.7, 1.0, -0.1])
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize(("n", "objects", "classes", "ties"), CASES)
def test_nms_keeps_what_compiled_keeps(compiled_ext, mmfix_ext, n, objects, classes, ties, threshold, offset):
    boxes, scores, labels = detections(n, objects=objects, classes=classes, ties=ties, seed=n + classes)
    boxes = class_offset(boxes, labels)
    kept, _ = assert_same_call(mmfix_ext, compiled_ext, "nms", boxes, scores, iou_threshold=threshold, offset=offset)
    assert kept.dtype == torch.long


@pytest.mark.parametrize(
    "setting",
    [
        {"SPARSE_PREFERENCE": 0.0},  # dense blocks only
        {"SPARSE_PREFERENCE": 1e9},  # candidate pairs whenever allowed
        {"BLOCK": 16, "PAIR_BUDGET": 64},  # many blocks, many chunks of pairs
        {"SPARSE_PREFERENCE": 1e9, "PAIR_BUDGET": 500, "ROUNDS_BEFORE_WALK": 1},  # the box-by-box walk
        {"SPARSE_PREFERENCE": 1e9, "EDGE_CAP": 10},  # too many edges: dense steps first
    ],
    ids=["dense", "sparse", "small-chunks", "walk", "edge-cap"],
)
@pytest.mark.parametrize("threshold", [0.3, 0.7])
def test_every_path_of_the_greedy_pass(compiled_ext, mmfix_ext, monkeypatch, setting, threshold):
    for name, value in setting.items():
        monkeypatch.setattr(_greedy, name, value)
    for seed, classes in [(1, 1), (2, 4)]:
        boxes, scores, labels = detections(300, objects=8, classes=classes, seed=seed, ties=seed == 2)
        boxes = class_offset(boxes, labels)
        for offset in (0, 1):
            assert_same_call(mmfix_ext, compiled_ext, "nms", boxes, scores, iou_threshold=threshold, offset=offset)
            dets = torch.cat([boxes, scores[:, None]], 1)
            assert mmfix_ext.nms_match(dets, threshold) == compiled_ext.nms_match(dets, iou_threshold=threshold)


def test_a_long_chain_of_suppressions(compiled_ext, mmfix_ext):
    # Box k overlaps k-1 and k+1 only; in score order each one decides the next: one round per link.
    n = 1200
    x = torch.arange(n, dtype=torch.float32) * 5
    boxes = torch.stack([x, torch.zeros(n), x + 20, torch.full((n,), 20.0)], 1)
    scores = torch.linspace(1, 0, n)
    kept, _ = assert_same_call(mmfix_ext, compiled_ext, "nms", boxes, scores, iou_threshold=0.5, offset=0)
    assert kept.numel() == n // 2


def test_degenerate_boxes(compiled_ext, mmfix_ext):
    g = torch.Generator().manual_seed(3)
    boxes = torch.rand(400, 4, generator=g) * 40
    boxes[:100, 2:] = boxes[:100, :2]  # zero area
    boxes[100:150, 2:] = boxes[100:150, :2] - 3  # negative width and height
    boxes[150:200, 2] = boxes[150:200, 0] - 1  # negative width only
    boxes[200:260] = boxes[260:320]  # duplicates
    scores = (torch.rand(400, generator=g) * 3).floor()  # many ties
    for threshold in (0.0, 0.2, 0.6, -0.5):
        for offset in (0, 1):
            assert_same_call(mmfix_ext, compiled_ext, "nms", boxes, scores, iou_threshold=threshold, offset=offset)
            dets = torch.cat([boxes, scores[:, None]], 1)
            assert mmfix_ext.nms_match(dets, threshold) == compiled_ext.nms_match(dets, iou_threshold=threshold)


def test_no_boxes(compiled_ext, mmfix_ext):
    empty = torch.zeros(0, 4)
    assert_same_call(mmfix_ext, compiled_ext, "nms", empty, torch.zeros(0), iou_threshold=0.5, offset=0)
    assert mmfix_ext.nms_match(torch.zeros(0, 5), 0.5) == []


@pytest.mark.slow
@pytest.mark.parametrize(("n", "classes"), [(5000, 5), (10000, 1), (12000, 80)])
def test_nms_at_detector_sizes(compiled_ext, mmfix_ext, n, classes):
    boxes, scores, labels = detections(n, objects=60, classes=classes, seed=n)
    boxes = class_offset(boxes, labels)
    for threshold in (0.5, 0.7):
        assert_same_call(mmfix_ext, compiled_ext, "nms", boxes, scores, iou_threshold=threshold, offset=0)


# --- nms_match ------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [0.1, 0.5, 0.8])
@pytest.mark.parametrize(("n", "objects", "classes", "ties"), CASES)
def test_nms_match_groups_as_compiled(compiled_ext, mmfix_ext, n, objects, classes, ties, threshold):
    boxes, scores, labels = detections(n, objects=objects, classes=classes, ties=ties, seed=7 * n)
    dets = torch.cat([class_offset(boxes, labels), scores[:, None]], 1)
    groups = mmfix_ext.nms_match(dets, threshold)
    assert groups == compiled_ext.nms_match(dets, iou_threshold=threshold)
    assert sorted(i for group in groups for i in group) == list(range(n))


# --- softnms --------------------------------------------------------------------------------


@pytest.mark.parametrize("method", [0, 1, 2])
@pytest.mark.parametrize(
    ("threshold", "sigma", "min_score"), [(0.3, 0.5, 1e-3), (0.5, 0.1, 0.0), (0.7, 2.0, 0.1), (0.0, 0.5, 0.5)]
)
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize(("n", "ties"), [(1, False), (3, True), (40, True), (300, False), (300, True)])
def test_softnms_as_compiled(compiled_ext, mmfix_ext, n, ties, method, threshold, sigma, min_score, offset):
    boxes, scores, _ = detections(n, objects=max(1, n // 25), ties=ties, seed=n + method)
    dets = torch.zeros(n, 5)
    inds, args = assert_same_call(
        mmfix_ext,
        compiled_ext,
        "softnms",
        boxes,
        scores,
        dets,
        iou_threshold=threshold,
        sigma=sigma,
        min_score=min_score,
        method=method,
        offset=offset,
        rtol=1e-6,
        atol=1e-7,  # gaussian: glibc's expf and a rounded exp may differ in the last bit
    )
    # dets rows beyond the kept ones are not written
    assert torch.equal(args[2][inds.numel() :], torch.zeros(n - inds.numel(), 5))


@pytest.mark.parametrize(
    "setting",
    [
        {"SOFT_NMS_BATCH": 3},  # many short rounds of picks
        {"_soft_nms_in_batches": lambda *args: None},  # one pick per pass, with the overlap matrix
        {"_soft_nms_in_batches": lambda *args: None, "SOFT_NMS_MATRIX_LIMIT": 10},  # and without it
    ],
    ids=["small-rounds", "step-by-step", "step-by-step-rows"],
)
def test_both_soft_nms_paths(compiled_ext, mmfix_ext, monkeypatch, setting):
    for name, value in setting.items():
        monkeypatch.setattr(nms_module, name, value)
    for ties in (False, True):
        boxes, scores, labels = detections(200, objects=6, classes=3, ties=ties, seed=5)
        boxes = class_offset(boxes, labels)
        for method in (0, 1, 2):
            assert_same_call(
                mmfix_ext,
                compiled_ext,
                "softnms",
                boxes,
                scores,
                torch.zeros(200, 5),
                iou_threshold=0.4,
                sigma=0.5,
                min_score=0.05,
                method=method,
                offset=0,
                rtol=1e-6,
                atol=1e-7,
            )


# --- randomised small cases (hypothesis) -----------------------------------------------------

_coordinate = st.integers(min_value=0, max_value=12)


@st.composite
def _small_boxes(draw):
    n = draw(st.integers(min_value=1, max_value=30))
    corners = draw(st.lists(st.tuples(_coordinate, _coordinate, _coordinate, _coordinate), min_size=n, max_size=n))
    scores = draw(st.lists(st.integers(min_value=0, max_value=4), min_size=n, max_size=n))
    boxes = torch.tensor([[x, y, x + w, y + h] for x, y, w, h in corners], dtype=torch.float32)
    return boxes, torch.tensor(scores, dtype=torch.float32) / 4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sample=_small_boxes(), threshold=st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 0.6]), offset=st.sampled_from([0, 1]))
def test_small_random_boxes(compiled_ext, mmfix_ext, sample, threshold, offset):
    boxes, scores = sample
    assert_same_call(mmfix_ext, compiled_ext, "nms", boxes, scores, iou_threshold=threshold, offset=offset)
    dets = torch.cat([boxes, scores[:, None]], 1)
    assert mmfix_ext.nms_match(dets, threshold) == compiled_ext.nms_match(dets, iou_threshold=threshold)
    for method in (0, 1, 2):
        assert_same_call(
            mmfix_ext,
            compiled_ext,
            "softnms",
            boxes,
            scores,
            torch.zeros(len(boxes), 5),
            iou_threshold=threshold,
            sigma=0.5,
            min_score=0.1,
            method=method,
            offset=offset,
            rtol=1e-6,
            atol=1e-7,
        )


# --- through mmcv's own API -----------------------------------------------------------------


def _both(compiled_ext, mmfix_ext, call):
    with swap_ext(compiled_ext):
        expected = call()
    with swap_ext(mmfix_ext):
        actual = call()
    return expected, actual


def _same(expected, actual):
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected)
        for e, a in zip(expected, actual):
            _same(e, a)
    elif isinstance(expected, np.ndarray):
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-7)
        assert actual.dtype == expected.dtype
    else:
        torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-7)


def test_mmcv_nms(compiled_ext, mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    boxes, scores, _ = detections(800, objects=20, seed=11)
    for kwargs in (
        {},
        {"offset": 1},
        {"score_threshold": 0.4},
        {"max_num": 30},
        {"score_threshold": 0.2, "max_num": 5},
    ):
        _same(*_both(compiled_ext, mmfix_ext, lambda kw=kwargs: ops.nms(boxes, scores, 0.6, **kw)))
        _same(*_both(compiled_ext, mmfix_ext, lambda kw=kwargs: ops.nms(boxes.numpy(), scores.numpy(), 0.6, **kw)))


@pytest.mark.parametrize("method", ["naive", "linear", "gaussian"])
def test_mmcv_soft_nms(compiled_ext, mmfix_ext, method):
    ops = import_mmcv_ops(mmfix_ext)
    boxes, scores, _ = detections(250, objects=8, seed=12, ties=True)
    _same(*_both(compiled_ext, mmfix_ext, lambda: ops.soft_nms(boxes, scores, 0.3, sigma=0.5, method=method)))
    _same(
        *_both(
            compiled_ext,
            mmfix_ext,
            lambda: ops.soft_nms(boxes.numpy(), scores.numpy(), 0.5, min_score=0.05, method=method, offset=1),
        )
    )


@pytest.mark.parametrize(
    "nms_cfg",
    [
        {"type": "nms", "iou_threshold": 0.5},
        {"type": "nms", "iou_threshold": 0.7, "split_thr": 100},  # the per-class loop
        {"type": "nms", "iou_threshold": 0.5, "class_agnostic": True},
        {"type": "soft_nms", "iou_threshold": 0.5, "min_score": 0.05},
        {"type": "soft_nms", "iou_threshold": 0.3, "method": "gaussian", "split_thr": 100},
        {"type": "nms", "iou_threshold": 0.6, "split_thr": 100, "max_num": 40},
        None,  # sorted, no suppression
    ],
)
def test_mmcv_batched_nms(compiled_ext, mmfix_ext, nms_cfg):
    ops = import_mmcv_ops(mmfix_ext)
    boxes, scores, labels = detections(600, objects=25, classes=6, seed=13)
    expected, actual = _both(compiled_ext, mmfix_ext, lambda: ops.batched_nms(boxes, scores, labels, nms_cfg))
    _same(expected, actual)
    assert torch.equal(actual[1], expected[1])


def test_mmcv_nms_match(compiled_ext, mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    boxes, scores, _ = detections(500, objects=12, seed=14)
    dets = torch.cat([boxes, scores[:, None]], 1)
    for thr in (0.3, 0.6):
        expected, actual = _both(compiled_ext, mmfix_ext, lambda t=thr: ops.nms_match(dets, t))
        assert [g.tolist() for g in actual] == [g.tolist() for g in expected]
        expected, actual = _both(compiled_ext, mmfix_ext, lambda t=thr: ops.nms_match(dets.numpy(), t))
        assert [g.tolist() for g in actual] == [g.tolist() for g in expected]


# --- bad input ------------------------------------------------------------------------------


def test_bad_input_is_refused_clearly(mmfix_ext):
    boxes, scores, _ = detections(10, seed=1)
    with pytest.raises(ValueError, match=r"shape \(N, 4\)"):
        mmfix_ext.nms(boxes[:, :3], scores, 0.5, 0)
    with pytest.raises(ValueError, match="one score per box"):
        mmfix_ext.nms(boxes, scores[:5], 0.5, 0)
    with pytest.raises(ValueError, match="offset must be 0 or 1"):
        mmfix_ext.nms(boxes, scores, 0.5, 2)
    with pytest.raises(TypeError, match="float32"):
        mmfix_ext.nms(boxes.long(), scores, 0.5, 0)
    with pytest.raises(ValueError, match=r"\(N, 5\)"):
        mmfix_ext.nms_match(boxes, 0.5)
    with pytest.raises(ValueError, match="dets"):
        mmfix_ext.softnms(boxes, scores, torch.zeros(3, 5), 0.5, 0.5, 0.0, 1, 0)


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


@pytest.mark.parametrize(("n", "classes", "ties"), [(5, 1, True), (700, 1, True), (3000, 40, False)])
@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.7, 1 / 3, 0.1 + 0.2])
def test_torchvision_nms_keeps_what_the_pure_path_keeps(torchvision_ops, monkeypatch, n, classes, ties, threshold):
    monkeypatch.setattr(nms_module, "TORCHVISION_NMS_MAX_BOXES", 1 << 24)
    boxes, scores, labels = detections(n, objects=20, classes=classes, ties=ties, seed=n)
    boxes = class_offset(boxes, labels)
    fast = nms_module.nms(boxes, scores, threshold, 0)
    assert (
        nms_module._torchvision_nms(boxes, scores.sort(0, descending=True)[1], nms_module._float32(threshold), 0)
        is not None
    )
    monkeypatch.setattr(_torchvision, "FAST_PATHS", frozenset())
    assert torch.equal(fast, nms_module.nms(boxes, scores, threshold, 0))
