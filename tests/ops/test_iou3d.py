"""iou3d (BEV overlap, nms3d, nms3d_normal): mmfix against the CUDA kernel's definition.

Compiled mmcv 2.1.0 has no CPU kernel for these (checked below), so the ground truth is
an independent transcription of ``iou3d_cuda_kernel.cuh`` written here: one box pair at a
time, every operation in numpy float32, the kernel's bubble sort and NMS loops literally.
The BEV overlap is also checked against the compiled ``box_iou_rotated`` (the same
rotation convention), away from the kernel's 0.01 margin.

The transcription follows the GPU's arithmetic, because on collinear edges the kernel's
crossing tests decide on rounding noise (see ``test_shared_edges``): the multiply-adds nvcc
fuses (read off the SASS CUDA 12.1 makes for sm_80: in ``a*b - c*d`` the minuend, in
``a*b + c*d`` the second product; ``s2``/``s5`` share their products and fuse neither),
each fused multiply-add rounded exactly once (exact rationals), and libdevice's
``sinf``/``cosf`` transcribed from its PTX.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmfix._ops import _greedy_nms, _rotated_boxes
from mmfix._ops._rotated_checks import OpArgumentError
from ops_support import import_mmcv_ops, swap_ext

from .rotated_cases import clustered_boxes

F = np.float32
EPS = F(1e-8)
MARGIN = F(1e-2)

# --- the GPU's float32 arithmetic, one scalar at a time ----------------------------------------


def _round32(exact):
    """The float32 nearest to a rational (ties to even), rounded once."""
    guess = F(float(exact))
    candidates = [guess, np.nextafter(guess, F(np.inf)), np.nextafter(guess, F(-np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.uint32)) & 1))


def fmaf(a, b, c):
    return _round32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def mul_sub(a, b, c, d):  # a*b - c*d as compiled: the minuend fused
    return fmaf(a, b, -(F(c) * F(d)))


def mul_add(a, b, c, d):  # a*b + c*d as compiled: the second product fused
    return fmaf(c, d, F(a) * F(b))


def _hex(word):
    return F(struct.unpack(">f", bytes.fromhex(word))[0])


def _libdevice_sin_cos(x, cos):
    """__nv_sinf / __nv_cosf (|x| < 105615): reduction by pi/2 in three fused steps, polynomial."""
    x = F(x)
    j = F(np.rint(x * _hex("3F22F983")))
    r = fmaf(j, _hex("BFC90FDA"), x)
    r = fmaf(j, _hex("B3A22168"), r)
    r = fmaf(j, _hex("A7C234C5"), r)
    q = int(j) + int(cos)
    even = q % 2 == 0
    t = r if even else F(1)
    s = r * r
    p = _hex("B94D4153") if even else fmaf(_hex("37CBAC00"), s, _hex("BAB607ED"))
    p = fmaf(p, s, _hex("3C0885E4") if even else _hex("3D2AAABB"))
    p = fmaf(p, s, _hex("BE2AAAA8") if even else _hex("BEFFFFFF"))
    result = fmaf(p, s * t, t)
    return -result if q & 2 else result


def cuda_cos(x):
    return _libdevice_sin_cos(x, True)


def cuda_sin(x):
    return _libdevice_sin_cos(x, False)


# --- the reference: iou3d_cuda_kernel.cuh, one pair at a time ------------------------------


def _corners(box):
    x, y, dx, dy, heading = F(box[0]), F(box[1]), F(box[3]), F(box[4]), F(box[6])
    hx, hy = dx / F(2), dy / F(2)
    corners = [(x - hx, y - hy), (x + hx, y - hy), (x + hx, y + hy), (x - hx, y + hy)]
    c, s = cuda_cos(heading), cuda_sin(heading)
    return [(mul_sub(px - x, c, py - y, s) + x, mul_add(px - x, s, py - y, c) + y) for px, py in corners]


def _cross3(p1, p2, p0):
    return mul_sub(p1[0] - p0[0], p2[1] - p0[1], p2[0] - p0[0], p1[1] - p0[1])


def _intersection(p1, p0, q1, q0):
    if not (
        min(p0[0], p1[0]) <= max(q0[0], q1[0])
        and min(q0[0], q1[0]) <= max(p0[0], p1[0])
        and min(p0[1], p1[1]) <= max(q0[1], q1[1])
        and min(q0[1], q1[1]) <= max(p0[1], p1[1])
    ):
        return None
    s1, s3, s4 = _cross3(q0, p1, p0), _cross3(p0, q1, q0), _cross3(q1, p1, q0)
    # s2 = cross(p1, q1, p0), s5 = cross(q1, p1, p0): one pair of rounded products, unfused.
    u, v = (p1[0] - p0[0]) * (q1[1] - p0[1]), (q1[0] - p0[0]) * (p1[1] - p0[1])
    s2, s5 = u - v, v - u
    if not (s1 * s2 > 0 and s3 * s4 > 0):
        return None
    if abs(s5 - s1) > EPS:
        return (mul_sub(s5, q0[0], s1, q1[0]) / (s5 - s1), mul_sub(s5, q0[1], s1, q1[1]) / (s5 - s1))
    a0, b0, c0 = p0[1] - p1[1], p1[0] - p0[0], mul_sub(p0[0], p1[1], p1[0], p0[1])
    a1, b1, c1 = q0[1] - q1[1], q1[0] - q0[0], mul_sub(q0[0], q1[1], q1[0], q0[1])
    d = mul_sub(a0, b1, a1, b0)
    return (mul_sub(b0, c1, b1, c0) / d, mul_sub(a1, c0, a0, c1) / d)


def _in_box(box, p):
    cx, cy = F(box[0]), F(box[1])
    c, s = cuda_cos(-F(box[6])), cuda_sin(-F(box[6]))
    rx = mul_sub(p[0] - cx, c, p[1] - cy, s)  # (p.x - cx) * cos + (p.y - cy) * (-sin)
    ry = mul_add(p[0] - cx, s, p[1] - cy, c)
    return abs(rx) < F(box[3]) / F(2) + MARGIN and abs(ry) < F(box[4]) / F(2) + MARGIN


def ref_overlap(a, b):
    ca, cb = _corners(a), _corners(b)
    ca.append(ca[0])
    cb.append(cb[0])
    points = []
    for i in range(4):
        for j in range(4):
            p = _intersection(ca[i + 1], ca[i], cb[j + 1], cb[j])
            if p is not None:
                points.append(p)
    for k in range(4):
        if _in_box(a, cb[k]):
            points.append(cb[k])
        if _in_box(b, ca[k]):
            points.append(ca[k])
    n = len(points)
    cx = cy = F(0)
    for p in points:
        cx, cy = cx + p[0], cy + p[1]
    if n:
        cx, cy = cx / F(n), cy / F(n)
    for j in range(n - 1):
        for i in range(n - j - 1):
            if np.arctan2(points[i][1] - cy, points[i][0] - cx) > np.arctan2(
                points[i + 1][1] - cy, points[i + 1][0] - cx
            ):
                points[i], points[i + 1] = points[i + 1], points[i]
    area = F(0)
    for k in range(n - 1):
        ax, ay = points[k][0] - points[0][0], points[k][1] - points[0][1]
        bx, by = points[k + 1][0] - points[0][0], points[k + 1][1] - points[0][1]
        area = area + mul_sub(ax, by, ay, bx)
    return F(abs(area) / 2.0)


def ref_iou_bev(a, b):
    overlap = ref_overlap(a, b)
    return overlap / np.fmax(mul_add(a[3], a[4], b[3], b[4]) - overlap, EPS)


def ref_iou_normal(a, b):
    a, b = [F(v) for v in a], [F(v) for v in b]
    left = np.fmax(a[0] - a[3] / F(2), b[0] - b[3] / F(2))
    right = np.fmin(a[0] + a[3] / F(2), b[0] + b[3] / F(2))
    top = np.fmax(a[1] - a[4] / F(2), b[1] - b[4] / F(2))
    bottom = np.fmin(a[1] + a[4] / F(2), b[1] + b[4] / F(2))
    inter = np.fmax(right - left, F(0)) * np.fmax(bottom - top, F(0))
    return inter / np.fmax(a[3] * a[4] + b[3] * b[4] - inter, EPS)


def ref_nms(boxes, threshold, iou):
    """The kernel's mask (IoU > threshold for i < j) and gather_keep_from_mask: greedy, in input order."""
    rows = boxes.numpy()
    threshold = F(threshold)
    removed = [False] * len(rows)
    keep = []
    for i in range(len(rows)):
        if removed[i]:
            continue
        keep.append(i)
        for j in range(i + 1, len(rows)):
            if not removed[j] and iou(rows[i], rows[j]) > threshold:
                removed[j] = True
    return torch.tensor(keep, dtype=torch.long)


def ref_overlap_grid(a, b):
    rows, cols = a.numpy(), b.numpy()
    return torch.tensor([[ref_overlap(p, q) for q in cols] for p in rows], dtype=torch.float32).view(
        len(rows), len(cols)
    )


# --- box sets --------------------------------------------------------------------------------


def boxes3d(gen, n, spread=8.0):
    """(x, y, z, dx, dy, dz, heading) with BEV boxes that overlap often."""
    bev = clustered_boxes(gen, n, clusters=max(1, n // 6), spread=spread)
    z = torch.rand(n, 1, generator=gen) * 2
    dz = torch.rand(n, 1, generator=gen) * 2 + 0.5
    return torch.cat((bev[:, :2], z, bev[:, 2:4], dz, bev[:, 4:]), 1).contiguous()


def _overlap(ext, a, b):
    out = torch.full((a.shape[0], b.shape[0]), -1.0)
    ext.iou3d_boxes_overlap_bev_forward(a, b, out)
    return out


def _nms(ext, name, boxes, threshold):
    keep = torch.full((boxes.shape[0],), -7, dtype=torch.long)
    num_out = torch.zeros((), dtype=torch.long)
    getattr(ext, name)(boxes, keep, num_out, nms_overlap_thresh=threshold)
    return keep, num_out


def test_the_family_supplies_the_names(mmfix_ext):
    for name in ("iou3d_boxes_overlap_bev_forward", "iou3d_nms3d_forward", "iou3d_nms3d_normal_forward"):
        assert mmfix_ext.__mmfix_families__[name] == "iou3d"


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    """Why the ground truth here is the reference transcription, not compiled mmcv."""
    boxes = torch.rand(3, 7)
    with pytest.raises(RuntimeError, match="implementation for device cpu not found"):
        compiled_ext.iou3d_boxes_overlap_bev_forward(boxes, boxes, torch.zeros(3, 3))
    with pytest.raises(RuntimeError, match="implementation for device cpu not found"):
        _nms(compiled_ext, "iou3d_nms3d_forward", boxes, 0.5)


@pytest.mark.parametrize("seed", range(3))
def test_overlap_matches_the_reference(mmfix_ext, seed):
    gen = torch.Generator().manual_seed(seed)
    a, b = boxes3d(gen, 30), boxes3d(gen, 24)
    expected = ref_overlap_grid(a, b)
    torch.testing.assert_close(_overlap(mmfix_ext, a, b), expected, rtol=1e-5, atol=1e-5)
    assert (expected > 0).float().mean() > 0.2


def test_overlap_of_awkward_pairs(mmfix_ext):
    """Identical, nested, sharing an edge, 0.005 apart (the kernel's 0.01 margin counts the
    corners as inside, so they overlap a little), 0.5 apart (nothing), empty and tiny."""
    base = torch.tensor([[1.0, 2.0, 0.0, 2.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 3.0, 1.5, 1.0, 0.7]])
    shifted = []
    for gap in (0.0, 0.005, 0.5):
        moved = base.clone()
        moved[:, 0] += (base[:, 3] + gap) * torch.cos(base[:, 6])
        moved[:, 1] += (base[:, 3] + gap) * torch.sin(base[:, 6])
        shifted.append(moved)
    nested = base.clone()
    nested[:, 3:5] *= 0.5
    sizes = base.clone()
    sizes[0, 3:5] = 0.0
    sizes[1, 3:5] = 1e-4
    turned = base.clone()
    turned[:, 6] += math.pi
    a = torch.cat([base] * 7)
    b = torch.cat([base, nested, turned, *shifted, sizes])
    expected = torch.tensor([ref_overlap(p, q) for p, q in zip(a.numpy(), b.numpy())])
    actual = torch.diagonal(_overlap(mmfix_ext, a, b))
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    margin_pairs = expected[8:10]  # 0.005 apart
    assert (margin_pairs > 0).all() and (expected[10:12] == 0).all()
    torch.testing.assert_close(expected[:2], base[:, 3] * base[:, 4], rtol=1e-5, atol=0.0)


def _corners64(boxes):
    x, y, dx, dy, h = (boxes[:, i].double() for i in (0, 1, 3, 4, 6))
    c, s = torch.cos(h), torch.sin(h)
    signs = torch.tensor([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=torch.float64) / 2
    ux, uy = signs[:, 0] * dx[:, None], signs[:, 1] * dy[:, None]
    return x[:, None] + ux * c[:, None] - uy * s[:, None], y[:, None] + ux * s[:, None] + uy * c[:, None]


def _near_the_margin(a, b, band=0.03):
    """Pairs where a corner of one box is within ``band`` of the other's outline."""

    def corners_near(p, q):
        px, py = _corners64(p)  # (P, 4)
        c, s = torch.cos(-q[:, 6:7].double()), torch.sin(-q[:, 6:7].double())
        ux, uy = px - q[:, 0:1].double(), py - q[:, 1:2].double()
        rx, ry = (ux * c - uy * s).abs(), (ux * s + uy * c).abs()
        hx, hy = q[:, 3:4].double() / 2, q[:, 4:5].double() / 2
        near_x = ((rx - hx).abs() < band) & (ry < hy + band)
        near_y = ((ry - hy).abs() < band) & (rx < hx + band)
        return (near_x | near_y).any(1)

    return corners_near(a, b) | corners_near(b, a)


def test_overlap_agrees_with_compiled_box_iou_rotated(compiled_ext, mmfix_ext):
    """Away from the 0.01 margin the BEV overlap is the intersection area box_iou_rotated divides."""
    gen = torch.Generator().manual_seed(5)
    a = boxes3d(gen, 400, spread=20.0)
    b = a.clone()
    b[:, :2] += torch.randn(400, 2, generator=gen)
    b[:, 3:5] *= torch.rand(400, 2, generator=gen) + 0.5
    b[:, 6] += torch.randn(400, generator=gen)
    overlap = torch.diagonal(_overlap(mmfix_ext, a, b))
    bev_a, bev_b = a[:, [0, 1, 3, 4, 6]].contiguous(), b[:, [0, 1, 3, 4, 6]].contiguous()
    iou = torch.zeros(400)
    compiled_ext.box_iou_rotated(bev_a, bev_b, iou, mode_flag=0, aligned=True)
    area_sum = a[:, 3] * a[:, 4] + b[:, 3] * b[:, 4]
    intersection = iou * area_sum / (1 + iou)
    clear = ~_near_the_margin(a, b)
    assert clear.sum() > 250 and (intersection[clear] > 0).sum() > 200
    torch.testing.assert_close(overlap[clear], intersection[clear], rtol=1e-4, atol=1e-4)


def test_libdevice_sin_cos(mmfix_ext):
    """mmfix's vectorised sinf/cosf equal the scalar transcription here, which is within the
    1.5 ulp libdevice promises of the true value (and not always correctly rounded)."""
    from mmfix._ops import _cuda_float

    gen = torch.Generator().manual_seed(3)
    x = torch.cat((torch.rand(400, generator=gen) * 16 - 8, torch.tensor([0.0, math.pi, -math.pi / 2, 2.3764565])))
    sin, cos = _cuda_float.sinf(x), _cuda_float.cosf(x)
    expected_sin = torch.tensor([float(cuda_sin(v)) for v in x.numpy()])
    expected_cos = torch.tensor([float(cuda_cos(v)) for v in x.numpy()])
    assert torch.equal(sin, expected_sin) and torch.equal(cos, expected_cos)
    for got, exact in ((sin, torch.sin(x.double())), (cos, torch.cos(x.double()))):
        ulp = torch.tensor([float(np.spacing(F(abs(v)))) for v in exact.tolist()], dtype=torch.float64)
        assert ((got.double() - exact).abs() <= 1.5 * ulp).all()


def test_the_collinear_pair_hypothesis_found(mmfix_ext):
    """a inside b, same centre and heading, two edges on b's. The crossing tests of the
    collinear edges decide on rounding noise; with the GPU's sin/cos and fused multiply-adds
    they only add points on a's corners, so the kernel gives the exact area. (Rounding each
    operation alone with numpy's float32 cos, 1 ulp off here, adds a point off the outline:
    0.1388.)"""
    a = torch.tensor([[0.5, 0.0, 0.0, 0.5, 0.25, 1.0, 2.3764564990997314]])
    b = torch.tensor([[0.5, 0.0, 0.0, 0.5, 0.5, 1.0, 2.3764564990997314]])
    assert float(ref_overlap(a[0].numpy(), b[0].numpy())) == pytest.approx(0.125, abs=1e-7)
    assert float(ref_overlap(b[0].numpy(), a[0].numpy())) == pytest.approx(0.125, abs=1e-7)
    torch.testing.assert_close(_overlap(mmfix_ext, a, b), torch.tensor([[0.125]]), rtol=0, atol=1e-7)
    torch.testing.assert_close(_overlap(mmfix_ext, b, a), torch.tensor([[0.125]]), rtol=0, atol=1e-7)
    assert np.cos(F(2.3764564990997314)) != cuda_cos(F(2.3764564990997314))


def test_shared_edges(mmfix_ext):
    """Pairs with the same centre and heading and one common side length: two edges of the
    smaller box lie on the larger one's. The kernel's answer is the true area for most and
    something else for a few (points off the outline), and mmfix gives the kernel's."""
    gen = torch.Generator().manual_seed(4)
    n = 160
    sizes = torch.tensor([0.25, 0.5, 0.75, 1.0, 1.5, 2.0])
    pick = lambda: sizes[torch.randint(0, 6, (n,), generator=gen)]
    centre = torch.randint(-2, 3, (n, 2), generator=gen) / 2
    heading = torch.rand(n, generator=gen) * 8 - 4
    side, first, second = pick(), pick(), pick()
    ones, zeros = torch.ones(n), torch.zeros(n)
    a = torch.stack((centre[:, 0], centre[:, 1], zeros, side, first, ones, heading), 1)
    b = torch.stack((centre[:, 0], centre[:, 1], zeros, side, second, ones, heading), 1)
    expected = torch.tensor([ref_overlap(p, q) for p, q in zip(a.numpy(), b.numpy())])
    torch.testing.assert_close(torch.diagonal(_overlap(mmfix_ext, a, b)), expected, rtol=1e-5, atol=1e-6)
    true_area = side * torch.minimum(first, second)
    off = (expected - true_area).abs() > 1e-4
    assert 0 < off.sum() < n // 4


_value = st.one_of(st.integers(-4, 4).map(lambda v: v / 2), st.floats(-3, 3, width=32))
_size = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.floats(0.0, 4.0, width=32))
_heading = st.one_of(st.integers(-4, 4).map(lambda v: v * math.pi / 4), st.floats(-4, 4, width=32))
_box3d = st.tuples(_value, _value, st.just(0.0), _size, _size, st.just(1.0), _heading)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_box3d, min_size=1, max_size=6), st.lists(_box3d, min_size=1, max_size=6))
def test_hypothesis_overlaps(mmfix_ext, first, second):
    a = torch.tensor(first, dtype=torch.float32)
    b = torch.tensor(second, dtype=torch.float32)
    torch.testing.assert_close(_overlap(mmfix_ext, a, b), ref_overlap_grid(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("name", "iou"), [("iou3d_nms3d_forward", ref_iou_bev), ("iou3d_nms3d_normal_forward", ref_iou_normal)]
)
@pytest.mark.parametrize("threshold", [0.1, 0.3, 0.6])
def test_nms_matches_the_reference(mmfix_ext, name, iou, threshold):
    gen = torch.Generator().manual_seed(int(threshold * 10))
    boxes = boxes3d(gen, 90)
    expected = ref_nms(boxes, threshold, iou)
    keep, num_out = _nms(mmfix_ext, name, boxes, threshold)
    assert 1 < expected.numel() < 90
    assert int(num_out) == expected.numel()
    assert torch.equal(keep[: expected.numel()], expected)
    assert (keep[expected.numel() :] == -7).all()  # the rest of `keep` is left as it was


def test_nms_across_blocks(mmfix_ext, monkeypatch):
    monkeypatch.setattr(_greedy_nms, "BLOCK", 6)
    monkeypatch.setattr(_rotated_boxes, "PAIR_CHUNK", 5)
    boxes = boxes3d(torch.Generator().manual_seed(9), 70)
    for name, iou in (("iou3d_nms3d_forward", ref_iou_bev), ("iou3d_nms3d_normal_forward", ref_iou_normal)):
        expected = ref_nms(boxes, 0.2, iou)
        keep, num_out = _nms(mmfix_ext, name, boxes, 0.2)
        assert torch.equal(keep[: int(num_out)], expected)


def test_nms_thresholds_at_the_edges(mmfix_ext):
    """The kernel suppresses strictly above the threshold: at 0 boxes that do not meet survive;
    below 0 every box is suppressed by the first."""
    boxes = boxes3d(torch.Generator().manual_seed(10), 40, spread=30.0)
    for threshold in (0.0, -0.1, 1.0):
        expected = ref_nms(boxes, threshold, ref_iou_bev)
        keep, num_out = _nms(mmfix_ext, "iou3d_nms3d_forward", boxes, threshold)
        assert torch.equal(keep[: int(num_out)], expected)
    assert int(_nms(mmfix_ext, "iou3d_nms3d_forward", boxes, -0.1)[1]) == 1


def test_empty(mmfix_ext):
    none = torch.zeros(0, 7)
    assert _overlap(mmfix_ext, none, torch.rand(3, 7)).shape == (0, 3)
    keep, num_out = _nms(mmfix_ext, "iou3d_nms3d_forward", none, 0.5)
    assert keep.numel() == 0 and int(num_out) == 0


# --- mmcv's own Python API (mmcv.ops.iou3d) on mmfix's extension ------------------------------


def test_through_mmcv_iou3d(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    gen = torch.Generator().manual_seed(11)
    a, b = boxes3d(gen, 25), boxes3d(gen, 20)
    scores = torch.rand(25, generator=gen)
    expected_overlap = ref_overlap_grid(a, b)
    with swap_ext(mmfix_ext):
        overlap = ops.boxes_overlap_bev(a, b)
        iou3d = ops.boxes_iou3d(a, b)
        keep = ops.nms3d(a, scores, 0.2)
        keep_normal = ops.nms3d_normal(a, scores, 0.2)
    torch.testing.assert_close(overlap, expected_overlap, rtol=1e-5, atol=1e-5)
    # boxes_iou3d: the BEV overlap times the height overlap, over the union of the volumes.
    top_a, bottom_a = (a[:, 2] + a[:, 5] / 2)[:, None], (a[:, 2] - a[:, 5] / 2)[:, None]
    top_b, bottom_b = (b[:, 2] + b[:, 5] / 2)[None], (b[:, 2] - b[:, 5] / 2)[None]
    height = (torch.min(top_a, top_b) - torch.max(bottom_a, bottom_b)).clamp(min=0)
    inter = expected_overlap * height
    volumes = (a[:, 3] * a[:, 4] * a[:, 5])[:, None] + (b[:, 3] * b[:, 4] * b[:, 5])[None]
    torch.testing.assert_close(iou3d, inter / (volumes - inter).clamp(min=1e-6), rtol=1e-5, atol=1e-5)
    order = scores.sort(0, descending=True)[1]
    assert torch.equal(keep, order[ref_nms(a[order], 0.2, ref_iou_bev)])
    assert torch.equal(keep_normal, order[ref_nms(a[order], 0.2, ref_iou_normal)])
    assert 1 < keep.numel() < 25


@pytest.mark.slow
@pytest.mark.parametrize("with_yaw", [True, False])
def test_through_mmdet3d_fcaf3d_multiclass_nms(mmfix_ext, with_yaw):
    """FCAF3D's per-class NMS (nms3d with yaw, nms3d_normal without), MMDetection3D's own code."""
    import_mmcv_ops(mmfix_ext)
    from mmdet3d.models.dense_heads.fcaf3d_head import FCAF3DHead
    from mmengine.config import ConfigDict

    gen = torch.Generator().manual_seed(12)
    bboxes = boxes3d(gen, 150)
    if not with_yaw:
        bboxes = bboxes[:, :6].contiguous()
    scores = torch.rand(150, 3, generator=gen)
    head = SimpleNamespace(test_cfg=ConfigDict(score_thr=0.2, iou_thr=0.25))
    with swap_ext(mmfix_ext):
        nms_bboxes, nms_scores, nms_labels = FCAF3DHead._single_scene_multiclass_nms(head, bboxes, scores, {})
    expected_boxes, expected_scores, expected_labels = [], [], []
    padded = bboxes if with_yaw else torch.cat((bboxes, torch.zeros(150, 1)), 1)
    for label in range(3):
        ids = (scores[:, label] > 0.2).nonzero().squeeze(1)
        class_scores, class_boxes = scores[ids, label], padded[ids]
        order = class_scores.sort(0, descending=True)[1]
        kept = order[ref_nms(class_boxes[order], 0.25, ref_iou_bev if with_yaw else ref_iou_normal)]
        expected_boxes.append(class_boxes[kept][:, : bboxes.shape[1]])
        expected_scores.append(class_scores[kept])
        expected_labels.append(torch.full((kept.numel(),), label))
    assert torch.equal(nms_bboxes, torch.cat(expected_boxes))
    assert torch.equal(nms_scores, torch.cat(expected_scores))
    assert torch.equal(nms_labels, torch.cat(expected_labels))
    assert nms_scores.numel() < (scores > 0.2).sum()


# --- bad input --------------------------------------------------------------------------------


def test_bad_input_is_named(mmfix_ext):
    boxes = torch.rand(4, 7)
    with pytest.raises(OpArgumentError, match=r"`boxes_a` must have shape \(N, 7\).*got shape \(4, 5\)"):
        mmfix_ext.iou3d_boxes_overlap_bev_forward(boxes[:, :5], boxes, torch.zeros(4, 4))
    with pytest.raises(OpArgumentError, match=r"`boxes_b` is float64.*float32"):
        mmfix_ext.iou3d_boxes_overlap_bev_forward(boxes, boxes.double(), torch.zeros(4, 4))
    with pytest.raises(OpArgumentError, match=r"`ans_iou` has 4 elements.*needs 16"):
        mmfix_ext.iou3d_boxes_overlap_bev_forward(boxes, boxes, torch.zeros(4))
    with pytest.raises(OpArgumentError, match=r"`keep` is int32.*int64"):
        mmfix_ext.iou3d_nms3d_forward(boxes, torch.zeros(4, dtype=torch.int32), torch.zeros((), dtype=torch.long), 0.5)
    with pytest.raises(OpArgumentError, match=r"`keep` has 3 elements"):
        mmfix_ext.iou3d_nms3d_normal_forward(
            boxes, torch.zeros(3, dtype=torch.long), torch.zeros((), dtype=torch.long), 0.5
        )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gives_the_cpu_results(mmfix_ext):
    gen = torch.Generator().manual_seed(23)
    boxes = boxes3d(gen, 4096, spread=80.0)
    expected_overlap = _overlap(mmfix_ext, boxes[:500], boxes[500:1000])
    actual_overlap = torch.zeros(500, 500, device="cuda")
    mmfix_ext.iou3d_boxes_overlap_bev_forward(boxes[:500].cuda(), boxes[500:1000].cuda(), actual_overlap)
    torch.testing.assert_close(actual_overlap.cpu(), expected_overlap, rtol=1e-5, atol=1e-5)
    for name in ("iou3d_nms3d_forward", "iou3d_nms3d_normal_forward"):
        keep, num_out = _nms(mmfix_ext, name, boxes, 0.3)
        keep_cuda = torch.zeros(4096, dtype=torch.long, device="cuda")
        num_cuda = torch.zeros((), dtype=torch.long, device="cuda")
        getattr(mmfix_ext, name)(boxes.cuda(), keep_cuda, num_cuda, nms_overlap_thresh=0.3)
        assert int(num_cuda) == int(num_out)
        assert torch.equal(keep_cuda[: int(num_out)].cpu(), keep[: int(num_out)])
