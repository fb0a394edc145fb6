"""Fixtures of the 3D op tests: the ``mmcv_ops_devices`` patch (mmcv's CUDA-assuming 3D wrappers on CPU), small slabs.

The test process keeps mmfix's patches off (tests/conftest.py); tests that run mmcv's
``furthest_point_sample``, ``knn`` or ``points_in_boxes_part/all`` on CPU apply that
one patch for their duration (import ``cpu_wrappers_fixture`` into the test module).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from ops_support import import_mmcv_ops


@pytest.fixture(name="cpu_wrappers")
def cpu_wrappers_fixture(mmfix_ext: ModuleType) -> Iterator[ModuleType]:
    from mmfix._patches import mmcv_ops_devices

    ops = import_mmcv_ops(mmfix_ext)
    assert mmcv_ops_devices.apply() is None
    try:
        yield ops
    finally:
        mmcv_ops_devices.remove()


@pytest.fixture(name="small_slabs")
def small_slabs_fixture(monkeypatch: pytest.MonkeyPatch) -> int:
    """The 3D ops' (queries x points) slabs shrunk to a few hundred elements: every op then works in many slabs."""
    from mmfix._ops import _points3d

    monkeypatch.setattr(_points3d, "PAIR_BUDGET", 300)
    return 300
