"""Today's Python stack: setuptools without pkg_resources, and mmcv 2.2, with the real packages.

The pkg_resources test needs an environment where setuptools >= 82 is installed (the README's
test command installs one, as does every cell of scripts/matrix.sh); the mmcv 2.2 test needs mmcv
(or mmcv-lite) 2.2 (the matrix cell `ceiling`, which CI runs). Each skips elsewhere, saying why;
CI's main run and every matrix cell set REQUIRE_NO_PKG_RESOURCES=1, and the cells that pin mmcv
2.2 set REQUIRE_MMCV22=1, so there they fail instead.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from conftest import clean_env, run_python

pytestmark = pytest.mark.slow


def _require(flag: str, ok: bool, why: str) -> None:
    if ok:
        return
    if os.environ.get(flag) == "1":
        pytest.fail(f"{flag}=1 but {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def no_pkg_resources() -> None:
    _require(
        "REQUIRE_NO_PKG_RESOURCES",
        importlib.util.find_spec("pkg_resources") is None,
        "pkg_resources is installed here (setuptools < 82): nothing to show",
    )
    _require("REQUIRE_MMDET", importlib.util.find_spec("mmdet") is not None, "MMDetection 3.x is not installed")


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "user_config.py"
    path.write_text(
        "_base_ = 'mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py'\n"
        "model = dict(roi_head=dict(bbox_head=dict(num_classes=3)))\n"
    )
    return path


LOAD = """
import importlib.util, sys
assert importlib.util.find_spec('pkg_resources') is None
{prefix}
from mmengine.config import Config
cfg = Config.fromfile(sys.argv[1])
print('MODEL', cfg.model.type, cfg.model.roi_head.bbox_head.num_classes, cfg.model.backbone.depth)
from mmengine.utils import get_installed_path, is_installed
import mmdet, os
assert is_installed('mmdet') and not is_installed('no-such-package-xyz')
assert get_installed_path('mmdet') == os.path.dirname(mmdet.__file__), get_installed_path('mmdet')
print('OK')
"""


def test_an_mmdet_scope_base_loads_without_pkg_resources(no_pkg_resources, tmp_path: Path) -> None:
    config = _config(tmp_path)
    code = LOAD.format(prefix="import mmfix")
    proc = run_python(code.replace("sys.argv[1]", repr(str(config))), env=clean_env())
    assert "MODEL FasterRCNN 3 50" in proc.stdout and "OK" in proc.stdout


def test_control_stock_mmengine_needs_pkg_resources(no_pkg_resources, tmp_path: Path) -> None:
    config = _config(tmp_path)
    code = LOAD.format(prefix="")
    proc = run_python(code.replace("sys.argv[1]", repr(str(config))), env=clean_env(MMFIX_DISABLE="1"), check=False)
    assert proc.returncode != 0
    assert "No module named 'pkg_resources'" in proc.stderr


@pytest.fixture(scope="module")
def mmcv22() -> str:
    from importlib import metadata

    version = None
    for name in ("mmcv", "mmcv-lite"):
        try:
            version = metadata.version(name)
            break
        except metadata.PackageNotFoundError:
            pass
    _require("REQUIRE_MMCV22", bool(version and version.startswith("2.2.")), f"mmcv here is {version}, not 2.2")
    assert version is not None
    return version


PREDICT = """
import torch
{prefix}
import mmdet, mmcv
print('VERSIONS', mmdet.__version__, mmcv.__version__)
from mmengine.config import Config
from mmdet.registry import MODELS
from mmdet.utils import register_all_modules
from mmdet.structures import DetDataSample
register_all_modules()
cfg = Config.fromfile('{config}')
cfg.model.backbone.init_cfg = None
torch.manual_seed(0)
model = MODELS.build(cfg.model).eval()
sample = DetDataSample(metainfo=dict(img_shape=(128, 160), ori_shape=(128, 160), scale_factor=(1.0, 1.0)))
with torch.no_grad():
    data = model.data_preprocessor(dict(inputs=[torch.randint(0, 255, (3, 128, 160), dtype=torch.uint8)],
                                        data_samples=[sample]))
    result = model(**data, mode='predict')[0]
print('PREDICTED', len(result.pred_instances.bboxes))
"""


def test_mmdet_on_mmcv22_imports_and_predicts(mmcv22: str) -> None:
    spec = importlib.util.find_spec("mmdet")  # not imported here: this process keeps mmfix off
    assert spec is not None and spec.origin is not None
    config = Path(spec.origin).parent / ".mim/configs/faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py"
    proc = run_python(PREDICT.format(prefix="import mmfix", config=config), env=clean_env(), timeout=600)
    assert re.search(r"VERSIONS 3\.3\.0 2\.2\.", proc.stdout), proc.stdout
    assert "PREDICTED" in proc.stdout
    assert "asserts mmcv < 2.2.0" in proc.stderr  # the one notice
    control = run_python(PREDICT.format(prefix="", config=config), env=clean_env(MMFIX_DISABLE="1"), check=False)
    assert control.returncode != 0 and "Please install mmcv>=2.0.0rc4, <2.2.0" in control.stderr


#: The other toolboxes whose releases assert mmcv < 2.2.0 (mmfix._patches.mmcv_bound.BOUNDS):
#: the matrix cell that pins mmcv 2.2 installs these releases (without their heavy dependencies,
#: which their top-level import does not need).
TOOLBOXES_ON_MMCV22 = {"mmseg": "1.2.2", "mmdet3d": "1.4.0"}

IMPORT = """
{prefix}
import mmcv, {package}
print('VERSIONS', {package}.__version__, mmcv.__version__)
"""


@pytest.mark.parametrize("package", sorted(TOOLBOXES_ON_MMCV22))
def test_toolboxes_on_mmcv22_import_with_one_notice(mmcv22: str, package: str) -> None:
    _require(
        "REQUIRE_MMCV22",
        importlib.util.find_spec(package) is not None,
        f"{package} {TOOLBOXES_ON_MMCV22[package]} is not installed here",
    )
    proc = run_python(IMPORT.format(prefix="import mmfix", package=package), env=clean_env(), timeout=300)
    assert re.search(rf"VERSIONS {re.escape(TOOLBOXES_ON_MMCV22[package])} 2\.2\.", proc.stdout), proc.stdout
    # One notice for the toolbox (mmdet3d imports mmdet, which gets its own).
    notice = f"{package} {TOOLBOXES_ON_MMCV22[package]} asserts mmcv < 2.2.0"
    assert proc.stderr.count(notice) == 1, proc.stderr
    control = run_python(IMPORT.format(prefix="", package=package), env=clean_env(MMFIX_DISABLE="1"), check=False)
    assert control.returncode != 0 and "AssertionError" in control.stderr and "2.2.0" in control.stderr, control.stderr
