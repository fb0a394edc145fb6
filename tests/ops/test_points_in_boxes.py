"""Points in 3D boxes: ``cpu`` against compiled mmcv's CPU kernel; ``part`` / ``all`` (CUDA-only in mmcv)
against the same kernel's answers, which they are defined to share."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops.devices3d import (
    cpu_wrappers_fixture,  # noqa: F401 - the cpu_wrappers fixture
    small_slabs_fixture,  # noqa: F401 - the small_slabs fixture
)
from ops_support import assert_same_call, import_mmcv_ops, swap_ext


def scene(batch: int, boxes: int, points: int, seed: int, dtype=torch.float32):
    """Boxes anywhere, points clustered in and around them, some exactly on faces of axis-aligned boxes."""
    g = torch.Generator().manual_seed(seed)
    centre = torch.rand(batch, boxes, 3, generator=g) * torch.tensor([40.0, 40.0, 2.0]) - torch.tensor(
        [20.0, 20.0, 1.0]
    )
    size = torch.rand(batch, boxes, 3, generator=g) * 4 + 0.5
    angle = torch.rand(batch, boxes, 1, generator=g) * 2 * math.pi - math.pi
    angle[:, ::3] = 0.0  # axis-aligned boxes: their faces are exactly representable
    angle[:, 1::5] = math.pi / 2
    box = torch.cat([centre, size, angle], dim=2)
    owner = torch.randint(0, max(boxes, 1), (batch, points), generator=g)
    if boxes:
        base = torch.gather(box, 1, owner.unsqueeze(2).expand(batch, points, 7))
        offset = (torch.rand(batch, points, 3, generator=g) - 0.5) * base[..., 3:6] * 1.3
        offset[..., 2] += base[..., 5] / 2  # around the box's middle (z is the bottom)
        xyz = base[..., :3] + offset
        face = torch.rand(batch, points, generator=g) < 0.2
        axis = torch.randint(0, 3, (batch, points), generator=g)
        sign = torch.randint(0, 2, (batch, points), generator=g) * 2 - 1
        on_face = base[..., :3].clone()
        on_face[..., 2] += base[..., 5] / 2
        on_face = on_face + torch.nn.functional.one_hot(axis, 3) * sign.unsqueeze(2) * base[..., 3:6] / 2
        xyz = torch.where((face & (base[..., 6] == 0)).unsqueeze(2), on_face, xyz)
    else:
        xyz = torch.rand(batch, points, 3, generator=g) * 10
    return xyz.to(dtype).contiguous(), box.to(dtype).contiguous()


CASES = [(1, 0, 50), (1, 5, 0), (2, 1, 200), (2, 12, 700), (3, 40, 300)]


@pytest.mark.parametrize(("batch", "boxes", "n"), CASES)
def test_cpu_kernel_equals_compiled(compiled_ext, mmfix_ext, batch, boxes, n):
    xyz, box = scene(batch, boxes, n, seed=boxes + n)
    for b in range(batch):
        _, (_, _, out) = assert_same_call(
            mmfix_ext,
            compiled_ext,
            "points_in_boxes_cpu_forward",
            box[b],
            xyz[b],
            torch.zeros((boxes, n), dtype=torch.int),
            rtol=0,
            atol=0,
        )
        assert boxes == 0 or n == 0 or out.sum() > 0  # the scene does put points inside


def test_faces_follow_the_kernel_tests(compiled_ext, mmfix_ext):
    # |z - centre| <= z_size / 2 counts as inside (top and bottom faces); x and y faces do not.
    box = torch.tensor([[1.0, 2.0, -1.0, 2.0, 4.0, 2.0, 0.0]])
    pts = torch.tensor(
        [
            [1.0, 2.0, -1.0],  # bottom face
            [1.0, 2.0, 1.0],  # top face
            [2.0, 2.0, 0.0],  # x face
            [1.0, 0.0, 0.0],  # y face
            [1.999, 3.999, 0.999],  # just inside a corner
            [1.0, 2.0, 1.0001],
        ]
    )
    out = torch.zeros((1, 6), dtype=torch.int)
    mmfix_ext.points_in_boxes_cpu_forward(box, pts, out)
    assert out.tolist() == [[1, 1, 0, 0, 1, 0]]
    expected = torch.zeros((1, 6), dtype=torch.int)
    compiled_ext.points_in_boxes_cpu_forward(box, pts, expected)
    assert torch.equal(out, expected)
    assert [ref.in_box(p.numpy(), box[0].numpy())[0] for p in pts] == [bool(v) for v in out[0]]


def test_rotated_faces_equal_compiled(compiled_ext, mmfix_ext):
    # Points swept across the x face of rotated boxes: which side each lands on depends on the
    # last bit of cos/sin(rz) (float32 cos from torch's vectorised kernel differs from the C
    # library's in ~5 % of angles, and that moves some of these points).
    g = torch.Generator().manual_seed(0)
    t = torch.linspace(0.999, 1.001, 2001)
    for angle in (torch.rand(60, generator=g) * 6.4 - 3.2).tolist():
        box = torch.tensor([[0.0, 0.0, 0.0, 2.0, 3.0, 2.0, angle]])
        pts = torch.stack([t * math.cos(angle), t * math.sin(angle), torch.ones_like(t)], 1).float()
        assert_same_call(
            mmfix_ext,
            compiled_ext,
            "points_in_boxes_cpu_forward",
            box,
            pts,
            torch.zeros((1, 2001), dtype=torch.int),
            rtol=0,
            atol=0,
        )


def compiled_table(compiled_ext, xyz, box):
    """(B, M, T) from compiled mmcv's CPU kernel, batch item by batch item."""
    table = torch.zeros((xyz.size(0), box.size(1), xyz.size(1)), dtype=torch.int)
    for b in range(xyz.size(0)):
        compiled_ext.points_in_boxes_cpu_forward(box[b].float().contiguous(), xyz[b].float().contiguous(), table[b])
    return table.transpose(1, 2)


@pytest.mark.parametrize(("batch", "boxes", "n"), CASES)
def test_all_and_part_answer_as_the_cpu_kernel(compiled_ext, mmfix_ext, batch, boxes, n):
    xyz, box = scene(batch, boxes, n, seed=7 * boxes + n)
    table = compiled_table(compiled_ext, xyz, box)
    every = torch.zeros((batch, n, boxes), dtype=torch.int)
    mmfix_ext.points_in_boxes_all_forward(box, xyz, every)
    assert torch.equal(every, table)
    first = torch.full((batch, n), -1, dtype=torch.int)
    mmfix_ext.points_in_boxes_part_forward(box, xyz, first)
    expected = [[next((t for t in range(boxes) if table[b, m, t]), -1) for m in range(n)] for b in range(batch)]
    assert first.tolist() == expected
    assert boxes == 0 or n == 0 or (first >= 0).any()


def test_part_and_all_leave_the_callers_fill_where_nothing_is_found(mmfix_ext):
    xyz, box = scene(1, 3, 100, seed=1)
    xyz[:, 50:] += 1000.0
    first = torch.full((1, 100), -7, dtype=torch.int)
    mmfix_ext.points_in_boxes_part_forward(box, xyz, first)
    assert (first[:, 50:] == -7).all()
    every = torch.full((1, 100, 3), 5, dtype=torch.int)
    mmfix_ext.points_in_boxes_all_forward(box, xyz, every)
    assert (every[:, 50:] == 5).all() and set(every[:, :50].unique().tolist()) <= {1, 5}


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_half_and_double_agree_with_float32_away_from_faces(compiled_ext, mmfix_ext, dtype):
    xyz, box = scene(2, 10, 600, seed=5)
    xyz, box = xyz.to(dtype).float(), box.to(dtype).float()  # values every type holds exactly
    table = compiled_table(compiled_ext, xyz, box)
    every = torch.zeros_like(table)
    mmfix_ext.points_in_boxes_all_forward(box.to(dtype), xyz.to(dtype), every)
    # A point within 1 % of a face may legitimately flip with the arithmetic's precision.
    margin = torch.zeros_like(table, dtype=torch.bool)
    for b in range(2):
        for t in range(10):
            for m in range(600):
                _, lx, ly = ref.in_box(xyz[b, m].numpy(), box[b, t].numpy())
                z = float(xyz[b, m, 2] - box[b, t, 2] - box[b, t, 5] / 2)
                gaps = [abs(abs(float(lx)) - float(box[b, t, 3]) / 2), abs(abs(float(ly)) - float(box[b, t, 4]) / 2)]
                gaps.append(abs(abs(z) - float(box[b, t, 5]) / 2))
                margin[b, m, t] = min(gaps) < 0.01 * float(box[b, t, 3:6].max())
    assert torch.equal(every[~margin], table[~margin])
    assert table.sum() > 100


def test_cpu_function_through_mmcv(compiled_ext, mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    xyz, box = scene(2, 9, 500, seed=3)
    with swap_ext(compiled_ext):
        expected = ops.points_in_boxes_cpu(xyz, box)
    with swap_ext(mmfix_ext):
        actual = ops.points_in_boxes_cpu(xyz, box)
    assert torch.equal(actual, expected) and expected.sum() > 0


def test_part_and_all_through_mmcv(compiled_ext, mmfix_ext, cpu_wrappers):
    # mmcv's wrappers ask torch.cuda for the current device; mmfix's mmcv_ops_devices patch lets CPU tensors through.
    xyz, box = scene(2, 9, 500, seed=8)
    with swap_ext(mmfix_ext):
        first = cpu_wrappers.points_in_boxes_part(xyz, box)
        every = cpu_wrappers.points_in_boxes_all(xyz, box)
    table = compiled_table(compiled_ext, xyz, box)
    assert torch.equal(every, table) and table.sum() > 0
    assert first.tolist() == [[next((t for t in range(9) if table[b, m, t]), -1) for m in range(500)] for b in range(2)]


def test_bad_arguments_are_refused_clearly(mmfix_ext):
    xyz, box = scene(1, 2, 10, seed=0)
    with pytest.raises(TypeError, match="float32"):
        mmfix_ext.points_in_boxes_cpu_forward(box[0].double(), xyz[0].double(), torch.zeros((2, 10), dtype=torch.int))
    with pytest.raises(ValueError, match=r"\(B, T, 7\)"):
        mmfix_ext.points_in_boxes_part_forward(box[..., :6], xyz, torch.zeros((1, 10), dtype=torch.int))
    with pytest.raises(ValueError, match="batch sizes"):
        mmfix_ext.points_in_boxes_all_forward(box.expand(2, -1, -1), xyz, torch.zeros((2, 10, 2), dtype=torch.int))
    with pytest.raises(ValueError, match=r"\(boxes, points\)"):
        mmfix_ext.points_in_boxes_cpu_forward(box[0], xyz[0], torch.zeros((10, 2), dtype=torch.int))
    assert np.isfinite(xyz.numpy()).all()


def test_many_slabs_give_the_same_answer(compiled_ext, mmfix_ext, small_slabs):
    xyz, box = scene(2, 7, 300, seed=12)
    table = compiled_table(compiled_ext, xyz, box)
    every = torch.zeros((2, 300, 7), dtype=torch.int)
    mmfix_ext.points_in_boxes_all_forward(box, xyz, every)
    first = torch.full((2, 300), -1, dtype=torch.int)
    mmfix_ext.points_in_boxes_part_forward(box, xyz, first)
    assert torch.equal(every, table) and table.sum() > 0
    assert first.tolist() == [[next((t for t in range(7) if table[b, m, t]), -1) for m in range(300)] for b in range(2)]
    for b in range(2):
        assert_same_call(
            mmfix_ext,
            compiled_ext,
            "points_in_boxes_cpu_forward",
            box[b],
            xyz[b],
            torch.zeros((7, 300), dtype=torch.int),
            rtol=0,
            atol=0,
        )
