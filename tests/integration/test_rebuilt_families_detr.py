"""DETR, Deformable DETR, Cascade RPN, SSD and the Ascend heads: 2.x weights, 3.x model, same detections.

For each family, real MMDetection 2.28.2 builds the official 2.x config's model (seeded
``init_weights()``), saves its state dict and predicts on a seeded image; mmfix converts the same
config for MMDetection 3.3.0 (the automatic path: ``init_detector`` reads the 2.x file), the 2.x
state dict goes through ``_layouts2x.upgrade`` and ``load_state_dict(strict=True)`` (a missing or
unexpected key fails), and the 3.x model must give the same detections.

Each case is a small child config of the official file (copied unchanged in tests/data): only
the test scale is smaller (CPU time), and the score threshold of the anchor heads is 0, as their
seeded random weights score every anchor near their prior, below the official threshold.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from mmdet2_support import (
    CAFFE_NORM,
    PYTORCH_NORM,
    assert_same_detections,
    child_config,
    predict_2x,
    predict_3x,
    seeded_image,
)

pytestmark = pytest.mark.slow

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "mmdet2_configs"

# SSD's seeded Xavier head saturates its softmax: hundreds of scores round to exactly 1.0, and
# which of them make the 200 kept is the order of ties, not the model. A small Normal head init
# (the 2.x side's init only: the 3.x side loads its weights) spreads the scores apart.
_SSD_OVERRIDES = (
    "model = dict(test_cfg=dict(score_thr=0.0), "
    "bbox_head=dict(init_cfg=dict(type='Normal', layer='Conv2d', std=0.001)))"
)

#: case -> (official config, its normalisation, Pad divisor, model overrides, layout expected to apply)
CASES = {
    "detr": ("detr/detr_r50_8x2_150e_coco.py", PYTORCH_NORM, 1, "", "DETR (MMDetection 2.x)"),
    "deformable_detr": (
        "deformable_detr/deformable_detr_r50_16x2_50e_coco.py",
        PYTORCH_NORM,
        1,
        "",
        "Deformable DETR (MMDetection 2.x)",
    ),
    "deformable_detr_refine": (
        "deformable_detr/deformable_detr_refine_r50_16x2_50e_coco.py",
        PYTORCH_NORM,
        1,
        "",
        "Deformable DETR (MMDetection 2.x)",
    ),
    "deformable_detr_twostage_refine": (
        "deformable_detr/deformable_detr_twostage_refine_r50_16x2_50e_coco.py",
        PYTORCH_NORM,
        1,
        "",
        "Deformable DETR (MMDetection 2.x)",
    ),
    # The Cascade RPN inside Faster R-CNN (the plain RPN detector's 2.x result, proposals without
    # classes, is not a detection list the 2.x worker reads).
    "cascade_rpn": (
        "cascade_rpn/crpn_faster_rcnn_r50_caffe_fpn_1x_coco.py",
        CAFFE_NORM,
        32,
        "model = dict(test_cfg=dict(rcnn=dict(score_thr=0.0)))",
        None,
    ),
    "ascend_retinanet": (
        "retinanet/ascend_retinanet_r18_fpn_1x8_1x_coco.py",
        PYTORCH_NORM,
        32,
        "model = dict(test_cfg=dict(score_thr=0.0))",
        None,
    ),
    # SSD predicts on 3.3.0 only with mmfix's ssd_predict patch (stock: AttributeError, loss_cls)
    "ascend_ssd": ("ssd/ascend_ssd300_coco.py", None, None, _SSD_OVERRIDES, None),
    "ssd": ("ssd/ssd300_coco.py", None, None, _SSD_OVERRIDES, None),
}


def _child_config(tmp_path: Path, case: str) -> Path:
    official, norm, pad, overrides, _ = CASES[case]
    return child_config(tmp_path / f"{case}.py", CONFIGS / official, overrides, norm, pad)


#: also loaded through MMEngine's load_checkpoint (the family with the most renamed keys: one more
#: 3.x process, not one per family)
_USER_LOAD_PATH = {"deformable_detr_twostage_refine"}


def _official_3x_ssd_predicts_as_2x_and_fails_as_stock_without_the_patch(
    expected: dict, image: Path, tmp_path: Path
) -> None:
    """Issue 36: stock 3.3.0 cannot predict with its own ``ssd/ssd300_coco.py`` (AttributeError:
    'SSDHead' object has no attribute 'loss_cls'). With the ``ssd_predict`` patch, that 3.x config's
    model, given the weights of the same model built by real 2.28.2 (SSD's keys kept their names),
    predicts what 2.x predicts; with the patch switched off, stock's error, unchanged."""
    import mmdet

    official_3x = Path(mmdet.__file__).parent / ".mim" / "configs" / "ssd" / "ssd300_coco.py"
    config = tmp_path / "ssd300_3x.py"
    config.write_text(f"_base_ = [{str(official_3x)!r}]\nmodel = dict(test_cfg=dict(score_thr=0.0))\n")
    weights = tmp_path / "2x" / "state_dict.pth"
    actual, load = predict_3x(config, image, weights, tmp_path / "3x-official")
    assert load["renamed"] == {}, load
    assert_same_detections(expected, actual, atol=1e-3, score_atol=1e-5)
    with pytest.raises(AssertionError, match="'SSDHead' object has no attribute 'loss_cls'"):
        predict_3x(config, image, weights, tmp_path / "off", extra_env={"MMFIX_DISABLED_PATCHES": "ssd_predict"})


@pytest.mark.parametrize("case", sorted(CASES))
def test_2x_weights_load_strictly_and_predict_as_in_2x(case: str, mmdet2_python: Path, tmp_path: Path) -> None:
    config = _child_config(tmp_path, case)
    image = tmp_path / "image.npy"
    np.save(image, seeded_image(3))
    expected = predict_2x(mmdet2_python, config, image, tmp_path / "2x")
    actual, load = predict_3x(config, image, tmp_path / "2x" / "state_dict.pth", tmp_path / "3x")
    layout = CASES[case][4]
    # The family's own rename table applied (or none was needed: the heads kept their 2.x names).
    assert load["renamed"] == ({layout: load["renamed"].get(layout)} if layout else {}), load
    if layout:
        assert load["renamed"][layout] > 100, load  # the transformer's keys, not a stray one
    assert len(expected["scores"]) > 0, "no 2.x detections to compare"
    assert_same_detections(expected, actual, atol=1e-3, score_atol=1e-5)
    if case == "ssd":
        _official_3x_ssd_predicts_as_2x_and_fails_as_stock_without_the_patch(expected, image, tmp_path)
    if case in _USER_LOAD_PATH:
        # The path users take: MMEngine's load_checkpoint on the 2.x file (mmfix's loader patch).
        loaded, _ = predict_3x(config, image, tmp_path / "2x" / "state_dict.pth", tmp_path / "3x-mmengine", "mmengine")
        assert_same_detections(expected, loaded, atol=1e-3, score_atol=1e-5)


def test_the_automatic_path_converts_and_builds_every_official_config_of_the_families():
    # What a user's script does: import mmfix, Config.fromfile(the 2.x file), build with 3.3.0.
    from conftest import clean_env, run_python

    paths = sorted(
        str(p)
        for pattern in ("detr/*.py", "deformable_detr/*.py", "cascade_rpn/*.py", "*/ascend_*.py")
        for p in CONFIGS.glob(pattern)
    )
    assert len(paths) == 9, paths
    code = f"""
import mmfix
from mmengine.config import Config
from mmdet.registry import MODELS
from mmdet.utils import register_all_modules
register_all_modules()
for path in {paths!r}:
    model = MODELS.build(Config.fromfile(path).model)
    print("BUILT", type(model).__name__, path)
"""
    env = clean_env(PYTHONPATH=str(CONFIGS.parents[2]) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    built = [line for line in run_python(code, env=env).stdout.splitlines() if line.startswith("BUILT")]
    assert len(built) == 9, built
