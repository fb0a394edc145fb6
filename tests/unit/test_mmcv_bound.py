"""The table of toolbox lines that bound mmcv below 2.2, against the real installed sources."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mmfix._patches import mmcv_bound


def _source(package: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        pytest.skip(f"{package} is not installed")
    return Path(spec.origin).read_text()


@pytest.mark.parametrize("package", ["mmdet", "mmseg", "mmdet3d"])
def test_each_row_is_the_line_the_installed_toolbox_has(package: str) -> None:
    source = _source(package)
    assert mmcv_bound.needs_relaxing(package, source, "2.2.0") is mmcv_bound._BY_PACKAGE[package]


@pytest.mark.parametrize("version", ["2.1.0", "2.0.1", "2.3.0", "1.7.2", None])
def test_only_mmcv_2_2_is_accepted_beyond_the_bound(version) -> None:
    assert mmcv_bound.needs_relaxing("mmdet", _source("mmdet"), version) is None


def test_a_toolbox_without_the_line_is_left_alone() -> None:
    assert mmcv_bound.needs_relaxing("mmdet", "mmcv_maximum_version = '2.4.0'\n", "2.2.0") is None
    assert mmcv_bound.needs_relaxing("mmpretrain", _source("mmpretrain"), "2.2.0") is None
