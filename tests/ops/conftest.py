"""Fixtures for the op tests (see tests/ops_support.py for the ground truth and the comparisons)."""

from __future__ import annotations

from types import ModuleType

import pytest

from ops_support import load_compiled_ext


@pytest.fixture(scope="session")
def compiled_ext(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """mmcv 2.1.0's compiled extension (CPU kernels), loaded beside whatever mmcv is installed."""
    return load_compiled_ext(tmp_path_factory.mktemp("compiled-mmcv"))


@pytest.fixture(scope="session")
def mmfix_ext() -> ModuleType:
    """mmfix's stand-in extension, built directly (the test process keeps mmfix's patches off)."""
    from mmfix._ops import _ext

    return _ext.build()
