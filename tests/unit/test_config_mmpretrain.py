"""MMClassification 0.x config rules (mmfix/_configs/_mmpretrain.py), as pure functions on dicts.

Whole official configs through MMPretrain 1.2.0's tools and APIs are
tests/integration/test_family_0x_mmcls.py and benchmarks/family_zoo.py; here each rule on a small
0.x config written as the 0.25 zoo writes them.
"""

from __future__ import annotations

import copy

import pytest

from mmfix._configs import ConfigConversionError, convert

NORM = {"mean": [123.675, 116.28, 103.53], "std": [58.395, 57.12, 57.375], "to_rgb": True}
TRAIN = [
    {"type": "LoadImageFromFile"},
    {"type": "RandomResizedCrop", "size": 224},
    {"type": "RandomFlip", "flip_prob": 0.5, "direction": "horizontal"},
    {"type": "Normalize", **NORM},
    {"type": "ImageToTensor", "keys": ["img"]},
    {"type": "ToTensor", "keys": ["gt_label"]},
    {"type": "Collect", "keys": ["img", "gt_label"]},
]
TEST = [
    {"type": "LoadImageFromFile"},
    {"type": "Resize", "size": (256, -1)},
    {"type": "CenterCrop", "crop_size": 224},
    {"type": "Normalize", **NORM},
    {"type": "ImageToTensor", "keys": ["img"]},
    {"type": "Collect", "keys": ["img"]},
]


def imagenet(**changes):
    """resnet50_8xb32_in1k.py as the 0.25 zoo's files merge to."""
    val = {"type": "ImageNet", "data_prefix": "data/imagenet/val", "ann_file": "data/imagenet/meta/val.txt",
           "pipeline": TEST}  # fmt: skip
    cfg = {
        "model": {
            "type": "ImageClassifier",
            "backbone": {"type": "ResNet", "depth": 50, "num_stages": 4, "out_indices": (3,), "style": "pytorch"},
            "neck": {"type": "GlobalAveragePooling"},
            "head": {
                "type": "LinearClsHead",
                "num_classes": 1000,
                "in_channels": 2048,
                "loss": {"type": "CrossEntropyLoss", "loss_weight": 1.0},
                "topk": (1, 5),
            },
        },
        "dataset_type": "ImageNet",
        "img_norm_cfg": NORM,
        "train_pipeline": TRAIN,
        "test_pipeline": TEST,
        "data": {
            "samples_per_gpu": 32,
            "workers_per_gpu": 2,
            "train": {"type": "ImageNet", "data_prefix": "data/imagenet/train", "pipeline": TRAIN},
            "val": val,
            "test": copy.deepcopy(val),
        },
        "evaluation": {"interval": 1, "metric": "accuracy"},
        "optimizer": {"type": "SGD", "lr": 0.1, "momentum": 0.9, "weight_decay": 0.0001},
        "optimizer_config": {"grad_clip": None},
        "lr_config": {"policy": "step", "step": [30, 60, 90]},
        "runner": {"type": "EpochBasedRunner", "max_epochs": 100},
        "checkpoint_config": {"interval": 1},
        "log_config": {"interval": 100, "hooks": [{"type": "TextLoggerHook"}]},
        "dist_params": {"backend": "nccl"},
        "log_level": "INFO",
        "load_from": None,
        "resume_from": None,
        "workflow": [("train", 1)],
    }
    for key, value in changes.items():
        cfg[key] = value
    return cfg


def test_scope_preprocessor_and_packing() -> None:
    out, report = convert(imagenet(), "mmpretrain")
    assert out["default_scope"] == "mmpretrain"
    assert out["model"]["data_preprocessor"] == {
        "type": "ClsDataPreprocessor",
        "mean": NORM["mean"],
        "std": NORM["std"],
        "to_rgb": True,
        "num_classes": 1000,
    }
    train = out["train_dataloader"]["dataset"]["pipeline"]
    assert [t["type"] for t in train] == ["LoadImageFromFile", "RandomResizedCrop", "RandomFlip", "PackInputs"]
    assert train[1] == {"type": "RandomResizedCrop", "scale": 224, "interpolation": "bilinear"}
    assert train[2] == {"type": "RandomFlip", "prob": 0.5, "direction": "horizontal"}
    test = out["test_dataloader"]["dataset"]["pipeline"]
    assert test[1:] == [
        {"type": "ResizeEdge", "scale": 256, "edge": "short"},
        {"type": "CenterCrop", "crop_size": 224},
        {"type": "PackInputs"},
    ]
    assert out["test_pipeline"] == test  # what MMPretrain's inference reads
    assert report.toolbox == "mmpretrain"


def test_data_sets_keep_0x_paths_and_batches() -> None:
    out, _ = convert(imagenet(), "mmpretrain")
    train, val = out["train_dataloader"], out["val_dataloader"]
    assert train["batch_size"] == 32 and train["num_workers"] == 2 and train["sampler"]["shuffle"] is True
    assert train["dataset"]["data_prefix"] == "data/imagenet/train" and "ann_file" not in train["dataset"]
    assert val["batch_size"] == 32  # 0.x tested with samples_per_gpu too
    assert val["dataset"]["ann_file"] == "data/imagenet/meta/val.txt"
    assert out["val_evaluator"] == {"type": "Accuracy", "topk": (1, 5)}  # 0.x's default metric options
    assert out["train_cfg"] == {"type": "EpochBasedTrainLoop", "max_epochs": 100, "val_interval": 1}
    assert out["default_hooks"]["visualization"]["type"] == "VisualizationHook"
    assert out["visualizer"]["type"] == "UniversalVisualizer"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"type": "Resize", "size": 224}, {"type": "Resize", "scale": 224}),
        ({"type": "Resize", "size": (240, 320)}, {"type": "Resize", "scale": (320, 240)}),  # (h, w) -> (w, h)
        (
            {"type": "Resize", "size": (256, -1), "adaptive_side": "long", "backend": "pillow"},
            {"type": "ResizeEdge", "scale": 256, "edge": "long", "backend": "pillow"},
        ),
        ({"type": "CenterCrop", "crop_size": (200, 300)}, {"type": "CenterCrop", "crop_size": (300, 200)}),
        (
            {"type": "CenterCrop", "crop_size": 224, "efficientnet_style": True, "crop_padding": 32},
            {"type": "EfficientNetCenterCrop", "crop_size": 224, "interpolation": "bilinear", "crop_padding": 32},
        ),
        (
            {"type": "RandomResizedCrop", "size": 240, "scale": (0.35, 1.0), "ratio": (0.5, 2.0), "backend": "pillow"},
            {
                "type": "RandomResizedCrop",
                "scale": 240,
                "crop_ratio_range": (0.35, 1.0),
                "aspect_ratio_range": (0.5, 2.0),
                "interpolation": "bilinear",
                "backend": "pillow",
            },
        ),
        (
            {"type": "RandomResizedCrop", "size": 224, "efficientnet_style": True, "interpolation": "bicubic"},
            {"type": "EfficientNetRandomCrop", "scale": 224, "interpolation": "bicubic"},
        ),
        ({"type": "RandomCrop", "size": 32, "padding": 4}, {"type": "RandomCrop", "crop_size": 32, "padding": 4}),
        (
            {"type": "Lighting", "eigval": [1], "eigvec": [[1]]},
            {"type": "Lighting", "eigval": [1], "eigvec": [[1]], "to_rgb": True},
        ),
        (
            {"type": "RandAugment", "policies": [], "num_policies": 2, "magnitude_level": 9},
            {"type": "RandAugment", "policies": [], "num_policies": 2, "magnitude_level": 9, "total_level": 30},
        ),
        (
            {"type": "ColorJitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.4},
            {"type": "ColorJitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "backend": "cv2"},
        ),
    ],
)
def test_transforms_keep_0x_meaning(given: dict, expected: dict) -> None:
    pipeline = [
        {"type": "LoadImageFromFile"},
        given,
        {"type": "Normalize", **NORM},
        {"type": "Collect", "keys": ["img"]},
    ]
    data = copy.deepcopy(imagenet()["data"])
    data["train"]["pipeline"] = pipeline
    out, _ = convert(imagenet(data=data), "mmpretrain")
    assert out["train_dataloader"]["dataset"]["pipeline"][1] == expected


def test_batch_augments_renamed_with_their_probabilities() -> None:
    cfg = imagenet()
    cfg["model"]["train_cfg"] = {
        "augments": [
            {"type": "BatchMixup", "alpha": 0.8, "num_classes": 1000, "prob": 0.5},
            {"type": "BatchCutMix", "alpha": 1.0, "num_classes": 1000, "prob": 0.5},
        ]
    }
    out, _ = convert(cfg, "mmpretrain")
    # equal probabilities summing to 1: 1.x's uniform choice, no probs needed
    assert out["model"]["train_cfg"] == {
        "augments": [{"type": "Mixup", "alpha": 0.8}, {"type": "CutMix", "alpha": 1.0}]
    }
    cfg["model"]["train_cfg"] = {"augments": {"type": "BatchCutMix", "alpha": 1.0, "num_classes": 10, "prob": 0.3}}
    out, _ = convert(cfg, "mmpretrain")
    assert out["model"]["train_cfg"] == {"augments": [{"type": "CutMix", "alpha": 1.0}], "probs": [0.3]}
    assert out["model"]["data_preprocessor"]["num_classes"] == 1000  # the one-hot labels' width


def test_vit_cls_token_and_0x_initialisations() -> None:
    cfg = imagenet()
    cfg["model"]["backbone"] = {"type": "VisionTransformer", "arch": "deit-tiny", "output_cls_token": True}
    cfg["model"]["head"] = {"type": "ConformerHead", "num_classes": 1000, "in_channels": [64, 384]}
    out, report = convert(cfg, "mmpretrain")
    assert out["model"]["backbone"] == {"type": "VisionTransformer", "arch": "deit-tiny", "out_type": "cls_token"}
    assert out["model"]["head"]["init_cfg"] == {"type": "Normal", "layer": "Linear", "std": 0.01}
    assert any("ConformerHead.init_cfg" in line for line in report.lines())
    cfg["model"]["backbone"] = {
        "type": "ConvNeXt",
        "arch": "tiny",
        "init_cfg": {"type": "Pretrained", "checkpoint": "x"},
    }
    out, _ = convert(cfg, "mmpretrain")
    assert out["model"]["backbone"]["init_cfg"] == {"type": "Pretrained", "checkpoint": "x"}  # given: kept


def test_split_data_sets_and_evaluation_options() -> None:
    cfg = imagenet()
    cifar = {"type": "CIFAR10", "data_prefix": "data/cifar10", "pipeline": TEST}
    cfg["data"] = {
        "samples_per_gpu": 16,
        "workers_per_gpu": 2,
        "train": {**cifar, "pipeline": TRAIN},
        "val": {**cifar, "test_mode": True},
        "test": {**cifar, "test_mode": True},
    }
    cfg["evaluation"] = {"interval": 5, "metric": ["accuracy", "precision", "f1_score"],
                         "metric_options": {"topk": (1,), "average_mode": "micro"}, "save_best": "auto"}  # fmt: skip
    out, _ = convert(cfg, "mmpretrain")
    assert out["train_dataloader"]["dataset"] == {
        "type": "CIFAR10",
        "data_root": "data/cifar10",
        "split": "train",
        "pipeline": out["train_dataloader"]["dataset"]["pipeline"],
    }
    assert out["val_dataloader"]["dataset"]["split"] == "test" and "test_mode" not in out["val_dataloader"]["dataset"]
    assert out["val_evaluator"] == [
        {"type": "Accuracy", "topk": (1,)},
        {"type": "SingleLabelMetric", "items": ["precision", "f1-score"], "average": "micro"},
    ]
    assert out["train_cfg"]["val_interval"] == 5
    assert out["default_hooks"]["checkpoint"]["save_best"] == "auto"


def test_voc_multi_label_metrics() -> None:
    cfg = imagenet()
    voc = {"type": "VOC", "data_prefix": "data/VOCdevkit/VOC2007/",
           "ann_file": "data/VOCdevkit/VOC2007/ImageSets/Main/test.txt", "pipeline": TEST}  # fmt: skip
    cfg["data"] = {"samples_per_gpu": 16, "workers_per_gpu": 2, "val": voc, "test": copy.deepcopy(voc)}
    cfg["evaluation"] = {"interval": 1, "metric": ["mAP", "CP", "OP", "CR", "OR", "CF1", "OF1"]}
    out, _ = convert(cfg, "mmpretrain")
    assert out["val_dataloader"]["dataset"]["data_root"] == "data/VOCdevkit/VOC2007/"
    assert out["val_dataloader"]["dataset"]["image_set_path"] == "ImageSets/Main/test.txt"
    assert out["val_evaluator"] == [
        {"type": "VOCAveragePrecision", "difficult_as_positive": None},
        {"type": "VOCMultiLabelMetric", "items": ["precision", "recall", "f1-score"], "average": "macro",
         "difficult_as_positive": None},
        {"type": "VOCMultiLabelMetric", "items": ["precision", "recall", "f1-score"], "average": "micro",
         "difficult_as_positive": None},
    ]  # fmt: skip


def test_cooldown_schedule_and_mmcv_ema_hook() -> None:
    lr = {"policy": "CosineAnnealingCooldown", "min_lr": 1e-5, "cool_down_time": 10, "cool_down_ratio": 0.1,
          "by_epoch": True, "warmup_by_epoch": True, "warmup": "linear", "warmup_iters": 10, "warmup_ratio": 1e-6}  # fmt: skip
    cfg = imagenet(
        lr_config=lr,
        runner={"type": "EpochBasedRunner", "max_epochs": 310},
        custom_hooks=[{"type": "EMAHook", "momentum": 4e-5, "priority": "ABOVE_NORMAL"}],
    )
    out, _ = convert(cfg, "mmpretrain")
    assert out["param_scheduler"] == [
        {"type": "LinearLR", "start_factor": 1e-6, "by_epoch": True, "begin": 0, "end": 10,
         "convert_to_iter_based": True},
        {"type": "CosineAnnealingLR", "T_max": 300, "begin": 0, "end": 301, "by_epoch": True, "eta_min": 1e-5},
        {"type": "ConstantLR", "factor": 0.1, "begin": 301, "end": 310, "by_epoch": True},
    ]  # fmt: skip
    assert out["custom_hooks"] == [
        {"type": "EMAHook", "ema_type": "ExponentialMovingAverage", "momentum": 4e-5, "priority": "ABOVE_NORMAL"}
    ]
    cfg["custom_hooks"] = [{"type": "EMAHook", "momentum": 0.1, "interval": 2}]
    out, report = convert(cfg, "mmpretrain")
    assert out["custom_hooks"][0]["momentum"] == pytest.approx(0.01) and out["custom_hooks"][0]["interval"] == 2
    assert any("warmed the momentum up" in line for line in report.lines())


def test_repeat_aug_sampler_moves_to_the_train_loader() -> None:
    out, report = convert(imagenet(sampler={"type": "RepeatAugSampler"}), "mmpretrain")
    assert out["train_dataloader"]["sampler"] == {"type": "RepeatAugSampler", "shuffle": True}
    assert out["val_dataloader"]["sampler"]["type"] == "DefaultSampler"
    assert any("RepeatAugSampler gave each rank" in line for line in report.lines())


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"ipu_replicas": 4}, "ipu_replicas"),
        ({"evaluation": {"metric": "top_k_accuracy"}}, "evaluation.metric"),
        ({"evaluation": {"metric": "accuracy", "efficient": True}}, "evaluation.efficient"),
    ],
)
def test_what_1x_cannot_express_is_one_clear_error(change: dict, key: str) -> None:
    with pytest.raises(ConfigConversionError) as info:
        convert(imagenet(**change), "mmpretrain")
    assert key in str(info.value) and "MMPretrain 1.x" in str(info.value)


def test_separately_evaluated_concatenation_is_refused() -> None:
    cfg = imagenet()
    part = cfg["data"]["val"]
    cfg["data"]["val"] = {"type": "ConcatDataset", "datasets": [part, copy.deepcopy(part)]}
    with pytest.raises(ConfigConversionError, match="separate_eval"):
        convert(cfg, "mmpretrain")
    cfg["data"]["val"]["separate_eval"] = False
    out, _ = convert(cfg, "mmpretrain")
    assert out["val_dataloader"]["dataset"]["type"] == "ConcatDataset"
