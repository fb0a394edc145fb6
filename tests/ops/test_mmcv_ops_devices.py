"""The ``mmcv_ops_devices`` patch: mmcv's CUDA-assuming 3D wrappers on CPU tensors, and its undo."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from ops import reference3d as ref
from ops_support import import_mmcv_ops, swap_ext

WRAPPED = [
    ("mmcv.ops.furthest_point_sample", "furthest_point_sample"),
    ("mmcv.ops.points_sampler", "furthest_point_sample"),
    ("mmcv.ops.knn", "knn"),
    ("mmcv.ops.group_points", "knn"),
    ("mmcv.ops.points_in_boxes", "points_in_boxes_part"),
    ("mmcv.ops.points_in_boxes", "points_in_boxes_all"),
    ("mmcv.ops", "furthest_point_sample"),
    ("mmcv.ops", "knn"),
    ("mmcv.ops", "points_in_boxes_part"),
    ("mmcv.ops", "points_in_boxes_all"),
]


def test_apply_wraps_every_alias_and_remove_restores_them(mmfix_ext):
    from mmfix._patches import mmcv_ops_devices

    import_mmcv_ops(mmfix_ext)
    originals = {(m, n): getattr(sys.modules[m], n) for m, n in WRAPPED}
    xyz = torch.rand(1, 50, 3, generator=torch.Generator().manual_seed(0))
    assert mmcv_ops_devices.apply() is None
    try:
        for module, name in WRAPPED:
            current = getattr(sys.modules[module], name)
            assert current is not originals[(module, name)] and current.__wrapped__ is originals[(module, name)], (
                module,
                name,
            )
        with swap_ext(mmfix_ext):
            idx = sys.modules["mmcv.ops"].furthest_point_sample(xyz, 5)
        assert np.array_equal(idx.numpy(), ref.furthest_point_sample(xyz, 5)[0])
    finally:
        mmcv_ops_devices.remove()
    for module, name in WRAPPED:
        assert getattr(sys.modules[module], name) is originals[(module, name)], (module, name)
    if not torch.cuda.is_available():  # mmcv's own wrapper again: it allocates torch.cuda tensors
        with swap_ext(mmfix_ext), pytest.raises((TypeError, AssertionError, RuntimeError)):
            sys.modules["mmcv.ops"].furthest_point_sample(xyz, 5)


def test_the_cpu_paths_keep_mmcvs_checks(mmfix_ext):
    from mmfix._patches import mmcv_ops_devices

    ops = import_mmcv_ops(mmfix_ext)
    assert mmcv_ops_devices.apply() is None
    try:
        with swap_ext(mmfix_ext):
            with pytest.raises(AssertionError, match="same batch size"):
                ops.points_in_boxes_part(torch.rand(2, 10, 3), torch.rand(1, 3, 7))
            with pytest.raises(AssertionError, match="boxes dimension should be 7"):
                ops.points_in_boxes_all(torch.rand(1, 10, 3), torch.rand(1, 3, 6))
            with pytest.raises(AssertionError, match="range"):
                ops.knn(100, torch.rand(1, 10, 3))
            # knn with the centres defaulting to the points: each point is its own nearest
            idx = ops.knn(1, torch.rand(1, 10, 3, generator=torch.Generator().manual_seed(1)))
            assert idx.tolist() == [[list(range(10))]]
    finally:
        mmcv_ops_devices.remove()
