"""box_iou_quadri and nms_quadri: mmfix's PyTorch versions against mmcv 2.1.0's compiled CPU kernels."""

from __future__ import annotations

import pytest
import torch

from mmfix._ops._rotated_checks import OpArgumentError
from ops_support import assert_same_call, import_mmcv_ops, swap_ext

from .rotated_cases import clustered_boxes, degenerate_pairs, random_boxes

TOL = {"rtol": 0.0, "atol": 1e-6}


def to_quads(boxes):
    """(x, y, w, h, angle) rows to their 4 corners in order (x1, y1, ..., x4, y4)."""
    x, y, w, h, a = boxes.unbind(1)
    c, s = torch.cos(a), torch.sin(a)
    corners = []
    for dx, dy in ((-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5)):
        corners += [x + c * dx * w - s * dy * h, y + s * dx * w + c * dy * h]
    return torch.stack(corners, 1).contiguous()


def random_quads(gen, n, jitter=0.3):
    """Rotated rectangles, half of them with every corner moved (general convex-ish quadrilaterals)."""
    quads = to_quads(random_boxes(gen, n, spread=8.0))
    moved = torch.rand(n, 1, generator=gen) < 0.5
    return (quads + torch.randn(n, 8, generator=gen) * jitter * moved).contiguous()


def _ious(compiled_ext, mmfix_ext, q1, q2, mode_flag=0, aligned=False):
    out = torch.zeros(q1.shape[0] if aligned else q1.shape[0] * q2.shape[0])
    return assert_same_call(
        mmfix_ext, compiled_ext, "box_iou_quadri", q1, q2, out, mode_flag=mode_flag, aligned=aligned, **TOL
    )


def _keep(compiled_ext, mmfix_ext, dets, scores, threshold, labels=None):
    multi_label = labels is not None
    dets_wl = torch.cat((dets, labels.unsqueeze(1).to(dets)), 1) if multi_label else dets
    order = scores.sort(0, descending=True)[1]
    keep, _ = assert_same_call(
        mmfix_ext, compiled_ext, "nms_quadri", dets_wl, scores, order, dets_wl[order], threshold, int(multi_label)
    )
    return keep


def test_the_family_supplies_the_names(mmfix_ext):
    assert mmfix_ext.__mmfix_families__["box_iou_quadri"] == "box_iou_quadri"
    assert mmfix_ext.__mmfix_families__["nms_quadri"] == "nms_quadri"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("mode_flag", [0, 1])
@pytest.mark.parametrize("aligned", [False, True])
def test_random_quadrilaterals(compiled_ext, mmfix_ext, seed, mode_flag, aligned):
    gen = torch.Generator().manual_seed(seed)
    q1 = random_quads(gen, 120 if aligned else 50)
    q2 = random_quads(gen, 120 if aligned else 37)
    _, (_, _, ious) = _ious(compiled_ext, mmfix_ext, q1, q2, mode_flag, aligned)
    assert (ious > 0).float().mean() > 0.2


def test_degenerate_quadrilaterals(compiled_ext, mmfix_ext):
    b1, b2 = degenerate_pairs(torch.Generator().manual_seed(2), 100)
    _ious(compiled_ext, mmfix_ext, to_quads(b1), to_quads(b2), aligned=True)
    collapsed = to_quads(b1[:50])
    collapsed[:, 4:6] = collapsed[:, 2:4]  # a triangle written with a repeated corner
    _ious(compiled_ext, mmfix_ext, collapsed, to_quads(b2[:50]), aligned=True)
    _ious(compiled_ext, mmfix_ext, torch.zeros(0, 8), collapsed)


def test_skewed_quadrilaterals_reach_far(compiled_ext, mmfix_ext):
    """The kernel's corner test accepts the region between the lines through A perpendicular
    to AB and AD and their parallels: for a skewed quadrilateral (AB nearly along AD) or a
    collapsed one, that region runs far beyond it, and the kernel reports overlaps with
    quadrilaterals far away. mmfix computes those pairs instead of skipping them as apart."""
    gen = torch.Generator().manual_seed(5)
    skewed = torch.tensor(
        [
            [0.0, 0.0, 2.0, 0.05, 3.0, 1.0, 2.0, 0.0],  # AB and AD nearly parallel
            [0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0],  # all corners on a line
            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0],  # A == B
            [0.0, 0.0, 1.0, 0.3, 1.5, 1.0, 1.0, 0.2],
        ]
    )
    far = to_quads(random_boxes(gen, 40, spread=1.0, size=(0.1, 1.0)))
    far[:, 1::2] += torch.linspace(-70, 70, 40)[:, None]  # along the first one's long reach
    _, (_, _, ious) = _ious(compiled_ext, mmfix_ext, skewed, far)
    _ious(compiled_ext, mmfix_ext, far, skewed, mode_flag=1)
    assert (ious != 0).any()


@pytest.mark.parametrize("threshold", [0.0, 0.2, 0.5, 0.8])
def test_nms_quadri(compiled_ext, mmfix_ext, threshold):
    gen = torch.Generator().manual_seed(int(threshold * 10))
    dets = to_quads(clustered_boxes(gen, 400, clusters=15))
    scores = (torch.rand(400, generator=gen) * 8).round() / 8  # ties
    keep = _keep(compiled_ext, mmfix_ext, dets, scores, threshold)
    assert 0 < keep.numel() < 400
    labels = torch.randint(0, 3, (400,), generator=gen)
    assert torch.equal(_keep(compiled_ext, mmfix_ext, dets, scores, threshold, labels), keep)


def test_nms_quadri_float64(compiled_ext, mmfix_ext):
    gen = torch.Generator().manual_seed(3)
    dets = to_quads(clustered_boxes(gen, 150, clusters=6)).double()
    _keep(compiled_ext, mmfix_ext, dets, torch.rand(150, generator=gen, dtype=torch.float64), 0.3)


def test_through_mmcv(compiled_ext, mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    gen = torch.Generator().manual_seed(4)
    q1, q2 = random_quads(gen, 30), random_quads(gen, 20)
    dets = to_quads(clustered_boxes(gen, 200, clusters=8))
    scores = torch.rand(200, generator=gen)
    labels = torch.randint(0, 3, (200,), generator=gen)
    results = []
    for ext in (compiled_ext, mmfix_ext):
        with swap_ext(ext):
            results.append(
                (
                    ops.box_iou_quadri(q1, q2, mode="iof"),
                    ops.box_iou_quadri(q1, q1.flip(0), aligned=True),
                    ops.nms_quadri(dets, scores, 0.3),
                    ops.nms_quadri(dets, scores, 0.3, labels=labels),
                    ops.batched_nms(dets, scores, labels, {"type": "nms_quadri", "iou_threshold": 0.3}),
                )
            )
    expected, actual = results
    torch.testing.assert_close(actual[0], expected[0], **TOL)
    torch.testing.assert_close(actual[1], expected[1], **TOL)
    for a, e in zip(actual[2:], expected[2:]):
        assert torch.equal(a[1], e[1]) and torch.equal(a[0], e[0])


def test_bad_input_is_named(mmfix_ext):
    q = torch.rand(3, 8)
    with pytest.raises(OpArgumentError, match=r"`boxes1` must have shape \(N, 8\)"):
        mmfix_ext.box_iou_quadri(q[:, :5], q, torch.zeros(9), mode_flag=0, aligned=False)
    with pytest.raises(OpArgumentError, match=r"`dets` must have shape \(N, 9\)"):
        mmfix_ext.nms_quadri(q, torch.rand(3), torch.arange(3), q, 0.5, 1)
