"""Conversion rules on real official 2.28.2 model configs, built with MMDetection 3.3.0's registry.

The 2.x files are copied unchanged from the mmdet==2.28.2 wheel (tests/data/mmdet2_configs);
each converted model must build in 3.3.0 exactly as the Runner builds it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mmfix._configs import convert
from mmfix._errors import ConfigConversionError

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "mmdet2_configs"


def converted(relative: str) -> tuple[dict, object]:
    from mmengine.config import Config

    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)  # the stock loader: 2.x dict in
    return convert(fromfile(str(CONFIGS / relative)).to_dict())


def build(model: dict, custom_imports: dict | None = None) -> object:
    """The model, built as a config load would: the converted config's custom_imports first."""
    import importlib

    from mmdet_support import require_mmdet

    require_mmdet()
    for name in (custom_imports or {}).get("imports", []):
        importlib.import_module(name)
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import ConfigDict

    register_all_modules()
    return MODELS.build(ConfigDict(model))


def test_yolact_gets_the_mask_thresholds_2x_hard_coded():
    out, _ = converted("yolact/yolact_r50_1x8_coco.py")
    test_cfg = out["model"]["test_cfg"]
    assert test_cfg["mask_thr"] == 0.5 and test_cfg["mask_thr_binary"] == 0.5
    model = build(out["model"])
    assert model.mask_head.test_cfg.mask_thr == 0.5  # 3.x's YOLACTProtonet reads it at test time


def test_panoptic_fpn_detection_thresholds_move_from_panoptic_to_rcnn():
    out, report = converted("panoptic_fpn/panoptic_fpn_r50_fpn_1x_coco.py")
    test_cfg = out["model"]["test_cfg"]
    assert test_cfg["rcnn"] == {
        "score_thr": 0.6,
        "nms": {"type": "nms", "iou_threshold": 0.5, "class_agnostic": True},
        "max_per_img": 100,
        "mask_thr_binary": 0.5,
    }
    assert test_cfg["panoptic"] == {"mask_overlap": 0.5, "stuff_area_limit": 4096}
    assert ("model.test_cfg.panoptic.score_thr", "model.test_cfg.rcnn.score_thr") in report.converted
    pre = out["model"]["data_preprocessor"]
    assert pre["pad_mask"] is True and pre["pad_seg"] is True
    model = build(out["model"])
    assert model.roi_head.test_cfg.score_thr == 0.6
    assert model.panoptic_fusion_head.test_cfg.stuff_area_limit == 4096


def test_fcos_drops_the_train_cfg_its_head_never_reads():
    out, report = converted("fcos/fcos_r50_caffe_fpn_gn-head_1x_coco.py")
    assert "train_cfg" not in out["model"]
    assert any(key == "model.train_cfg" for key, _ in report.dropped)
    build(out["model"])


def test_model_level_pretrained_replaces_the_inherited_backbone_weights():
    out, report = converted("retinanet/retinanet_r101_fpn_mstrain_640-800_3x_coco.py")
    assert out["model"]["backbone"]["init_cfg"] == {"type": "Pretrained", "checkpoint": "torchvision://resnet101"}
    assert "pretrained" not in out["model"]
    assert any("replaces the inherited model.backbone.init_cfg" in note for note in report.notes)
    model = build(out["model"])
    assert model.backbone.init_cfg["checkpoint"] == "torchvision://resnet101"


def test_yolof_random_shift_ratio_is_3x_prob():
    out, _ = converted("yolof/yolof_r50_c5_8x8_1x_coco.py")
    shift = [t for t in out["train_dataloader"]["dataset"]["pipeline"] if t["type"] == "RandomShift"]
    assert shift == [{"type": "RandomShift", "prob": 0.5, "max_shift_px": 32}]
    from mmdet_support import require_mmdet

    require_mmdet()
    from mmdet.registry import TRANSFORMS
    from mmdet.utils import register_all_modules

    register_all_modules()
    assert TRANSFORMS.build(shift[0]).prob == 0.5


def test_test_annotations_load_after_the_geometric_steps():
    out, _ = converted("centernet/centernet_resnet18_dcnv2_140e_coco.py")
    steps = [t["type"] for t in out["test_dataloader"]["dataset"]["pipeline"]]
    assert steps.index("LoadAnnotations") == len(steps) - 2 and steps[-1] == "PackDetInputs"
    assert steps.index("RandomCenterCropPad") < steps.index("LoadAnnotations")


def _lrs(schedulers: list[dict], steps: int) -> list[float]:
    """The lr MMEngine's own schedulers produce for the first `steps` iterations (base lr 1.0)."""
    import torch
    from mmengine.optim.scheduler import ConstantLR, CosineAnnealingLR, ExponentialLR, LinearLR, MultiStepLR

    kinds = {
        "ConstantLR": ConstantLR,
        "ExponentialLR": ExponentialLR,
        "LinearLR": LinearLR,
        "MultiStepLR": MultiStepLR,
        "CosineAnnealingLR": CosineAnnealingLR,
    }
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    built = []
    for cfg in schedulers:
        cfg = dict(cfg)
        built.append(kinds[cfg.pop("type")](optimizer, **cfg))
    lrs = []
    for _ in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        for scheduler in built:
            scheduler.step()
    return lrs


def test_exp_warmup_is_exact_in_mmengine_schedulers():
    out, report = convert(
        {
            "lr_config": {
                "policy": "step",
                "warmup": "exp",
                "warmup_iters": 10,
                "warmup_ratio": 0.01,
                "step": [40],
                "by_epoch": False,
            },
            "runner": {"type": "IterBasedRunner", "max_iters": 50},
            "optimizer": {"type": "SGD", "lr": 1.0},
        }
    )
    schedulers = out["param_scheduler"]
    assert [s["type"] for s in schedulers] == ["ConstantLR", "ExponentialLR", "MultiStepLR"]
    lrs = _lrs(schedulers, 50)
    # mmcv 1.x LrUpdaterHook, warmup='exp': regular_lr * ratio ** (1 - t / T) for t < T
    expected = [0.01 ** (1 - t / 10) if t < 10 else (1.0 if t < 40 else 0.1) for t in range(50)]
    assert all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(lrs, expected)), list(zip(lrs, expected))
    assert any("warmup='exp'" in note for note in report.notes)


@pytest.mark.parametrize(
    "lr_config, key, offered",
    [
        (
            {"policy": "step", "step": [8], "warmup": "exp", "warmup_iters": 1, "warmup_by_epoch": True},
            "lr_config.warmup",
            "warmup_by_epoch=False",
        ),
        ({"policy": "cyclic", "target_ratio": [10, 1e-4]}, "lr_config.policy", "OneCycleLR"),
        ({"policy": "cyclic", "cyclic_times": 2}, "lr_config.cyclic_times", "cyclic_times=1"),
        ({"policy": "cyclic", "anneal_strategy": "linear"}, "lr_config.anneal_strategy", "'cos'"),
    ],
)
def test_unconvertible_schedules_name_key_value_and_what_3x_offers(lr_config, key, offered):
    with pytest.raises(ConfigConversionError) as info:
        convert({"lr_config": lr_config, "runner": {"type": "EpochBasedRunner", "max_epochs": 12}})
    message = str(info.value)
    assert f"`{key}`" in message and offered in message and "\n" not in message


def _mmcv_cyclic(t: int, total: int, up_ratio: float, r0: float, r1: float, strategy: str) -> float:
    """mmcv 1.x CyclicLrUpdaterHook.get_lr (one cycle, base lr 1.0)."""
    up = int(up_ratio * total)
    start, end, progress = (1.0, r0, t / up) if t < up else (r0, r1, (t - up) / (total - up))
    if strategy == "cos":
        return end + 0.5 * (start - end) * (math.cos(math.pi * progress) + 1)
    return start + (end - start) * progress


@pytest.mark.parametrize("strategy, r0, r1", [("cos", 10, 1e-4), ("linear", 0.5, 1e-3)])
def test_cyclic_policy_of_an_iteration_run_is_exact(strategy, r0, r1):
    out, _ = convert(
        {
            "lr_config": {
                "policy": "cyclic",
                "target_ratio": (r0, r1),
                "cyclic_times": 1,
                "step_ratio_up": 0.4,
                "anneal_strategy": strategy,
            },
            "momentum_config": {
                "policy": "cyclic",
                "target_ratio": (0.85 / 0.95, 1),
                "cyclic_times": 1,
                "step_ratio_up": 0.4,
            },
            "runner": {"type": "IterBasedRunner", "max_iters": 25},
            "optimizer": {"type": "SGD", "lr": 1.0},
        }
    )
    lr = [s for s in out["param_scheduler"] if s["type"].endswith("LR")]
    lrs = _lrs(lr, 25)
    expected = [_mmcv_cyclic(t, 25, 0.4, r0, r1, strategy) for t in range(25)]
    assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(lrs, expected)), list(zip(lrs, expected))
    momentum = [s for s in out["param_scheduler"] if s["type"].endswith("Momentum")]
    assert [m["type"] for m in momentum] == ["CosineAnnealingMomentum"] * 2
    assert momentum[0]["eta_min_ratio"] == 0.85 / 0.95 and momentum[1]["begin"] == 10


def test_cyclic_schedulers_build_in_mmengine():
    import torch
    from mmengine.optim.scheduler import CosineAnnealingMomentum

    out, _ = convert(
        {
            "lr_config": {"policy": "cyclic"},
            "momentum_config": {"policy": "cyclic"},
            "runner": {"type": "IterBasedRunner", "max_iters": 10},
        }
    )
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0, momentum=0.95)
    for cfg in [s for s in out["param_scheduler"] if s["type"] == "CosineAnnealingMomentum"]:
        cfg = dict(cfg)
        cfg.pop("type")
        CosineAnnealingMomentum(optimizer, **cfg)


def test_htc_family_masks_are_not_batch_padded_as_in_3x_and_it_is_said():
    out, report = converted("htc/htc_without_semantic_r50_fpn_1x_coco.py")
    pre = out["model"]["data_preprocessor"]
    assert "pad_mask" not in pre and pre["pad_size_divisor"] == 32
    assert any("pad_mask left out" in note for note in report.notes)
    model = build(out["model"], out["custom_imports"])
    assert model.data_preprocessor.pad_mask is False


def test_yolov3_keeps_every_pair_before_nms_as_2x_did():
    """Issue 22: 2.x's YOLOV3Head never read test_cfg.nms_pre (1000 in the official config); 3.x's
    keeps only that many (box, class) pairs before NMS, which changes the detections. The
    converted config keeps all of them, and says so."""
    out, report = converted("yolo/yolov3_d53_mstrain-608_273e_coco.py")
    assert out["model"]["test_cfg"]["nms_pre"] == 2**31 - 1
    assert any("2.x's YOLOV3Head never read it" in note for note in report.notes)
    model = build(out["model"])
    assert model.bbox_head.test_cfg.nms_pre == 2**31 - 1


def test_ms_rcnn_keeps_2x_scoring_with_mmfixs_mask_iou_head():
    """Issue 36: 3.x multiplies every detection's score by the predicted mask IoU (boxes included);
    2.x did so for the masks only. The converted config names mmfix's MaskIoUHead2x (the same
    modules, 2.x's scoring: ``mask_scores``) and says so; nothing is left as a difference."""
    out, report = converted("ms_rcnn/ms_rcnn_r50_fpn_1x_coco.py")
    assert out["model"]["type"] == "MaskScoringRCNN"
    assert out["model"]["roi_head"]["mask_iou_head"]["type"] == "MaskIoUHead2x"
    assert out["custom_imports"]["imports"] == ["mmfix._legacy_models.mmdet"]
    assert any("2.x's scoring kept" in note for note in report.notes), report.notes
    assert report.differences == []
    model = build(out["model"], out["custom_imports"])
    assert type(model.roi_head.mask_iou_head).__name__ == "MaskIoUHead2x"


def test_htc_keeps_2x_masks_with_mmfixs_roi_head():
    """Issue 36: 3.3.0's HTC keeps only the last stage's mask at test time; 2.x averaged them all.
    The converted config names mmfix's HybridTaskCascadeRoIHead2x (the same modules) and says so."""
    out, report = converted("htc/htc_without_semantic_r50_fpn_1x_coco.py")
    assert out["model"]["roi_head"]["type"] == "HybridTaskCascadeRoIHead2x"
    assert out["custom_imports"]["imports"] == ["mmfix._legacy_models.mmdet"]
    assert any("2.x's masks kept" in note for note in report.notes), report.notes
    model = build(out["model"], out["custom_imports"])
    assert type(model.roi_head).__name__ == "HybridTaskCascadeRoIHead2x"
    assert [type(h).__name__ for h in model.roi_head.mask_head] == ["HTCMaskHead"] * 3


def test_multi_scale_flip_tta_merges_as_2x_under_tta(tmp_path):
    """Issue 36: a 2.x multi-scale / flip test pipeline becomes the tta_pipeline (2.x's order: each
    scale unflipped, then flipped) and mmfix's DetTTAModel2x, which merges as 2.x's aug_test did."""
    from mmdet_support import MMDET2_BASE

    config = tmp_path / "tta_2x.py"
    config.write_text(f"""
_base_ = ['{MMDET2_BASE}/models/retinanet_r50_fpn.py', '{MMDET2_BASE}/datasets/coco_detection.py']
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)
data = dict(test=dict(pipeline=[
    dict(type='LoadImageFromFile'),
    dict(type='MultiScaleFlipAug', img_scale=[(1333, 800), (666, 400)], flip=True,
         flip_direction=['horizontal', 'vertical'], transforms=[
        dict(type='Resize', keep_ratio=True), dict(type='RandomFlip'), dict(type='Normalize', **img_norm_cfg),
        dict(type='Pad', size_divisor=32), dict(type='ImageToTensor', keys=['img']),
        dict(type='Collect', keys=['img'])])]))
""")
    from mmengine.config import Config

    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)
    out, report = convert(fromfile(str(config)).to_dict())
    assert out["tta_model"]["type"] == "DetTTAModel2x"
    assert out["custom_imports"]["imports"] == ["mmfix._legacy_models.mmdet"]
    steps = out["tta_pipeline"][1]["transforms"]
    assert [r["scale"] for r in steps[0]] == [(1333, 800), (666, 400)]
    assert [(f["prob"], f.get("direction")) for f in steps[1]] == [
        (0.0, None),
        (1.0, "horizontal"),
        (1.0, "vertical"),
    ]
    assert any("merges as 2.x's aug_test did" in note for note in report.notes), report.notes
    assert report.differences == []
