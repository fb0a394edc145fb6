"""The pure converter on the official 2.28.2 base configs (copied under tests/data) and small dicts."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from mmfix._configs import apply_legacy_keys, classify, convert
from mmfix._errors import ConfigConversionError

BASE = Path(__file__).resolve().parents[1] / "data" / "mmdet2_configs" / "_base_"


@pytest.fixture(scope="module")
def faster_rcnn_2x() -> dict:
    from mmengine.config import Config

    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)
    parts = [
        BASE / "models/faster_rcnn_r50_fpn.py",
        BASE / "datasets/coco_detection.py",
        BASE / "schedules/schedule_1x.py",
        BASE / "default_runtime.py",
    ]
    merged: dict = {}
    for part in parts:
        merged.update(fromfile(str(part)).to_dict())
    return merged


def test_faster_rcnn_converts_like_the_migration_rules(faster_rcnn_2x):
    source = copy.deepcopy(faster_rcnn_2x)
    assert classify(source) == "2.x"
    out, report = convert(source)
    assert source == faster_rcnn_2x, "convert() must not modify its input"
    assert out["default_scope"] == "mmdet"
    assert out["param_scheduler"] == [
        {"type": "LinearLR", "start_factor": 0.001, "by_epoch": False, "begin": 0, "end": 500},
        {"type": "MultiStepLR", "begin": 0, "end": 12, "by_epoch": True, "milestones": [8, 11], "gamma": 0.1},
    ]
    assert out["train_cfg"] == {"type": "EpochBasedTrainLoop", "max_epochs": 12, "val_interval": 1}
    assert out["optim_wrapper"] == {
        "type": "OptimWrapper",
        "optimizer": {"type": "SGD", "lr": 0.02, "momentum": 0.9, "weight_decay": 0.0001},
    }
    assert out["model"]["data_preprocessor"] == {
        "type": "DetDataPreprocessor",
        "mean": [123.675, 116.28, 103.53],
        "std": [58.395, 57.12, 57.375],
        "bgr_to_rgb": True,
        "pad_size_divisor": 32,
    }
    train = out["train_dataloader"]
    assert train["batch_size"] == 2 and train["num_workers"] == 2
    assert train["batch_sampler"] == {"type": "AspectRatioBatchSampler"}
    assert train["dataset"]["pipeline"] == [
        {"type": "LoadImageFromFile"},
        {"type": "LoadAnnotations", "with_bbox": True},
        {"type": "Resize", "scale": (1333, 800), "keep_ratio": True},
        {"type": "RandomFlip", "prob": 0.5},
        {"type": "PackDetInputs"},
    ]
    assert train["dataset"]["data_prefix"] == {"img": "data/coco/train2017/"}
    assert train["dataset"]["filter_cfg"] == {"filter_empty_gt": True, "min_size": 32}
    test = out["test_dataloader"]
    assert test["batch_size"] == 1 and test["dataset"]["test_mode"] is True
    assert [t["type"] for t in test["dataset"]["pipeline"]] == [
        "LoadImageFromFile",
        "Resize",
        "LoadAnnotations",
        "PackDetInputs",
    ]
    assert out["val_evaluator"]["type"] == "CocoMetric" and out["val_evaluator"]["metric"] == "bbox"
    assert out["default_hooks"]["checkpoint"] == {"type": "CheckpointHook", "interval": 1}
    assert out["default_hooks"]["logger"] == {"type": "LoggerHook", "interval": 50}
    assert out["env_cfg"]["dist_cfg"] == {"backend": "nccl"}
    for legacy in (
        "data",
        "optimizer",
        "optimizer_config",
        "lr_config",
        "runner",
        "evaluation",
        "checkpoint_config",
        "log_config",
        "img_norm_cfg",
        "workflow",
        "dist_params",
    ):
        assert legacy not in out, legacy
    assert ("img_norm_cfg", "now model.data_preprocessor's mean/std/bgr_to_rgb") in report.dropped
    assert classify(out) == "3.x"


@pytest.mark.parametrize(
    "lr_config, runner, expected",
    [
        (
            dict(policy="CosineAnnealing", min_lr=0.0, by_epoch=False),
            dict(type="IterBasedRunner", max_iters=100),
            [{"type": "CosineAnnealingLR", "T_max": 100, "begin": 0, "end": 100, "by_epoch": False, "eta_min": 0.0}],
        ),
        (
            dict(
                policy="CosineAnnealing",
                min_lr_ratio=1e-3,
                warmup="constant",
                warmup_iters=10,
                warmup_ratio=0.3,
                by_epoch=False,
            ),
            dict(type="EpochBasedRunner", max_epochs=5),
            [
                {"type": "ConstantLR", "factor": 0.3, "by_epoch": False, "begin": 0, "end": 10},
                {
                    "type": "CosineAnnealingLR",
                    "T_max": 5,
                    "begin": 0,
                    "end": 5,
                    "by_epoch": True,
                    "convert_to_iter_based": True,
                    "eta_min_ratio": 1e-3,
                },
            ],
        ),
        (
            dict(policy="poly", power=0.9, min_lr=1e-4, by_epoch=False),
            dict(type="IterBasedRunner", max_iters=40),
            [{"type": "PolyLR", "power": 0.9, "eta_min": 1e-4, "begin": 0, "end": 40, "by_epoch": False}],
        ),
        (
            dict(policy="step", step=3, gamma=0.5),
            dict(type="EpochBasedRunner", max_epochs=9),
            [{"type": "StepLR", "step_size": 3, "gamma": 0.5, "begin": 0, "end": 9, "by_epoch": True}],
        ),
        # mmcv counted step's steps (and CosineRestart's periods) in iterations of an epoch-based
        # run: per iteration to the run's end (an epoch-based scheduler converted to iterations
        # would have MMEngine multiply them by the epoch's length)
        (
            dict(policy="step", step=100000, gamma=0.96, by_epoch=False),
            dict(type="EpochBasedRunner", max_epochs=200),
            [{"type": "StepLR", "step_size": 100000, "gamma": 0.96, "begin": 0, "by_epoch": False}],
        ),
        (
            dict(policy="CosineRestart", periods=[1000, 2000], restart_weights=[1, 0.5], min_lr=0.0, by_epoch=False),
            dict(type="EpochBasedRunner", max_epochs=30),
            [
                {
                    "type": "CosineRestartLR",
                    "periods": [1000, 2000],
                    "restart_weights": [1, 0.5],
                    "begin": 0,
                    "by_epoch": False,
                    "eta_min": 0.0,
                }
            ],
        ),
        # exp's gamma per iteration: MMEngine converts only its begin and end (the run's)
        (
            dict(policy="exp", gamma=0.999, by_epoch=False),
            dict(type="EpochBasedRunner", max_epochs=12),
            [
                {
                    "type": "ExponentialLR",
                    "gamma": 0.999,
                    "begin": 0,
                    "end": 12,
                    "by_epoch": True,
                    "convert_to_iter_based": True,
                }
            ],
        ),
        (
            dict(policy="exp", gamma=0.975),
            dict(type="EpochBasedRunner", max_epochs=160),
            [{"type": "ExponentialLR", "gamma": 0.975, "begin": 0, "end": 160, "by_epoch": True}],
        ),
    ],
)
def test_lr_policies(lr_config, runner, expected):
    out, _ = convert({"lr_config": lr_config, "runner": runner, "optimizer": {"type": "SGD", "lr": 0.1}})
    assert out["param_scheduler"] == expected


@pytest.mark.parametrize(
    ("lr_config", "mmcv_factor"),
    [
        # mmcv's LrUpdaterHooks with by_epoch=False: runner.iter counts (lr_updater.py)
        (dict(policy="step", step=7, gamma=0.5, by_epoch=False), lambda it: 0.5 ** (it // 7)),
        (dict(policy="step", step=[5, 12], gamma=0.1, by_epoch=False), lambda it: 0.1 ** ((it >= 5) + (it >= 12))),
        (dict(policy="exp", gamma=0.97, by_epoch=False), lambda it: 0.97**it),
        (dict(policy="step", step=2, gamma=0.5), lambda it: 0.5 ** ((it // 4) // 2)),  # by epoch (4 iterations)
    ],
)
def test_epoch_runs_lr_follows_mmcv_s_curve_iteration_by_iteration(lr_config, mmcv_factor):
    """The converted schedulers built and stepped as MMEngine's Runner does (an epoch of 4
    iterations; iteration-based ones stepped every iteration, epoch-based ones every epoch,
    ``convert_to_iter_based`` ones built per iteration), against mmcv's lr for each iteration."""
    import mmengine.optim  # noqa: F401 (registers the schedulers)
    import torch
    from mmengine.registry import PARAM_SCHEDULERS

    out, _ = convert({"lr_config": lr_config, "runner": {"type": "EpochBasedRunner", "max_epochs": 6}})
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    per_epoch = 4
    schedulers = [
        PARAM_SCHEDULERS.build(cfg, default_args={"optimizer": optimizer, "epoch_length": per_epoch})
        for cfg in out["param_scheduler"]
    ]
    for iteration in range(6 * per_epoch):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(mmcv_factor(iteration)), iteration
        for scheduler in schedulers:
            if not scheduler.by_epoch:
                scheduler.step()
        if (iteration + 1) % per_epoch == 0:
            for scheduler in schedulers:
                if scheduler.by_epoch:
                    scheduler.step()


def test_fp16_grad_clip_and_cumulative_gradients():
    out, _ = convert(
        {
            "optimizer": {"type": "AdamW", "lr": 1e-4, "paramwise_cfg": {"norm_decay_mult": 0.0}},
            "optimizer_config": {
                "type": "GradientCumulativeOptimizerHook",
                "cumulative_iters": 4,
                "grad_clip": {"max_norm": 35, "norm_type": 2},
            },
            "fp16": {"loss_scale": 512.0},
            "runner": {"type": "EpochBasedRunner", "max_epochs": 1},
        }
    )
    assert out["optim_wrapper"] == {
        "type": "AmpOptimWrapper",
        "paramwise_cfg": {"norm_decay_mult": 0.0},
        "optimizer": {"type": "AdamW", "lr": 1e-4},
        "clip_grad": {"max_norm": 35, "norm_type": 2},
        "accumulative_counts": 4,
        "loss_scale": 512.0,
    }


@pytest.mark.parametrize(
    ("spelling", "same_as"), [("Fixed", "fixed"), ("Step", "step"), ("Poly", "poly"), ("Exp", "exp")]
)
def test_policy_spelled_as_mmcv_hooks_are_named_is_that_policy(spelling, same_as):
    # mmcv built f"{policy}LrUpdaterHook", title-casing an all-lower-case name: both spellings ran
    lr = {"step": [2], "gamma": 0.5, "power": 0.9}
    runner = {"type": "EpochBasedRunner", "max_epochs": 4}
    optimizer = {"type": "SGD", "lr": 0.1}
    out, _ = convert({"lr_config": {"policy": spelling, **lr}, "runner": runner, "optimizer": optimizer})
    expected, _ = convert({"lr_config": {"policy": same_as, **lr}, "runner": runner, "optimizer": optimizer})
    assert out["param_scheduler"] == expected["param_scheduler"]


@pytest.mark.parametrize("spelling", ["STEP", "Cosineannealing", "onecycle", "Yolox"])
def test_policy_spelling_mmcv_had_no_hook_for_is_refused(spelling):
    with pytest.raises(ConfigConversionError) as info:
        convert({"lr_config": {"policy": spelling}, "runner": {"type": "EpochBasedRunner", "max_epochs": 1}})
    assert f"`lr_config.policy` = '{spelling}'" in str(info.value)


def test_unknown_policy_is_one_clear_error():
    with pytest.raises(ConfigConversionError) as info:
        convert({"lr_config": {"policy": "Bogus"}, "runner": {"type": "EpochBasedRunner", "max_epochs": 1}})
    message = str(info.value)
    assert "`lr_config.policy` = 'Bogus'" in message and "CosineAnnealing" in message
    assert info.value.code == 2 and "\n" not in message


def test_mixed_config_inherited_values_are_overridden_own_conflicts_are_errors():
    cfg3 = {
        "train_dataloader": {"batch_size": 2, "num_workers": 2},
        "val_dataloader": None,
        "optim_wrapper": {"type": "OptimWrapper", "optimizer": {"type": "SGD", "lr": 0.02}},
        "train_cfg": {"type": "EpochBasedTrainLoop", "max_epochs": 12, "val_interval": 1},
        "data": {"samples_per_gpu": 8, "workers_per_gpu": 4},
        "optimizer_config": {"grad_clip": None},
    }
    assert classify(cfg3) == "mixed"
    out, report = apply_legacy_keys(cfg3, own_keys={"data", "optimizer_config"})
    assert out["train_dataloader"] == {"batch_size": 8, "num_workers": 4}
    assert "data" not in out and "optimizer_config" not in out and out["val_dataloader"] is None
    assert ("data.samples_per_gpu", "train_dataloader.batch_size") in report.converted
    with pytest.raises(ConfigConversionError) as info:
        apply_legacy_keys(cfg3, own_keys={"data", "train_dataloader.batch_size"})
    assert "`data.samples_per_gpu` = 8" in str(info.value) and "`train_dataloader.batch_size` = 2" in str(info.value)


def test_classify_leaves_3x_and_plain_configs_alone():
    assert classify({"model": {"type": "X"}, "train_dataloader": {}}) == "3.x"
    assert classify({"a": 1}) == "3.x"


def test_a_3x_helper_variable_named_data_is_not_a_2x_key():
    assert classify({"data": {"root": "x"}, "train_dataloader": {}}) == "3.x"
    assert classify({"data": {"samples_per_gpu": 2}, "train_dataloader": {}}) == "mixed"


def _data(train_pipeline: list, test_pipeline: list, kind: str = "CocoDataset", **extra: object) -> dict:
    return {
        "runner": {"type": "EpochBasedRunner", "max_epochs": 1},
        "model": {"type": "MaskRCNN", "backbone": {"type": "ResNet", "depth": 50}},
        "data": {
            "samples_per_gpu": 2,
            "workers_per_gpu": 2,
            "train": {"type": kind, "ann_file": "a.json", "img_prefix": "i/", "pipeline": train_pipeline, **extra},
            "test": {"type": kind, "ann_file": "b.json", "img_prefix": "j/", "pipeline": test_pipeline, **extra},
        },
    }


def test_an_image_pad_value_before_normalize_stays_a_pad_transform():
    # Mask2Former's 2.x test pipeline: Pad(size_divisor=32, pad_val=dict(img=(128, 128, 128), masks=0, seg=255))
    norm = {"type": "Normalize", "mean": [1, 2, 3], "std": [1, 1, 1], "to_rgb": True}
    pad = {"type": "Pad", "size_divisor": 32, "pad_val": {"img": (128, 128, 128), "masks": 0, "seg": 255}}
    test = [
        {"type": "LoadImageFromFile"},
        {
            "type": "MultiScaleFlipAug",
            "img_scale": (1333, 800),
            "flip": False,
            "transforms": [
                {"type": "Resize", "keep_ratio": True},
                {"type": "RandomFlip"},
                pad,
                norm,
                {"type": "ImageToTensor", "keys": ["img"]},
                {"type": "Collect", "keys": ["img"]},
            ],
        },
    ]
    train = [
        {"type": "LoadImageFromFile"},
        {"type": "LoadAnnotations", "with_bbox": True, "with_mask": True},
        {"type": "Pad", "size_divisor": 32, "pad_val": {"masks": 0, "seg": 7}},
        norm,
        {"type": "DefaultFormatBundle"},
        {"type": "Collect", "keys": ["img"]},
    ]
    out, _ = convert(_data(train, test))
    steps = out["test_dataloader"]["dataset"]["pipeline"]
    assert {"type": "Pad", "size_divisor": 32, "pad_val": {"img": (128, 128, 128)}} in steps
    assert [t["type"] for t in out["train_dataloader"]["dataset"]["pipeline"]] == [
        "LoadImageFromFile",
        "LoadAnnotations",
        "PackDetInputs",
    ]
    pre = out["model"]["data_preprocessor"]
    assert pre["pad_size_divisor"] == 32 and pre["pad_mask"] is True
    assert pre["seg_pad_value"] == 7 and "mask_pad_value" not in pre  # the training Pad's values, not defaults
    assert "pad_value" not in pre  # the image was padded before normalising, by the Pad transform


def test_open_images_sets_are_not_filtered_and_pack_what_the_metric_reads():
    train = [
        {"type": "LoadImageFromFile"},
        {"type": "LoadAnnotations", "with_bbox": True, "denorm_bbox": True},
        {"type": "DefaultFormatBundle"},
        {"type": "Collect", "keys": ["img"]},
    ]
    test = [
        {"type": "LoadImageFromFile"},
        {
            "type": "MultiScaleFlipAug",
            "img_scale": (1024, 800),
            "flip": False,
            "transforms": [{"type": "Resize", "keep_ratio": True}, {"type": "Collect", "keys": ["img"]}],
        },
    ]
    out, report = convert(_data(train, test, kind="OpenImagesDataset", label_file="l.csv", hierarchy_file="h.json"))
    train_set = out["train_dataloader"]["dataset"]
    assert "filter_cfg" not in train_set
    assert {"type": "LoadAnnotations", "with_bbox": True} in train_set["pipeline"]
    assert any("meta_file" in note for note in report.notes)
    pack = out["test_dataloader"]["dataset"]["pipeline"][-1]
    assert pack["type"] == "PackDetInputs" and {"instances", "image_level_labels"} <= set(pack["meta_keys"])
    assert out["test_evaluator"]["type"] == "OpenImagesMetric"


@pytest.mark.parametrize(
    ("kind", "train_ann", "test_meta", "expected"),
    [
        # 3.x's configs/_base_/datasets/openimages_detection.py
        (
            "OpenImagesDataset",
            "data/OpenImages/annotations/oidv6-train-annotations-bbox.csv",
            "data/OpenImages/annotations/validation-image-metas.pkl",
            "data/OpenImages/annotations/train-image-metas.pkl",
        ),
        # 3.x's configs/openimages/faster-rcnn_r50_fpn_32xb2-1x_openimages-challenge.py
        (
            "OpenImagesChallengeDataset",
            "data/OpenImages/challenge2019/challenge-2019-train-detection-bbox.txt",
            "data/OpenImages/challenge2019/challenge-2019-validation-metas.pkl",
            "data/OpenImages/challenge2019/challenge-2019-train-metas.pkl",
        ),
        # no evaluation file to take the name from: the name MMDetection's tools use
        ("OpenImagesDataset", "ann/train.csv", None, "ann/train-image-metas.pkl"),
    ],
)
def test_open_images_training_set_gets_the_meta_file_3x_needs(kind, train_ann, test_meta, expected):
    # 3.x's OpenImagesDataset cannot be built without meta_file; 2.x configs named it only for evaluation.
    cfg = _data(
        [{"type": "LoadImageFromFile"}, {"type": "LoadAnnotations", "with_bbox": True, "denorm_bbox": True}],
        [{"type": "LoadImageFromFile"}],
        kind=kind,
        label_file="l.csv",
        hierarchy_file="h.json",
    )
    cfg["data"]["train"]["ann_file"] = train_ann
    if test_meta is not None:
        cfg["data"]["test"]["meta_file"] = test_meta
    out, report = convert(cfg)
    assert out["train_dataloader"]["dataset"]["meta_file"] == expected
    note = next(n for n in report.notes if "meta_file" in n)
    assert expected in note and "mmfix image-metas CONFIG" in note


def test_open_images_meta_file_the_user_set_is_kept_and_wrapped_sets_get_one():
    load = [{"type": "LoadImageFromFile"}, {"type": "LoadAnnotations", "with_bbox": True}]
    cfg = _data(load, [{"type": "LoadImageFromFile"}], kind="OpenImagesDataset", label_file="l", hierarchy_file="h")
    cfg["data"]["train"]["meta_file"] = "mine.pkl"
    out, report = convert(cfg)
    assert out["train_dataloader"]["dataset"]["meta_file"] == "mine.pkl"
    assert not any("meta_file" in n for n in report.notes)
    # SSD's 2.x OpenImages config wraps the training set in a RepeatDataset
    cfg = _data(load, [{"type": "LoadImageFromFile"}], kind="OpenImagesDataset", label_file="l", hierarchy_file="h")
    cfg["data"]["train"] = {"type": "RepeatDataset", "times": 3, "dataset": cfg["data"]["train"]}
    out, _ = convert(cfg)
    assert out["train_dataloader"]["dataset"]["dataset"]["meta_file"] == "train-image-metas.pkl"


def test_every_open_images_part_of_a_concatenated_training_set_gets_its_own_meta_file():
    load = [{"type": "LoadImageFromFile"}, {"type": "LoadAnnotations", "with_bbox": True}]
    cfg = _data(load, [{"type": "LoadImageFromFile"}], kind="OpenImagesDataset", label_file="l", hierarchy_file="h")
    part = cfg["data"]["train"]
    cfg["data"]["train"] = {
        "type": "ConcatDataset",
        "datasets": [dict(part, ann_file="ann/a.csv"), dict(part, ann_file="ann/b.csv")],
    }
    out, report = convert(cfg)
    parts = out["train_dataloader"]["dataset"]["datasets"]
    assert [p["meta_file"] for p in parts] == ["ann/train-image-metas.pkl", "ann/b-image-metas.pkl"]
    assert sum("meta_file" in n for n in report.notes) == 2


def test_a_programs_edits_survive_a_later_merge_key_by_key():
    """Issue 22: after a script edits a loaded 2.x config, a following merge_from_dict re-converts
    the 2.x source; the script's edits are kept key by key, and a key both set goes to the merge."""
    from mmfix._patches.legacy_config import reapply_edits

    old = {"model": {"test_cfg": {"score_thr": 0.05, "nms_pre": 1000, "nms": {"iou_threshold": 0.5}}}, "a": 1, "b": 2}
    current = copy.deepcopy(old)
    current["model"]["test_cfg"]["score_thr"] = 0.0  # the script's edit
    current["model"]["test_cfg"]["nms"]["iou_threshold"] = 0.6  # and one the merge overrides
    current["launcher"] = "pytorch"  # added
    del current["b"]  # deleted
    new = copy.deepcopy(old)
    new["model"]["test_cfg"]["nms_pre"] = 123  # the merge's own changes
    new["model"]["test_cfg"]["nms"]["iou_threshold"] = 0.7
    assert reapply_edits(old, current, new) == {
        "model": {"test_cfg": {"score_thr": 0.0, "nms_pre": 123, "nms": {"iou_threshold": 0.7}}},
        "a": 1,
        "launcher": "pytorch",
    }


def test_merge_after_an_edit_on_a_real_2x_config(tmp_path):
    from conftest import clean_env, run_python

    config = tmp_path / "retina_2x.py"
    config.write_text(
        f"_base_ = [{str(BASE / 'models/retinanet_r50_fpn.py')!r}, {str(BASE / 'datasets/coco_detection.py')!r},\n"
        f"          {str(BASE / 'schedules/schedule_1x.py')!r}, {str(BASE / 'default_runtime.py')!r}]\n"
        "optimizer = dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=0.0001)\n"
    )
    code = f"""
import mmfix
from mmengine.config import Config
cfg = Config.fromfile({str(config)!r})
cfg.model.test_cfg.score_thr = 0.0
cfg.merge_from_dict({{"model.test_cfg.nms_pre": 123, "data.samples_per_gpu": 3}})
print(cfg.model.test_cfg.score_thr, cfg.model.test_cfg.nms_pre, cfg.train_dataloader.batch_size)
"""
    out = run_python(code, env=clean_env()).stdout.strip().splitlines()[-1]
    assert out == "0.0 123 3", out


def test_momentum_policy_spelled_as_mmcv_hooks_are_named_is_that_policy():
    # mmcv registered momentum updater hooks by the same title-casing rule as the LR ones
    runner = {"type": "EpochBasedRunner", "max_epochs": 4}
    optimizer = {"type": "SGD", "lr": 0.1, "momentum": 0.9}
    converted = [
        convert({"momentum_config": {"policy": p, "step": [2]}, "runner": runner, "optimizer": optimizer})[0]
        for p in ("Step", "step")
    ]
    assert converted[0]["param_scheduler"] == converted[1]["param_scheduler"]
    assert converted[0]["param_scheduler"][0]["type"] == "MultiStepMomentum"
