"""RoI point pooling against a loop of mmcv's CUDA kernels (no CPU kernel in mmcv), and mmcv's RoIPointPool3d."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops.devices3d import small_slabs_fixture  # noqa: F401 - the small_slabs fixture
from ops_support import import_mmcv_ops, swap_ext


def scene(batch: int, boxes: int, points: int, channels: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    box = torch.cat(
        [
            torch.rand(batch, boxes, 3, generator=g) * 4 - 2,
            torch.rand(batch, boxes, 3, generator=g) * 1.5 + 0.2,
            torch.rand(batch, boxes, 1, generator=g) * 6.2 - 3.1,
        ],
        dim=2,
    )
    xyz = torch.rand(batch, points, 3, generator=g) * 6 - 3
    xyz[..., 2] = xyz[..., 2] / 3 + 0.3
    feats = torch.randn(batch, points, channels, generator=g)
    return xyz.contiguous(), box.contiguous(), feats.contiguous()


@pytest.mark.parametrize(
    ("batch", "boxes", "points", "channels", "samples"), [(1, 3, 200, 1, 4), (2, 6, 400, 3, 16), (2, 10, 1500, 2, 64)]
)
def test_pooling_equals_the_kernel_loops(mmfix_ext, batch, boxes, points, channels, samples):
    xyz, box, feats = scene(batch, boxes, points, channels, seed=points)
    box[0, 0] += torch.tensor([100.0, 0, 0, 0, 0, 0, 0])  # an empty box
    pooled = torch.zeros((batch, boxes, samples, 3 + channels))
    flags = torch.zeros((batch, boxes), dtype=torch.int)
    mmfix_ext.roipoint_pool3d_forward(xyz, box, feats, pooled, flags)
    want_pooled, want_flags = ref.roipoint_pool3d(xyz, box, feats, samples)
    assert np.array_equal(flags.numpy(), want_flags) and flags[0, 0] == 1
    assert np.array_equal(pooled.numpy(), want_pooled)
    assert (want_flags == 0).sum() > 0


def test_a_box_the_caller_flagged_is_left_alone(mmfix_ext):
    xyz, box, feats = scene(1, 3, 300, 2, seed=1)
    pooled = torch.full((1, 3, 8, 5), 4.0)
    flags = torch.tensor([[0, 1, 0]], dtype=torch.int)
    mmfix_ext.roipoint_pool3d_forward(xyz, box, feats, pooled, flags)
    assert (pooled[0, 1] == 4.0).all()


def test_compiled_mmcv_has_no_cpu_kernel(compiled_ext):
    xyz, box, feats = scene(1, 1, 10, 1, seed=0)
    with pytest.raises(RuntimeError, match="cpu not found"):
        compiled_ext.roipoint_pool3d_forward(
            xyz, box, feats, torch.zeros((1, 1, 4, 4)), torch.zeros((1, 1), dtype=torch.int)
        )


def test_roipoint_pool3d_module_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    xyz, box, feats = scene(2, 5, 700, 3, seed=3)
    with swap_ext(mmfix_ext):
        pooled, flags = ops.RoIPointPool3d(num_sampled_points=32)(xyz, feats, box)
    want_pooled, want_flags = ref.roipoint_pool3d(xyz, box, feats, 32)
    assert np.array_equal(pooled.numpy(), want_pooled) and np.array_equal(flags.numpy(), want_flags)


def test_half_inputs_give_the_float32_result(mmfix_ext):
    xyz, box, feats = scene(2, 6, 800, 3, seed=6)
    xyz, box, feats = xyz.half(), box.half(), feats.half()
    outputs = []
    for dtype in (torch.float16, torch.float32):
        pooled = torch.zeros((2, 6, 16, 6), dtype=dtype)
        flags = torch.zeros((2, 6), dtype=torch.int)
        mmfix_ext.roipoint_pool3d_forward(xyz.to(dtype), box.to(dtype), feats.to(dtype), pooled, flags)
        outputs.append((pooled, flags))
    (half, half_flags), (wide, wide_flags) = outputs
    # a point near a face may fall the other side in half arithmetic: compare the boxes that pooled the same points
    same = (half.float() == wide).all(dim=-1).all(dim=-1) & (half_flags == wide_flags)
    assert same.float().mean() > 0.8 and (wide_flags == 0).sum() > 4


def test_many_slabs_give_the_same_answer(mmfix_ext, small_slabs):
    xyz, box, feats = scene(2, 5, 300, 2, seed=14)
    pooled = torch.zeros((2, 5, 8, 5))
    flags = torch.zeros((2, 5), dtype=torch.int)
    mmfix_ext.roipoint_pool3d_forward(xyz, box, feats, pooled, flags)
    want_pooled, want_flags = ref.roipoint_pool3d(xyz, box, feats, 8)
    assert np.array_equal(pooled.numpy(), want_pooled) and np.array_equal(flags.numpy(), want_flags)
