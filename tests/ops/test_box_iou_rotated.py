"""box_iou_rotated: mmfix's PyTorch version against mmcv 2.1.0's compiled CPU kernel."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmfix._ops import _rotated_boxes
from mmfix._ops._rotated_checks import OpArgumentError
from ops_support import assert_same_call, import_mmcv_ops, swap_ext

from .rotated_cases import degenerate_pairs, random_boxes

# The kernel's values are reproduced to the bit here; the tolerance only allows for
# another libm, and is far below the errors of the kernel's hull that must be reproduced.
TOL = {"rtol": 0.0, "atol": 1e-6}


def _ious(compiled_ext, mmfix_ext, b1, b2, mode_flag=0, aligned=False):
    out = torch.zeros(b1.shape[0] if aligned else b1.shape[0] * b2.shape[0])
    return assert_same_call(
        mmfix_ext, compiled_ext, "box_iou_rotated", b1, b2, out, mode_flag=mode_flag, aligned=aligned, **TOL
    )


def test_the_family_supplies_the_name(mmfix_ext):
    assert mmfix_ext.__mmfix_families__["box_iou_rotated"] == "box_iou_rotated"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("mode_flag", [0, 1])
@pytest.mark.parametrize("aligned", [False, True])
def test_random_boxes(compiled_ext, mmfix_ext, seed, mode_flag, aligned):
    gen = torch.Generator().manual_seed(seed)
    n, m = (150, 150) if aligned else (61, 47)
    b1 = random_boxes(gen, n, spread=8.0)
    b2 = random_boxes(gen, m, spread=8.0)
    _, (_, _, ious) = _ious(compiled_ext, mmfix_ext, b1, b2, mode_flag, aligned)
    assert (ious > 0).float().mean() > 0.2  # most pairs must really overlap for this to test anything


@pytest.mark.parametrize("mode_flag", [0, 1])
def test_degenerate_pairs(compiled_ext, mmfix_ext, mode_flag):
    b1, b2 = degenerate_pairs(torch.Generator().manual_seed(7), 200)
    _, (_, _, ious) = _ious(compiled_ext, mmfix_ext, b1, b2, mode_flag, aligned=True)
    if mode_flag == 0:
        # Nearly identical boxes (the second to fourth groups) have a true IoU of about 1; the
        # kernel's Graham scan gets some far off (see mmfix/_ops/_graham.py), and mmfix with it.
        near_identical = ious[200:800]
        assert (near_identical < 0.9).any()
        assert (near_identical > 0.99).float().mean() > 0.5


def test_every_pair_of_a_degenerate_set(compiled_ext, mmfix_ext):
    """The grid (not aligned) path over the same awkward boxes, both orders of each pair."""
    b1, b2 = degenerate_pairs(torch.Generator().manual_seed(8), 12)
    boxes = torch.cat((b1, b2))
    _ious(compiled_ext, mmfix_ext, boxes, boxes)


def test_the_hull_of_more_than_17_points(compiled_ext, mmfix_ext, monkeypatch):
    """Squares on a half-unit grid give up to 18 candidate vertices: std::sort then partitions
    before its insertion sort, which mmfix emulates too (checked to be exercised)."""
    from mmfix._ops import _graham

    seen = []
    partitions = _graham._introsort_partitions

    def spy(qx, qy, count):
        seen.append(int(count.max()))
        return partitions(qx, qy, count)

    monkeypatch.setattr(_graham, "_introsort_partitions", spy)
    b1, b2 = degenerate_pairs(torch.Generator().manual_seed(3), 1500)
    _ious(compiled_ext, mmfix_ext, b1, b2, aligned=True)
    assert seen and max(seen) >= 18


def test_thin_boxes_reach_far(compiled_ext, mmfix_ext):
    """A box whose short side rounds away at the pair's coordinates makes the kernel's corner
    test an infinite strip: it "contains" boxes far away (IoU > 0, even inf). mmfix computes
    such pairs instead of skipping them as apart."""
    gen = torch.Generator().manual_seed(14)
    thin = random_boxes(gen, 24, spread=4.0)
    thin[:, 3] = torch.tensor([1e-8, 1e-6, 1e-4, 1e-3]).repeat(6)
    thin[::3, 4] = 0.0
    far = random_boxes(gen, 30, spread=4.0)
    far[:, 1] += torch.tensor([1.0, 1e2, 1e4, 1e5, 3e5]).repeat(6)
    _, (_, _, ious) = _ious(compiled_ext, mmfix_ext, thin, far)
    assert (ious != 0).any()
    _ious(compiled_ext, mmfix_ext, far, thin, mode_flag=1)


def test_large_coordinates(compiled_ext, mmfix_ext):
    gen = torch.Generator().manual_seed(4)
    b1 = random_boxes(gen, 40, spread=30.0)
    b1[:, :2] += 5e4
    b2 = b1 + torch.randn(40, 5, generator=gen)
    _ious(compiled_ext, mmfix_ext, b1, b2)


def test_non_finite_boxes(compiled_ext, mmfix_ext):
    """nan and inf coordinates, sizes and angles: never skipped as apart, the kernel's values."""
    nan, inf = float("nan"), float("inf")
    boxes = torch.tensor(
        [
            [0, 0, 2, 1, 0.3],
            [nan, 0, 1, 1, 0],
            [0, 0, inf, 1, 0],
            [0.5, 0.2, 1, 1, nan],
            [1e30, 0, 1, 1, 0],
            [0, 0, 1, 1, inf],
            [0, -inf, 1, 1, 0],
        ]
    )
    for mode_flag in (0, 1):
        out = torch.zeros(49)
        compiled_ext.box_iou_rotated(boxes, boxes, out, mode_flag=mode_flag, aligned=False)
        mine = torch.zeros(49)
        mmfix_ext.box_iou_rotated(boxes, boxes, mine, mode_flag=mode_flag, aligned=False)
        torch.testing.assert_close(mine, out, equal_nan=True, **TOL)


def test_empty_inputs(compiled_ext, mmfix_ext):
    none = torch.zeros(0, 5)
    some = random_boxes(torch.Generator().manual_seed(0), 3)
    _ious(compiled_ext, mmfix_ext, none, some)
    _ious(compiled_ext, mmfix_ext, some, none)
    _ious(compiled_ext, mmfix_ext, none, none, aligned=True)


def test_chunks_do_not_change_the_values(compiled_ext, mmfix_ext, monkeypatch):
    """Memory is bounded by chunking pairs (and the grid test); the chunk edges change nothing."""
    monkeypatch.setattr(_rotated_boxes, "PAIR_CHUNK", 7)
    monkeypatch.setattr(_rotated_boxes, "GRID_CHUNK", 50)
    gen = torch.Generator().manual_seed(5)
    _ious(compiled_ext, mmfix_ext, random_boxes(gen, 33), random_boxes(gen, 21))
    _ious(compiled_ext, mmfix_ext, random_boxes(gen, 40), random_boxes(gen, 40), 1, True)


_coordinate = st.one_of(st.integers(-6, 6).map(lambda v: v / 2), st.floats(-4, 4, width=32))
_side = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), st.floats(0, 5, width=32))
_angle = st.one_of(st.integers(-8, 8).map(lambda v: v * math.pi / 4), st.floats(-7, 7, width=32))
_box = st.tuples(_coordinate, _coordinate, _side, _side, _angle)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_box, min_size=1, max_size=8), st.lists(_box, min_size=1, max_size=8), st.sampled_from([0, 1]))
def test_hypothesis_box_sets(compiled_ext, mmfix_ext, first, second, mode_flag):
    b1 = torch.tensor(first, dtype=torch.float32)
    b2 = torch.tensor(second, dtype=torch.float32)
    _ious(compiled_ext, mmfix_ext, b1, b2, mode_flag)
    _ious(compiled_ext, mmfix_ext, torch.cat((b1, b2)), torch.cat((b2, b1)), mode_flag, aligned=True)


# --- mmcv's own Python API, compiled vs mmfix --------------------------------------------


@pytest.mark.parametrize("clockwise", [True, False])
@pytest.mark.parametrize("mode", ["iou", "iof"])
@pytest.mark.parametrize("aligned", [False, True])
def test_through_mmcv_box_iou_rotated(compiled_ext, mmfix_ext, clockwise, mode, aligned):
    ops = import_mmcv_ops(mmfix_ext)
    gen = torch.Generator().manual_seed(11)
    b1 = random_boxes(gen, 30, spread=6.0)
    b2 = random_boxes(gen, 30 if aligned else 17, spread=6.0)
    with swap_ext(compiled_ext):
        expected = ops.box_iou_rotated(b1, b2, mode=mode, aligned=aligned, clockwise=clockwise)
    with swap_ext(mmfix_ext):
        actual = ops.box_iou_rotated(b1, b2, mode=mode, aligned=aligned, clockwise=clockwise)
    assert actual.shape == expected.shape == ((30,) if aligned else (30, 17))
    torch.testing.assert_close(actual, expected, **TOL)


def test_through_mmcv_with_gradients_on_the_boxes(compiled_ext, mmfix_ext):
    """Boxes that require grad (a model's predictions) give a plain tensor, as the kernel does."""
    ops = import_mmcv_ops(mmfix_ext)
    b1 = random_boxes(torch.Generator().manual_seed(2), 9).requires_grad_()
    with swap_ext(compiled_ext):
        expected = ops.box_iou_rotated(b1, b1.detach())
    with swap_ext(mmfix_ext):
        actual = ops.box_iou_rotated(b1, b1.detach())
    assert not actual.requires_grad and not expected.requires_grad
    torch.testing.assert_close(actual, expected, **TOL)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["iou", "iof"])
def test_through_mmdet3d_box_overlaps(compiled_ext, mmfix_ext, mode):
    """MMDetection3D's 3D IoU (BaseInstance3DBoxes.overlaps: box_iou_rotated on the BEV boxes)."""
    import_mmcv_ops(mmfix_ext)
    from mmdet3d.structures import DepthInstance3DBoxes, LiDARInstance3DBoxes
    from mmdet3d.structures.ops.iou3d_calculator import bbox_overlaps_3d

    gen = torch.Generator().manual_seed(13)
    raw = torch.rand(40, 7, generator=gen) * torch.tensor([20, 20, 2, 4, 4, 2, 6.3]) + torch.tensor(
        [0, 0, -1, 0.5, 0.5, 0.5, -3.1]
    )
    for boxes_type in (LiDARInstance3DBoxes, DepthInstance3DBoxes):
        boxes1, boxes2 = boxes_type(raw[:25]), boxes_type(raw[10:])
        with swap_ext(compiled_ext):
            expected = boxes_type.overlaps(boxes1, boxes2, mode=mode)
            expected_3d = bbox_overlaps_3d(raw[:25], raw[10:], mode=mode, coordinate="lidar")
        with swap_ext(mmfix_ext):
            actual = boxes_type.overlaps(boxes1, boxes2, mode=mode)
            actual_3d = bbox_overlaps_3d(raw[:25], raw[10:], mode=mode, coordinate="lidar")
        assert (expected > 0).any()
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(actual_3d, expected_3d, rtol=1e-5, atol=1e-6)


# --- bad input --------------------------------------------------------------------------------


def _call(mmfix_ext, b1, b2, ious, mode_flag=0, aligned=False):
    mmfix_ext.box_iou_rotated(b1, b2, ious, mode_flag=mode_flag, aligned=aligned)


def test_bad_input_is_named(mmfix_ext):
    five = torch.rand(3, 5)
    with pytest.raises(OpArgumentError, match=r"`boxes1` must have shape \(N, 5\).*got shape \(3, 4\)"):
        _call(mmfix_ext, five[:, :4], five, torch.zeros(9))
    with pytest.raises(OpArgumentError, match=r"`boxes2` is float64.*float32.*\.float\(\)"):
        _call(mmfix_ext, five, five.double(), torch.zeros(9))
    with pytest.raises(OpArgumentError, match=r"`mode_flag` must be one of 0 \('iou'\), 1 \('iof'\); got 2"):
        _call(mmfix_ext, five, five, torch.zeros(9), mode_flag=2)
    with pytest.raises(OpArgumentError, match=r"`ious` has 3 elements.*needs 9"):
        _call(mmfix_ext, five, five, torch.zeros(3))
    with pytest.raises(OpArgumentError, match=r"aligned=True with 3 boxes"):
        _call(mmfix_ext, five, five[:2], torch.zeros(3), aligned=True)
    with pytest.raises(OpArgumentError, match=r"one device.*`ious` on meta"):
        _call(mmfix_ext, five, five, torch.zeros(9, device="meta"))
    # Also a RuntimeError, as the compiled kernel's checks raise.
    with pytest.raises(RuntimeError):
        _call(mmfix_ext, five, five.double(), torch.zeros(9))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gives_the_cpu_values(compiled_ext, mmfix_ext):
    gen = torch.Generator().manual_seed(21)
    b1, b2 = random_boxes(gen, 300), random_boxes(gen, 200)
    expected = torch.zeros(300 * 200)
    compiled_ext.box_iou_rotated(b1, b2, expected, mode_flag=0, aligned=False)
    actual = torch.zeros(300 * 200, device="cuda")
    mmfix_ext.box_iou_rotated(b1.cuda(), b2.cuda(), actual, mode_flag=0, aligned=False)
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)
