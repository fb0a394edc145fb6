"""MMSegmentation 0.x config rules (mmfix/_configs/_mmseg.py), as pure functions on dicts.

Whole official configs through the real 1.x tools and APIs are tests/integration/test_family_0x_mmseg.py
and benchmarks/family_zoo.py; here each rule on a small 0.x config written as the 0.30 zoo writes them.
"""

from __future__ import annotations

import copy

import pytest

from mmfix._configs import ConfigConversionError, convert

NORM = {"mean": [123.675, 116.28, 103.53], "std": [58.395, 57.12, 57.375], "to_rgb": True}
TRAIN = [
    {"type": "LoadImageFromFile"},
    {"type": "LoadAnnotations", "reduce_zero_label": True},
    {"type": "Resize", "img_scale": (2048, 512), "ratio_range": (0.5, 2.0)},
    {"type": "RandomCrop", "crop_size": (512, 512), "cat_max_ratio": 0.75},
    {"type": "RandomFlip", "prob": 0.5},
    {"type": "PhotoMetricDistortion"},
    {"type": "Normalize", **NORM},
    {"type": "Pad", "size": (512, 512), "pad_val": 0, "seg_pad_val": 255},
    {"type": "DefaultFormatBundle"},
    {"type": "Collect", "keys": ["img", "gt_semantic_seg"]},
]
TEST = [
    {"type": "LoadImageFromFile"},
    {
        "type": "MultiScaleFlipAug",
        "img_scale": (2048, 512),
        "flip": False,
        "transforms": [
            {"type": "Resize", "keep_ratio": True},
            {"type": "RandomFlip"},
            {"type": "Normalize", **NORM},
            {"type": "ImageToTensor", "keys": ["img"]},
            {"type": "Collect", "keys": ["img"]},
        ],
    },
]


def ade(**changes):
    """An ADE20K PSPNet config as the 0.30 zoo's files merge to (trimmed to what the rules read)."""
    part = {"type": "ADE20KDataset", "data_root": "data/ade", "img_dir": "images/validation",
            "ann_dir": "annotations/validation", "pipeline": TEST}  # fmt: skip
    cfg = {
        "model": {
            "type": "EncoderDecoder",
            "pretrained": "open-mmlab://resnet50_v1c",
            "backbone": {"type": "ResNetV1c", "depth": 50},
            "decode_head": {"type": "PSPHead", "num_classes": 150},
            "test_cfg": {"mode": "whole"},
        },
        "data": {
            "samples_per_gpu": 4,
            "workers_per_gpu": 4,
            "train": {**part, "img_dir": "images/training", "ann_dir": "annotations/training", "pipeline": TRAIN},
            "val": dict(part),
            "test": dict(part),
        },
        "img_norm_cfg": NORM,
        "optimizer": {"type": "SGD", "lr": 0.01, "momentum": 0.9, "weight_decay": 0.0005},
        "optimizer_config": {},
        "lr_config": {"policy": "poly", "power": 0.9, "min_lr": 1e-4, "by_epoch": False},
        "runner": {"type": "IterBasedRunner", "max_iters": 80000},
        "checkpoint_config": {"by_epoch": False, "interval": 8000},
        "evaluation": {"interval": 8000, "metric": "mIoU", "pre_eval": True},
        "log_config": {"interval": 50, "hooks": [{"type": "TextLoggerHook", "by_epoch": False}]},
        "dist_params": {"backend": "nccl"},
        "workflow": [("train", 1)],
        "cudnn_benchmark": True,
    }
    cfg = copy.deepcopy(cfg)
    for key, value in changes.items():
        node = cfg
        *parents, last = key.split("__")
        for parent in parents:
            node = node[parent]
        if value is _DELETE:
            node.pop(last)
        else:
            node[last] = value
    return cfg


_DELETE = object()


def test_the_zoo_form_converts_with_mmsegmentations_own_types():
    out, report = convert(ade(), "mmseg")
    assert out["default_scope"] == "mmseg" and report.toolbox == "mmseg"
    assert out["model"]["data_preprocessor"] == {
        "type": "SegDataPreProcessor",
        "mean": NORM["mean"],
        "std": NORM["std"],
        "bgr_to_rgb": True,
        "size": (512, 512),
        "pad_val": 0,
        "seg_pad_val": 255,
    }
    train = out["train_dataloader"]
    assert train["batch_size"] == 4 and train["sampler"] == {"type": "InfiniteSampler", "shuffle": True}
    assert [t["type"] for t in train["dataset"]["pipeline"]] == [
        "LoadImageFromFile", "LoadAnnotations", "RandomResize", "RandomCrop", "RandomFlip",
        "PhotoMetricDistortion", "PackSegInputs",
    ]  # fmt: skip
    assert train["dataset"]["pipeline"][2] == {
        "type": "RandomResize", "scale": (2048, 512), "ratio_range": (0.5, 2.0), "keep_ratio": True,
    }  # fmt: skip
    assert train["dataset"]["data_prefix"] == {"img_path": "images/training", "seg_map_path": "annotations/training"}
    val = out["val_dataloader"]
    assert val["batch_size"] == 1 and val["sampler"]["shuffle"] is False
    # the maps are loaded after the resize, reduced as 0.x's ADE20KDataset fixed it
    assert val["dataset"]["pipeline"] == [
        {"type": "LoadImageFromFile"},
        {"type": "Resize", "scale": (2048, 512), "keep_ratio": True},
        {"type": "LoadAnnotations", "reduce_zero_label": True},
        {"type": "PackSegInputs"},
    ]
    assert out["test_pipeline"] == out["test_dataloader"]["dataset"]["pipeline"]  # what inference_model reads
    assert out["val_evaluator"] == {"type": "IoUMetric", "iou_metrics": ["mIoU"]}
    assert out["train_cfg"] == {"type": "IterBasedTrainLoop", "max_iters": 80000, "val_interval": 8000}
    assert out["param_scheduler"][0]["type"] == "PolyLR" and out["param_scheduler"][0]["eta_min"] == 1e-4
    assert out["default_hooks"]["logger"]["log_metric_by_epoch"] is False
    assert out["visualizer"]["type"] == "SegLocalVisualizer"
    for legacy in ("data", "evaluation", "runner", "lr_config", "optimizer_config", "img_norm_cfg", "workflow"):
        assert legacy not in out


def test_no_runner_is_total_iters_iterations_as_0x_trained_and_neither_is_refused():
    out, _ = convert(ade(runner=_DELETE, total_iters=40000), "mmseg")
    assert out["train_cfg"]["type"] == "IterBasedTrainLoop" and out["train_cfg"]["max_iters"] == 40000
    assert "total_iters" not in out and out["param_scheduler"][0]["end"] == 40000
    with pytest.raises(ConfigConversionError, match="IterBasedRunner"):
        convert(ade(runner=_DELETE), "mmseg")


def test_a_training_only_config_has_no_validation_loop():
    cfg = ade(evaluation=_DELETE)
    del cfg["data"]["val"], cfg["data"]["test"]
    out, _ = convert(cfg, "mmseg")
    assert not {"val_cfg", "test_cfg", "val_evaluator", "val_dataloader"} & set(out)


def test_the_datasets_ignore_index_reaches_the_metric():
    cfg = ade()
    for name in ("val", "test"):
        cfg["data"][name]["ignore_index"] = 0
    out, _ = convert(cfg, "mmseg")
    assert out["val_evaluator"]["ignore_index"] == 0 and out["test_evaluator"]["ignore_index"] == 0


def test_concatenated_val_sets_are_refused_unless_one_merged_result_is_asked_for():
    cfg = ade()
    cfg["data"]["val"]["img_dir"] = ["a", "b"]
    cfg["data"]["val"]["ann_dir"] = ["c", "d"]
    with pytest.raises(ConfigConversionError, match="separate_eval"):
        convert(cfg, "mmseg")
    cfg["data"]["val"]["separate_eval"] = False
    out, _ = convert(cfg, "mmseg")
    parts = out["val_dataloader"]["dataset"]
    assert parts["type"] == "ConcatDataset" and [d["data_prefix"]["img_path"] for d in parts["datasets"]] == ["a", "b"]
    assert all("separate_eval" not in d for d in parts["datasets"])
    # training sets were concatenated the same way by 0.x, with nothing to evaluate
    cfg["data"]["train"]["img_dir"] = ["x", "y"]
    cfg["data"]["train"]["ann_dir"] = ["z", "w"]
    out, _ = convert(cfg, "mmseg")
    assert len(out["train_dataloader"]["dataset"]["datasets"]) == 2


def test_test_time_augmentation_becomes_the_tta_pipeline_with_its_flip_directions():
    cfg = ade()
    aug = cfg["data"]["test"]["pipeline"][1]
    aug.update(img_ratios=[0.5, 1.0, 1.5], flip=True, flip_direction=["horizontal", "vertical"])
    out, report = convert(cfg, "mmseg")
    assert out["test_dataloader"]["dataset"]["pipeline"][1] == {
        "type": "Resize",
        "scale": (2048, 512),
        "keep_ratio": True,
    }
    steps = out["tta_pipeline"][1]["transforms"]
    assert [r["scale"] for r in steps[0]] == [(1024, 256), (2048, 512), (3072, 768)]
    assert [(f["prob"], f["direction"]) for f in steps[1]] == [
        (0.0, "horizontal"),
        (1.0, "horizontal"),
        (1.0, "vertical"),
    ]
    assert out["tta_model"] == {"type": "SegTTAModel"}
    assert any("--tta" in text for text in report.differences)
    # a one-item list of scales: 0.x ignored the ratios
    aug.update(img_scale=[(2048, 512)], img_ratios=[0.75], flip=False)
    out, _ = convert(cfg, "mmseg")
    assert out["test_dataloader"]["dataset"]["pipeline"][1]["scale"] == (2048, 512) and "tta_model" not in out


def test_a_difference_of_the_current_code_is_said_once_as_a_warning_when_the_config_loads(tmp_path):
    import subprocess
    import sys

    from conftest import clean_env

    cfg = ade()
    cfg["data"]["test"]["pipeline"][1].update(img_ratios=[0.5, 1.0, 1.5], flip=True)
    config = tmp_path / "tta_0x.py"
    config.write_text("".join(f"{key} = {value!r}\n" for key, value in cfg.items()))
    code = "import mmfix; from mmengine.config import Config; Config.fromfile(__import__('sys').argv[1])"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(config)], env=clean_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # once per pipeline that had it (val and test share one here), not once per look at the config
    assert proc.stderr.count("data.test.pipeline: 0.x tested with test-time augmentation") == 1, proc.stderr[-2000:]
    assert " - mmfix - WARNING - " in proc.stderr


def test_a_mosaic_wrappers_inner_set_is_not_packed_before_the_wrapper():
    cfg = ade()
    inner = dict(cfg["data"]["train"], pipeline=[{"type": "LoadImageFromFile"}, {"type": "LoadAnnotations"}])
    cfg["data"]["train"] = {
        "type": "MultiImageMixDataset",
        "dataset": inner,
        "pipeline": [{"type": "RandomMosaic", "prob": 1, "img_scale": (512, 512)}, *TRAIN[2:]],
    }
    out, _ = convert(cfg, "mmseg")
    ds = out["train_dataloader"]["dataset"]
    assert [t["type"] for t in ds["dataset"]["pipeline"]] == ["LoadImageFromFile", "LoadAnnotations"]
    assert ds["pipeline"][0]["type"] == "RandomMosaic" and ds["pipeline"][-1]["type"] == "PackSegInputs"


def test_a_test_pipelines_own_annotations_are_loaded_after_the_resize():
    cfg = ade()
    plain = [{"type": "LoadImageFromFile"}, {"type": "LoadAnnotations", "reduce_zero_label": True},
             {"type": "Resize", "img_scale": (64, 32)}, {"type": "Normalize", **NORM}, {"type": "Collect", "keys": ["img"]}]  # fmt: skip
    cfg["data"]["test"]["pipeline"] = plain
    out, _ = convert(cfg, "mmseg")
    assert [t["type"] for t in out["test_dataloader"]["dataset"]["pipeline"]] == [
        "LoadImageFromFile", "Resize", "LoadAnnotations", "PackSegInputs",
    ]  # fmt: skip


def test_the_gt_loaders_own_flag_decides_how_the_test_maps_are_reduced():
    cfg = ade()
    cfg["data"]["val"].update(type="CustomDataset", gt_seg_map_loader_cfg={"reduce_zero_label": True})
    out, _ = convert(cfg, "mmseg")
    ds = out["val_dataloader"]["dataset"]
    assert ds["type"] == "BaseSegDataset" and ds["reduce_zero_label"] is True
    assert {"type": "LoadAnnotations", "reduce_zero_label": True} in ds["pipeline"]


def test_classes_from_a_file_are_refused_with_what_to_write():
    cfg = ade()
    cfg["data"]["train"]["classes"] = "classes.txt"
    with pytest.raises(ConfigConversionError, match=r"classes=\('name1'"):
        convert(cfg, "mmseg")


def test_1x_classes_computing_otherwise_keep_the_0x_result():
    cfg = ade()
    cfg["model"]["backbone"] = {"type": "VisionTransformer", "img_size": (512, 512)}
    cfg["model"]["decode_head"]["loss_decode"] = [
        {"type": "CrossEntropyLoss", "loss_weight": 1.0},
        {"type": "DiceLoss", "loss_name": "loss_dice", "loss_weight": 3.0},
    ]
    out, _ = convert(cfg, "mmseg")
    assert out["model"]["backbone"]["patch_bias"] is True
    assert [loss["type"] for loss in out["model"]["decode_head"]["loss_decode"]] == ["CrossEntropyLoss", "DiceLoss0x"]
    assert out["custom_imports"] == {"imports": ["mmfix._legacy_models.mmseg"], "allow_failed_imports": False}
    # a string custom_imports (0.x ConvNeXt configs) keeps its module and gains ours
    cfg["custom_imports"] = {"imports": "mmcls.models", "allow_failed_imports": False}
    out, _ = convert(cfg, "mmseg")
    assert out["custom_imports"]["imports"] == ["mmpretrain.models", "mmfix._legacy_models.mmseg"]


def test_mmdetection_stays_the_default_rules():
    cfg = {"model": {"type": "FasterRCNN"}, "runner": {"type": "EpochBasedRunner", "max_epochs": 12}}
    out, report = convert(cfg)
    assert out["default_scope"] == "mmdet" and report.toolbox == "mmdet"
    with pytest.raises(ValueError, match="no config rules for toolbox 'mmdet3d'"):
        convert(cfg, "mmdet3d")


def test_a_refusal_names_mmsegmentations_releases_not_mmdetections():
    with pytest.raises(ConfigConversionError) as info:
        convert(ade(runner={"type": "IterBasedRunner"}), "mmseg")  # the shared runner rule's error
    text = str(info.value)
    assert "MMSegmentation 0.x config" in text and "MMSegmentation 1.x equivalent" in text
    assert "MMDetection" not in text and info.value.key == "runner.max_iters"
