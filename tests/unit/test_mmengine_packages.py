"""MMEngine's package helpers without pkg_resources give pkg_resources' answers."""

from __future__ import annotations

import importlib.util

import pytest

from mmfix._patches import mmengine_packages as packages

# Installed in the test environment: plain wheels, a package whose module name differs from its
# distribution name (opencv-python -> cv2), an editable install (mmfix itself), a module that is
# importable but not a distribution (os), and one that does not exist.
NAMES = ("mmengine", "torch", "numpy", "mmdet", "mmcv", "opencv-python", "mmfix", "os", "no-such-package-xyz")


@pytest.fixture(scope="module")
def stock():
    if importlib.util.find_spec("pkg_resources") is None:
        pytest.skip("pkg_resources is not installed here: MMEngine's own helpers cannot run to compare with")
    from mmengine.utils import package_utils

    return package_utils


def _answer(function, name):
    try:
        return ("ok", function(name))
    except Exception as exc:  # both sides must fail alike
        return ("raises", type(exc).__name__)


@pytest.mark.parametrize("name", NAMES)
def test_is_installed_answers_as_pkg_resources(stock, name) -> None:
    assert packages.is_installed(name) == stock.is_installed(name)


@pytest.mark.parametrize("name", NAMES)
def test_get_installed_path_answers_as_pkg_resources(stock, name) -> None:
    mine, theirs = _answer(packages.get_installed_path, name), _answer(stock.get_installed_path, name)
    if theirs[0] == "raises":
        assert mine[0] == "raises"
    else:
        assert mine == theirs


@pytest.mark.parametrize("name", ["opencv-python", "mmengine", "numpy", "no-such-package-xyz"])
def test_package2module_answers_as_pkg_resources(stock, name) -> None:
    # numpy (built with meson) has no top_level.txt: both raise ValueError
    mine, theirs = _answer(packages.package2module, name), _answer(stock.package2module, name)
    assert mine == theirs or (mine[0] == theirs[0] == "raises")


def test_names_are_matched_in_any_spelling() -> None:
    assert packages.is_installed("opencv_python")
    assert packages.package2module("opencv_python") == "cv2"
