"""DETR, Deformable DETR, Cascade RPN, SSD and the Ascend heads: 2.x weights, 3.x model, same detections.

For each family, real MMDetection 2.28.2 builds the official 2.x config's model (seeded
``init_weights()``), saves its state dict and predicts on a seeded image; mmfix converts the same
config for MMDetection 3.3.0 (the automatic path: ``init_detector`` reads the 2.x file), the 2.x
state dict goes through ``_layouts2x.upgrade`` and ``load_state_dict(strict=True)`` (a missing or
unexpected key fails), and the 3.x model must give the same detections.

Each case is a small child config of the official file (copied unchanged in tests/data): only
the test scale is smaller (CPU time), and the score threshold of the anchor heads is 0, as their
seeded random weights score every anchor near their prior, below the official threshold.
All cases predict in one 2.x process and one 3.x process (the ``predictions`` fixture).
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
    job_2x,
    job_3x,
    load_report,
    result_of,
    run_batch,
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


#: also loaded through MMEngine's load_checkpoint (the family with the most renamed keys: one more
#: 3.x prediction, not one per family)
_USER_LOAD_PATH = {"deformable_detr_twostage_refine"}


@pytest.fixture(scope="module")
def predictions(mmdet2_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every case's folder: ``2x/`` (2.28.2's prediction and state dict), ``3x/`` (3.3.0's with
    mmfix, through ``upgrade``), ``3x-mmengine/`` (``_USER_LOAD_PATH``); for ``ssd`` also
    ``3x-official/`` and ``3x-patch-off/`` (3.3.0's own SSD config: issue 36)."""
    import mmdet

    root = tmp_path_factory.mktemp("families")
    image = root / "image.npy"
    np.save(image, seeded_image(3))
    jobs_2x, jobs_3x, folders = [], [], {}
    for case, (official, norm, pad, overrides, _) in CASES.items():
        folder = folders[case] = root / case
        folder.mkdir()
        config = child_config(folder / f"{case}.py", CONFIGS / official, overrides, norm, pad)
        weights = folder / "2x" / "state_dict.pth"
        jobs_2x.append(job_2x(config, image, folder / "2x"))
        jobs_3x.append(job_3x(config, image, weights, folder / "3x"))
        if case in _USER_LOAD_PATH:  # the path users take: MMEngine's load_checkpoint on the 2.x file
            jobs_3x.append(job_3x(config, image, weights, folder / "3x-mmengine", "mmengine"))
    # 3.3.0's own ssd/ssd300_coco.py, given the weights of the same model built by real 2.28.2
    official_3x = Path(mmdet.__file__).parent / ".mim" / "configs" / "ssd" / "ssd300_coco.py"
    ssd_3x = root / "ssd300_3x.py"
    ssd_3x.write_text(f"_base_ = [{str(official_3x)!r}]\nmodel = dict(test_cfg=dict(score_thr=0.0))\n")
    ssd_weights = folders["ssd"] / "2x" / "state_dict.pth"
    jobs_3x.append(job_3x(ssd_3x, image, ssd_weights, folders["ssd"] / "3x-official"))
    run_batch(jobs_2x, python=mmdet2_python)
    run_batch(jobs_3x)
    patch_off = job_3x(ssd_3x, image, ssd_weights, folders["ssd"] / "3x-patch-off")
    run_batch([patch_off], extra_env={"MMFIX_DISABLED_PATCHES": "ssd_predict"})
    return folders


def test_official_3x_ssd_predicts_as_2x_and_fails_as_stock_without_the_patch(predictions: dict[str, Path]) -> None:
    """Issue 36: stock 3.3.0 cannot predict with its own ``ssd/ssd300_coco.py`` (AttributeError:
    'SSDHead' object has no attribute 'loss_cls'). With the ``ssd_predict`` patch, that 3.x config's
    model, given the weights of the same model built by real 2.28.2 (SSD's keys kept their names),
    predicts what 2.x predicts; with the patch switched off, stock's error, unchanged."""
    folder = predictions["ssd"]
    expected = result_of(folder / "2x")
    assert load_report(folder / "3x-official")["renamed"] == {}
    assert_same_detections(expected, result_of(folder / "3x-official"), atol=1e-3, score_atol=1e-5)
    with pytest.raises(AssertionError, match="'SSDHead' object has no attribute 'loss_cls'"):
        result_of(folder / "3x-patch-off")


@pytest.mark.parametrize("case", sorted(CASES))
def test_2x_weights_load_strictly_and_predict_as_in_2x(case: str, predictions: dict[str, Path]) -> None:
    folder = predictions[case]
    expected, actual, load = result_of(folder / "2x"), result_of(folder / "3x"), load_report(folder / "3x")
    layout = CASES[case][4]
    # The family's own rename table applied (or none was needed: the heads kept their 2.x names).
    assert load["renamed"] == ({layout: load["renamed"].get(layout)} if layout else {}), load
    if layout:
        assert load["renamed"][layout] > 100, load  # the transformer's keys, not a stray one
    assert len(expected["scores"]) > 0, "no 2.x detections to compare"
    assert_same_detections(expected, actual, atol=1e-3, score_atol=1e-5)
    if case in _USER_LOAD_PATH:
        assert_same_detections(expected, result_of(folder / "3x-mmengine"), atol=1e-3, score_atol=1e-5)


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
