"""MMPose 0.x config rules (mmfix/_configs/_mmpose.py), as pure functions on dicts.

Each rule on a small 0.x config written as MMPose 0.29's zoo writes them (res50_coco_256x192.py,
merged); the 1.x side is MMPose 1.3.2's td-hm_res50_8xb64-210e_coco-256x192.py.
"""

from __future__ import annotations

import copy
import re

import pytest

from mmfix._configs import ConfigConversionError, convert

NORM = {"type": "NormalizeTensor", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
TRAIN = [
    {"type": "LoadImageFromFile"},
    {"type": "TopDownGetBboxCenterScale", "padding": 1.25},
    {"type": "TopDownRandomShiftBboxCenter", "shift_factor": 0.16, "prob": 0.3},
    {"type": "TopDownRandomFlip", "flip_prob": 0.5},
    {"type": "TopDownHalfBodyTransform", "num_joints_half_body": 8, "prob_half_body": 0.3},
    {"type": "TopDownGetRandomScaleRotation", "rot_factor": 40, "scale_factor": 0.5},
    {"type": "TopDownAffine"},
    {"type": "ToTensor"},
    NORM,
    {"type": "TopDownGenerateTarget", "sigma": 2},
    {"type": "Collect", "keys": ["img", "target", "target_weight"], "meta_keys": ["image_file", "center"]},
]
VAL = [
    {"type": "LoadImageFromFile"},
    {"type": "TopDownGetBboxCenterScale", "padding": 1.25},
    {"type": "TopDownAffine"},
    {"type": "ToTensor"},
    NORM,
    {"type": "Collect", "keys": ["img"], "meta_keys": ["image_file", "center"]},
]
DATA_CFG = {
    "image_size": [192, 256],
    "heatmap_size": [48, 64],
    "num_output_channels": 17,
    "num_joints": 17,
    "soft_nms": False,
    "nms_thr": 1.0,
    "oks_thr": 0.9,
    "vis_thr": 0.2,
    "use_gt_bbox": False,
    "det_bbox_thr": 0.0,
    "bbox_file": "data/coco/person_detection_results/COCO_val2017_detections_AP_H_56_person.json",
}


def _changed(cfg, changes):
    """``cfg`` with each ``a__b__c=value`` of ``changes`` set at ``cfg[a][b][c]``."""
    for path, value in changes.items():
        node = cfg
        *parents, last = path.split("__")
        for key in parents:
            node = node[key]
        node[last] = value
    return cfg


def coco(**changes):
    def ds(split, pipeline):
        return {
            "type": "TopDownCocoDataset",
            "ann_file": f"data/coco/annotations/person_keypoints_{split}2017.json",
            "img_prefix": f"data/coco/{split}2017/",
            "data_cfg": DATA_CFG,
            "pipeline": pipeline,
        }

    cfg = {
        "evaluation": {"interval": 10, "metric": "mAP", "save_best": "AP"},
        "optimizer": {"type": "Adam", "lr": 5e-4},
        "optimizer_config": {"grad_clip": None},
        "lr_config": {
            "policy": "step",
            "warmup": "linear",
            "warmup_iters": 500,
            "warmup_ratio": 0.001,
            "step": [170, 200],
        },
        "total_epochs": 210,
        "model": {
            "type": "TopDown",
            "pretrained": "torchvision://resnet50",
            "backbone": {"type": "ResNet", "depth": 50},
            "keypoint_head": {
                "type": "TopdownHeatmapSimpleHead",
                "in_channels": 2048,
                "out_channels": 17,
                "loss_keypoint": {"type": "JointsMSELoss", "use_target_weight": True},
            },
            "train_cfg": {},
            "test_cfg": {"flip_test": True, "post_process": "default", "shift_heatmap": True, "modulate_kernel": 11},
        },
        "data": {
            "samples_per_gpu": 64,
            "workers_per_gpu": 2,
            "val_dataloader": {"samples_per_gpu": 32},
            "test_dataloader": {"samples_per_gpu": 32},
            "train": ds("train", TRAIN),
            "val": ds("val", VAL),
            "test": ds("val", VAL),
        },
        "checkpoint_config": {"interval": 10},
        "log_config": {"interval": 50, "hooks": [{"type": "TextLoggerHook"}]},
        "log_level": "INFO",
        "load_from": None,
        "resume_from": None,
        "dist_params": {"backend": "nccl"},
        "workflow": [("train", 1)],
    }
    return _changed(cfg, changes)


def test_the_model_is_1x_s_official_one() -> None:
    out, _ = convert(coco(), "mmpose")
    assert out["default_scope"] == "mmpose"
    model = out["model"]
    assert model["type"] == "TopdownPoseEstimator"
    assert model["data_preprocessor"] == {
        "type": "PoseDataPreprocessor",
        "mean": [123.675, 116.28, 103.53],
        "std": [58.395, 57.12, 57.375],
        "bgr_to_rgb": True,
    }
    assert model["backbone"] == {
        "type": "ResNet",
        "depth": 50,
        "init_cfg": {"type": "Pretrained", "checkpoint": "torchvision://resnet50"},
    }
    # 0.x's quarter-pixel refinement (mmfix's copy: 1.x's refines x and y each on its own)
    codec = {"type": "MSRAHeatmap0x", "input_size": (192, 256), "heatmap_size": (48, 64), "sigma": 2}
    assert "mmfix._legacy_models.mmpose" in out["custom_imports"]["imports"]
    assert model["head"]["type"] == "HeatmapHead"
    assert model["head"]["loss"] == {"type": "KeypointMSELoss", "use_target_weight": True}
    assert model["head"]["decoder"] == codec and out["codec"] == codec
    assert model["test_cfg"] == {"flip_test": True, "flip_mode": "heatmap", "shift_heatmap": True}


def test_schedule_batch_and_evaluation() -> None:
    out, _ = convert(coco(), "mmpose")
    assert out["train_cfg"] == {"type": "EpochBasedTrainLoop", "max_epochs": 210, "val_interval": 10}
    assert out["train_dataloader"]["batch_size"] == 64 and out["val_dataloader"]["batch_size"] == 32
    assert out["val_evaluator"]["type"] == "CocoMetric"
    assert out["val_evaluator"]["nms_mode"] == "oks_nms" and out["val_evaluator"]["nms_thr"] == 0.9
    assert out["default_hooks"]["checkpoint"]["save_best"] == "coco/AP"
    assert out["default_hooks"]["checkpoint"]["rule"] == "greater"  # 0.x inferred it; 1.x needs it
    val = out["val_dataloader"]["dataset"]
    assert val["type"] == "CocoDataset" and val["data_mode"] == "topdown" and val["bbox_file"].endswith(".json")


def test_0x_random_box_augmentations_are_kept_as_0x_drew_them() -> None:
    out, _ = convert(coco(), "mmpose")
    types = [t["type"] for t in out["train_dataloader"]["dataset"]["pipeline"]]
    assert types == [
        "LoadImage",
        "GetBBoxCenterScale",
        "TopDownRandomShiftBboxCenter0x",
        "RandomFlip",
        "TopDownHalfBodyTransform0x",
        "TopDownGetRandomScaleRotation0x",
        "TopdownAffine",
        "GenerateTarget",
        "PackPoseInputs",
    ]
    assert "mmfix._legacy_models.mmpose" in out["custom_imports"]["imports"]
    half = out["train_dataloader"]["dataset"]["pipeline"][4]
    assert half["image_size"] == (192, 256)


def test_different_joint_weights_weight_the_targets_as_in_0x() -> None:
    """data_cfg.use_different_joint_weights: 0.x multiplied the target weights by the data set's
    joint_weights (MSRA, UDP and regression targets; Megvii's not): 1.x's GenerateTarget flag."""
    cfg = coco()
    for split in ("train", "val", "test"):
        cfg["data"][split]["data_cfg"] = {**DATA_CFG, "use_different_joint_weights": True}
    out, _ = convert(cfg, "mmpose")
    step = [t for t in out["train_dataloader"]["dataset"]["pipeline"] if t["type"] == "GenerateTarget"]
    assert step[0]["use_dataset_keypoint_weights"] is True
    plain = [t for t in convert(coco(), "mmpose")[0]["train_dataloader"]["dataset"]["pipeline"]]
    assert all("use_dataset_keypoint_weights" not in t for t in plain)
    # most non-COCO-style 0.x data sets turned the flag off whatever data_cfg said (AP10K's, here)
    cfg["data"]["train"]["type"] = "AnimalAP10KDataset"
    animal = convert(cfg, "mmpose")[0]["train_dataloader"]["dataset"]["pipeline"]
    assert all("use_dataset_keypoint_weights" not in t for t in animal)
    mspn = _mspn()
    for split in ("train", "val", "test"):
        mspn["data"][split]["data_cfg"] = {**mspn["data"][split]["data_cfg"], "use_different_joint_weights": True}
    megvii = [t for t in convert(mspn, "mmpose")[0]["train_dataloader"]["dataset"]["pipeline"]]
    assert all("use_dataset_keypoint_weights" not in t for t in megvii)


def test_0x_photometric_distortion_is_kept_as_0x_drew_it() -> None:
    """hrnet_w32_coco_256x192_photometric.py's colour augmentation after the warp: mmfix's copy with
    its arguments (1.x's namesake draws and applies otherwise)."""
    cfg = coco()
    args = {"brightness_delta": 16, "contrast_range": [0.8, 1.2], "saturation_range": [0.7, 1.3], "hue_delta": 9}
    cfg["data"]["train"]["pipeline"].insert(7, {"type": "PhotometricDistortion", **args})
    out, report = convert(cfg, "mmpose")
    pipeline = out["train_dataloader"]["dataset"]["pipeline"]
    assert [t["type"] for t in pipeline][6:8] == ["TopdownAffine", "PhotometricDistortion0x"]
    assert pipeline[7] == {"type": "PhotometricDistortion0x", **args, "rgb_0x": True}  # 0.x loaded RGB
    cfg["data"]["train"]["pipeline"][0]["channel_order"] = "bgr"
    out, _ = convert(cfg, "mmpose")
    assert out["train_dataloader"]["dataset"]["pipeline"][7]["rgb_0x"] is False
    assert "mmfix._legacy_models.mmpose" in out["custom_imports"]["imports"]
    assert any("PhotometricDistortion0x" in line for line in report.lines())


@pytest.mark.parametrize(
    "change",
    [
        {"model__type": "AssociativeEmbedding"},
        {"model__type": "PoseLifter"},
    ],
)
def test_what_is_not_converted_yet_stops_with_one_clear_error(change) -> None:
    with pytest.raises(ConfigConversionError, match="not converted yet"):
        convert(coco(**copy.deepcopy(change)), "mmpose")


@pytest.mark.parametrize(
    ("change", "key", "what"),
    [
        ({"model__keypoint_head__type": "AEHigherResolutionHead"}, "model.keypoint_head.type", "HigherHRNet"),
        ({"model__type": "GestureRecognizer"}, "model.type", "gesture recognition"),
        ({"model__backbone__type": "TCFormer"}, "model.backbone.type", "TCFormer backbone"),
        (
            {"data__train": {"type": "RepeatDataset", "times": 2, "dataset": {"type": "MeshAdversarialDataset"}}},
            "data.train.dataset.type",
            "human mesh recovery",
        ),
    ],
)
def test_what_mmpose_1x_has_no_counterpart_for_says_so_first(change, key, what) -> None:
    """Not "not converted yet": nothing in MMPose 1.x to convert to (and said before any other rule
    would stop on something else, e.g. the bottom-up data set of a HigherHRNet config)."""
    with pytest.raises(ConfigConversionError, match=f"`{re.escape(key)}` .* MMPose 1.x has no {what}") as caught:
        convert(coco(**change), "mmpose")
    assert "not a conversion to wait for" in str(caught.value) and "not converted yet" not in str(caught.value)


@pytest.mark.parametrize(
    ("save_best", "rule"), [("AP", "greater"), ("PCK", "greater"), ("AUC", "greater"), ("EPE", "less"), ("NME", "less")]
)
def test_save_best_gets_the_rule_mmpose_0x_inferred(save_best, rule):
    from mmfix._configs._mmpose_common import best_rule

    assert best_rule(save_best) == rule
    assert best_rule("bogus_metric") is None  # 0.x refused it too; 1.x's error says so


def test_auto_scale_lr_is_0x_gpus_over_8_unless_the_config_sets_its_own():
    out, _ = convert(coco(), "mmpose")
    assert out["auto_scale_lr"] == {"enable": False, "base_batch_size": 8 * 64}
    own = {"enable": False, "base_batch_size": 256}
    out, _ = convert(coco(auto_scale_lr=own), "mmpose")
    assert out["auto_scale_lr"] == own


def _on(kind: str, metric, save_best: str, ann_file: str = "data/x/annotations/val.json"):
    cfg = coco(evaluation={"interval": 10, "metric": metric, "save_best": save_best})
    for split in ("val", "test"):
        cfg["data"][split]["type"] = kind
        cfg["data"][split]["ann_file"] = ann_file
    return convert(cfg, "mmpose")


@pytest.mark.parametrize(
    "kind,metric,save_best,evaluators,best,rule",
    [
        # 0.x's _report_metric: PCK@0.2 by the annotation's box (1.x clips it to the image)
        (
            "AnimalHorse10Dataset",
            "PCK",
            "PCK",
            [{"type": "PCKAccuracy0x", "thr": 0.2, "norm_item": "bbox", "bbox_0x": "annotation"}],
            "PCK",
            "greater",
        ),
        # fixed-size crops: 0.x's box is the crop (1.x's Fly reads the annotation's)
        (
            "AnimalFlyDataset",
            ["PCK", "AUC", "EPE"],
            "AUC",
            [
                {"type": "PCKAccuracy0x", "thr": 0.2, "norm_item": "bbox", "bbox_0x": 192},
                {"type": "AUC", "norm_factor": 30, "num_thrs": 20},
                {"type": "EPE"},
            ],
            "AUC",
            "greater",
        ),
        (
            "PanopticDataset",
            ["PCKh", "AUC", "EPE"],
            "EPE",
            [
                {"type": "PCKAccuracy", "thr": 0.7, "norm_item": "head"},
                {"type": "AUC", "norm_factor": 30, "num_thrs": 20},
                {"type": "EPE"},
            ],
            "EPE",
            "less",
        ),
        (
            "Face300WDataset",
            ["NME"],
            "NME",
            [{"type": "NME", "norm_mode": "keypoint_distance", "keypoint_indices": [36, 45]}],
            "NME",
            "less",
        ),
        (
            "FaceAFLWDataset",
            ["NME"],
            "NME",
            [{"type": "NME0x", "norm_mode": "use_norm_item", "norm_item": "box_size"}],
            "NME",
            "less",
        ),
        # data sets with an evaluate of their own: 1.x's name for 0.x's key
        (
            "TopDownMpiiDataset",
            "PCKh",
            "PCKh",
            [{"type": "MpiiPCKAccuracy", "thr": 0.5, "norm_item": "head"}],
            "PCK",
            "greater",
        ),
        # MPII-TRB: 0.29's pooled PCKh at 0.3 of the head box's diagonal (1.x has no metric for it)
        ("TopDownMpiiTrbDataset", "PCKh", "PCKh", [{"type": "MpiiTrbPCKh0x", "thr": 0.3}], "PCKh", "greater"),
        (
            "TopDownJhmdbDataset",
            ["PCK", "tPCK"],
            "Mean PCK",
            [{"type": "JhmdbPCKAccuracy0x", "thr": 0.2, "norm_item": ["bbox", "torso"], "bbox_0x": "jhmdb"}],
            "PCK",
            "greater",
        ),
    ],
)
def test_keypoint_metrics_are_0x_s_with_its_normalisation(kind, metric, save_best, evaluators, best, rule) -> None:
    out, report = _on(kind, metric, save_best)
    got = out["val_evaluator"] if isinstance(out["val_evaluator"], list) else [out["val_evaluator"]]
    assert got == evaluators and out["test_evaluator"] == out["val_evaluator"]
    assert out["default_hooks"]["checkpoint"]["save_best"] == best
    assert out["default_hooks"]["checkpoint"]["rule"] == rule
    if any(e["type"].endswith("0x") for e in evaluators):
        assert "mmfix._legacy_models.mmpose" in out["custom_imports"]["imports"]
        assert any("mmfix's copy" in line for line in report.lines())
    if kind == "TopDownMpiiDataset":  # 0.x's evaluate read the head boxes beside the annotations
        for split in ("val", "test"):
            assert out[f"{split}_dataloader"]["dataset"]["headbox_file"] == "data/x/annotations/mpii_gt_val.mat"
        assert "headbox_file" not in out["train_dataloader"]["dataset"]  # 1.x refuses it when training
    if kind == "TopDownMpiiTrbDataset":  # 0.29's boxes (image_size / scale px) on every split
        for split in ("val", "test"):
            dataset = out[f"{split}_dataloader"]["dataset"]
            assert dataset["type"] == "MpiiTrbDataset0x" and dataset["image_size"] == (192, 256), split
        cfg = coco()
        cfg["data"]["train"]["type"] = "TopDownMpiiTrbDataset"
        train = convert(cfg, "mmpose")[0]["train_dataloader"]["dataset"]
        assert train["type"] == "MpiiTrbDataset0x" and train["image_size"] == (192, 256)
        assert "test_mode" not in train


@pytest.mark.parametrize(
    "kind,metric",
    [
        ("TopDownMpiiTrbDataset", ["PCK"]),  # its own evaluate computed PCKh only
        ("AnimalHorse10Dataset", ["NME"]),  # 0.29 itself fails on it (its normalisation's signature)
        ("TopDownCocoDataset", ["PCK"]),  # not a metric 0.x's COCO evaluate has
        ("OneHand10KDataset", ["PCKh"]),  # no head size in its annotations
    ],
)
def test_metrics_0x_did_not_compute_there_are_not_converted(kind, metric) -> None:
    with pytest.raises(ConfigConversionError, match=r"the metric .* on " + kind + " is not converted yet"):
        _on(kind, metric, "PCK")


HRNETV2_HEAD = {
    "type": "TopdownHeatmapSimpleHead",
    "in_channels": [18, 36, 72, 144],
    "in_index": (0, 1, 2, 3),
    "input_transform": "resize_concat",
    "out_channels": 68,
    "num_deconv_layers": 0,
    "extra": {"final_conv_kernel": 1, "num_conv_layers": 1, "num_conv_kernels": (1,)},
    "loss_keypoint": {"type": "JointsMSELoss", "use_target_weight": True},
}


def test_a_head_that_merged_feature_maps_is_1x_s_neck_and_head() -> None:
    # 1.x's td-hm_hrnetv2-w18_8xb64-60e_300w-256x256.py: FeatureMapProcessor(concat=True) + HeatmapHead(270)
    out, report = convert(coco(model__keypoint_head=copy.deepcopy(HRNETV2_HEAD)), "mmpose")
    assert out["model"]["neck"] == {"type": "FeatureMapProcessor", "concat": True}
    head = out["model"]["head"]
    assert (head["in_channels"], head["out_channels"]) == (270, 68)
    assert head["deconv_out_channels"] is None and head["deconv_kernel_sizes"] is None
    assert (head["conv_out_channels"], head["conv_kernel_sizes"]) == ((270,), (1,))
    assert any("FeatureMapProcessor" in line for line in report.lines())
    # a subset of the maps, with 0.x's align_corners: selected and resized as 0.x's head did
    subset = {**HRNETV2_HEAD, "in_index": (1, 3), "align_corners": True}
    out, _ = convert(coco(model__keypoint_head=subset), "mmpose")
    assert out["model"]["neck"] == {
        "type": "FeatureMapProcessor",
        "concat": True,
        "select_index": (1, 3),
        "align_corners": True,
    }
    assert out["model"]["head"]["in_channels"] == 36 + 144


def test_other_input_transforms_and_a_second_neck_are_not_converted_yet() -> None:
    with pytest.raises(ConfigConversionError, match="the input transform 'multiple_select' is not converted yet"):
        convert(coco(model__keypoint_head={**HRNETV2_HEAD, "input_transform": "multiple_select"}), "mmpose")
    with pytest.raises(ConfigConversionError, match="a neck before a head that merges feature maps"):
        convert(coco(model__keypoint_head=dict(HRNETV2_HEAD), model__neck={"type": "GlobalAveragePooling"}), "mmpose")


def test_vipnas_s_grouped_deconvolutions_are_1x_s_vipnas_head() -> None:
    # 1.x's td-hm_vipnas-mbv3_8xb64-210e_coco-256x192.py: ViPNASHead(160, deconv (160,)*3 in 160 groups)
    head = {
        "type": "ViPNASHeatmapSimpleHead",
        "in_channels": 160,
        "out_channels": 17,
        "num_deconv_filters": (160, 160, 160),
        "num_deconv_groups": (160, 160, 160),
        "loss_keypoint": {"type": "JointsMSELoss", "use_target_weight": True},
    }
    out, report = convert(coco(model__keypoint_head=head), "mmpose")
    new = out["model"]["head"]
    assert new["type"] == "ViPNASHead" and (new["in_channels"], new["out_channels"]) == (160, 17)
    assert new["deconv_out_channels"] == new["deconv_num_groups"] == (160, 160, 160)
    assert new["deconv_kernel_sizes"] == (4, 4, 4)
    assert any("ViPNASHead" in line for line in report.lines())
    # 0.x's defaults (144 wide, 16 groups) written out, not left to 1.x's
    out, _ = convert(
        coco(model__keypoint_head={"type": "ViPNASHeatmapSimpleHead", "in_channels": 160, "out_channels": 17}), "mmpose"
    )
    assert out["model"]["head"]["deconv_out_channels"] == (144, 144, 144)
    assert out["model"]["head"]["deconv_num_groups"] == (16, 16, 16)


def deeppose(rle: bool = False, **changes):
    """res50_coco_256x192.py of 0.29's deeppose/coco (res50_coco_256x192_rle.py where ``rle``), merged."""
    loss = {"type": "RLELoss", "use_target_weight": True, "size_average": True, "residual": True}
    head = {
        "type": "DeepposeRegressionHead",
        "in_channels": 2048,
        "num_joints": 17,
        "loss_keypoint": loss if rle else {"type": "SmoothL1Loss", "use_target_weight": True},
    }
    if rle:
        head["out_sigma"] = True
    cfg = coco(
        model__backbone={"type": "ResNet", "depth": 50, "num_stages": 4, "out_indices": (3,)},
        model__keypoint_head=head,
        model__test_cfg={"flip_test": True, **({"regression_flip_shift": True} if rle else {})},
    )
    cfg["model"]["neck"] = {"type": "GlobalAveragePooling"}
    train = [dict(t) for t in TRAIN]
    train[-2] = {"type": "TopDownGenerateTargetRegression"}
    cfg["data"]["train"]["pipeline"] = train
    return _changed(cfg, changes)


def test_deeppose_s_head_is_1x_s_regression_head_on_a_regression_label_codec() -> None:
    # 1.x's td-reg_res50_8xb64-210e_coco-256x192.py: RegressionHead(2048, 17, SmoothL1Loss), a
    # GlobalAveragePooling neck, RegressionLabel(input_size=(192, 256))
    out, report = convert(deeppose(), "mmpose")
    model = out["model"]
    codec = {"type": "RegressionLabel", "input_size": (192, 256)}
    assert model["neck"] == {"type": "GlobalAveragePooling"}
    assert model["head"] == {
        "type": "RegressionHead",
        "in_channels": 2048,
        "num_joints": 17,
        "loss": {"type": "SmoothL1Loss", "use_target_weight": True},
        "decoder": codec,
    }
    assert out["codec"] == codec
    # 0.x moved the flipped x by a pixel only with regression_flip_shift; 1.x's default moves it
    assert model["test_cfg"] == {"flip_test": True, "shift_coords": False}
    steps = out["train_dataloader"]["dataset"]["pipeline"]
    assert {"type": "GenerateTarget", "encoder": codec} in steps
    assert "MSRAHeatmap0x" not in str(out)
    assert any("RegressionHead" in line for line in report.lines())


def test_rle_s_sigmas_are_1x_s_rle_head_with_its_loss_and_the_flip_shift() -> None:
    # 1.x's td-reg_res50_rle-8xb64-210e_coco-256x192.py: RLEHead(2048, 17, RLELoss), shift_coords=True
    out, _ = convert(deeppose(rle=True), "mmpose")
    head = out["model"]["head"]
    assert head["type"] == "RLEHead" and (head["in_channels"], head["num_joints"]) == (2048, 17)
    assert head["loss"] == {"type": "RLELoss", "use_target_weight": True, "size_average": True, "residual": True}
    assert out["model"]["test_cfg"] == {"flip_test": True, "shift_coords": True}
    cfg = deeppose(rle=True)
    cfg["model"]["keypoint_head"]["loss_keypoint"]["q_dis"] = "gaussian"  # 1.x's name for it
    out, _ = convert(cfg, "mmpose")
    assert out["model"]["head"]["loss"]["q_distribution"] == "gaussian" and "q_dis" not in out["model"]["head"]["loss"]


@pytest.mark.parametrize("loss", ["WingLoss", "SoftWingLoss"])
def test_the_face_zoo_s_wing_losses_keep_their_arguments(loss) -> None:
    cfg = deeppose()
    cfg["model"]["keypoint_head"]["loss_keypoint"] = {"type": loss, "use_target_weight": True, "epsilon": 2.5}
    out, _ = convert(cfg, "mmpose")
    assert out["model"]["head"]["loss"] == {"type": loss, "use_target_weight": True, "epsilon": 2.5}


def test_a_test_cfg_without_flip_test_flips_as_0x_did() -> None:
    # 0.29's TopDown.forward_test: self.test_cfg.get('flip_test', True)
    for cfg in (deeppose(model__test_cfg={}), coco(model__test_cfg={})):
        out, _ = convert(cfg, "mmpose")
        assert out["model"]["test_cfg"]["flip_test"] is True


def test_targets_heads_and_sigmas_that_do_not_match_stop_with_one_clear_error() -> None:
    sigma_without_rle = deeppose()
    sigma_without_rle["model"]["keypoint_head"]["out_sigma"] = True
    rle_without_sigma = deeppose(rle=True)
    del rle_without_sigma["model"]["keypoint_head"]["out_sigma"]
    for cfg in (sigma_without_rle, rle_without_sigma):
        with pytest.raises(ConfigConversionError, match="out_sigma=True\\) exactly for RLELoss"):
            convert(cfg, "mmpose")
    heatmap_target = deeppose()
    heatmap_target["data"]["train"]["pipeline"] = TRAIN
    with pytest.raises(ConfigConversionError, match=r"heatmap targets .* for a regression head"):
        convert(heatmap_target, "mmpose")
    regression_target = coco()
    regression_target["data"]["train"]["pipeline"] = deeppose()["data"]["train"]["pipeline"]
    with pytest.raises(ConfigConversionError, match=r"regression targets .* for a heatmap head"):
        convert(regression_target, "mmpose")
    with pytest.raises(ConfigConversionError, match="the loss L1Loss is not converted yet"):
        convert(deeppose(model__keypoint_head__loss_keypoint={"type": "L1Loss"}), "mmpose")
    with pytest.raises(ConfigConversionError, match="takes no arguments"):
        cfg = deeppose()
        cfg["data"]["train"]["pipeline"][-2] = {"type": "TopDownGenerateTargetRegression", "sigma": 2}
        convert(cfg, "mmpose")


def udp(**test_cfg):
    """hrnet_w32_coco_256x192_udp.py's settings on the ResNet config: UDP's warp, encoding and decoding."""
    cfg = coco(
        model__test_cfg={
            "flip_test": True,
            "post_process": "default",
            "shift_heatmap": False,
            "target_type": "GaussianHeatmap",
            "modulate_kernel": 11,
            "use_udp": True,
            **test_cfg,
        }
    )
    for split in ("train", "val", "test"):
        pipeline = [dict(t) for t in cfg["data"][split]["pipeline"]]
        for t in pipeline:
            if t["type"] == "TopDownAffine":
                t["use_udp"] = True
            if t["type"] == "TopDownGenerateTarget":
                t.update(sigma=2, encoding="UDP", target_type="GaussianHeatmap")
        cfg["data"][split]["pipeline"] = pipeline
    return cfg


def test_udp_s_warp_encoding_and_decoding_are_1x_s_udp_heatmap_codec() -> None:
    # 1.x's td-hm_hrnet-w32_udp-8xb64-210e_coco-256x192.py: UDPHeatmap(input_size, heatmap_size, sigma=2),
    # TopdownAffine(use_udp=True)
    out, _ = convert(udp(), "mmpose")
    codec = {
        "type": "UDPHeatmap0x",  # mmfix's copy: 0.x blurred before UDP's Taylor step as 1.x does not
        "input_size": (192, 256),
        "heatmap_size": (48, 64),
        "sigma": 2,
        "blur_kernel_size": 11,
    }
    assert out["codec"] == codec and out["model"]["head"]["decoder"] == codec
    for split in ("train", "val", "test"):
        affine = [t for t in out[f"{split}_dataloader"]["dataset"]["pipeline"] if t["type"] == "TopdownAffine"]
        assert affine == [{"type": "TopdownAffine", "input_size": (192, 256), "use_udp": True}], split
    assert out["model"]["test_cfg"] == {"flip_test": True, "flip_mode": "heatmap", "shift_heatmap": False}
    assert "MSRAHeatmap0x" not in str(out)  # 0.x's quarter-pixel step is not UDP's decoding
    assert "mmfix._legacy_models.mmpose" in out["custom_imports"]["imports"]
    out, _ = convert(udp(modulate_kernel=17), "mmpose")
    assert out["codec"]["blur_kernel_size"] == 17


def udp_combined(**test_cfg):
    """hrnet_w32_coco_256x192_udp_regress.py's settings: UDP's combined targets (a disc and x, y
    offsets per keypoint), three channels a keypoint, CombinedTargetMSELoss."""
    cfg = udp(target_type="CombinedTarget", **test_cfg)
    cfg["model"]["keypoint_head"]["out_channels"] = 3 * 17
    cfg["model"]["keypoint_head"]["loss_keypoint"] = {"type": "CombinedTargetMSELoss", "use_target_weight": True}
    for t in cfg["data"]["train"]["pipeline"]:
        if t["type"] == "TopDownGenerateTarget":
            t.update(target_type="CombinedTarget")
    return cfg


def test_udp_s_combined_targets_are_1x_s_combined_udp_heatmap_with_0x_s_decoding() -> None:
    # 1.x's td-hm_hrnet-w32_udp-regress-8xb64-210e_coco-256x192.py: UDPHeatmap(heatmap_type='combined'),
    # HeatmapHead(out_channels=51, CombinedTargetMSELoss), compute_acc=False, flip_mode='udp_combined'
    out, _ = convert(udp_combined(), "mmpose")
    codec = {
        "type": "UDPHeatmap0x",  # 0.x's targets (offsets inside the disc) and blur of the offsets
        "input_size": (192, 256),
        "heatmap_size": (48, 64),
        "heatmap_type": "combined",
        "radius_factor": 0.0546875,
        "blur_kernel_size": 11,
    }
    assert out["codec"] == codec and out["model"]["head"]["decoder"] == codec
    target = [t for t in out["train_dataloader"]["dataset"]["pipeline"] if t["type"] == "GenerateTarget"]
    assert target == [{"type": "GenerateTarget", "encoder": codec}]
    head = out["model"]["head"]
    assert head["out_channels"] == 51
    assert head["loss"] == {"type": "CombinedTargetMSELoss", "use_target_weight": True}
    assert out["model"]["train_cfg"] == {"compute_acc": False}
    assert out["model"]["test_cfg"] == {"flip_test": True, "flip_mode": "udp_combined", "shift_heatmap": False}
    radius = udp_combined(valid_radius_factor=0.06)
    radius["data"]["train"]["pipeline"][-2]["valid_radius_factor"] = 0.06
    out, _ = convert(radius, "mmpose")
    assert out["codec"]["radius_factor"] == 0.06
    assert "train_cfg" not in convert(udp(), "mmpose")[0]["model"]  # Gaussian heatmaps: 1.x's accuracy
    # a training pipeline's TopDownGenerateTarget without a target type made Gaussian heatmaps in 0.x
    unsaid = udp_combined()
    unsaid["data"]["train"]["pipeline"][-2].pop("target_type")
    with pytest.raises(ConfigConversionError, match="encoded GaussianHeatmap targets and decoded CombinedTarget"):
        convert(unsaid, "mmpose")
    # 0.x compared target types without regard to case
    spelled = udp_combined()
    spelled["model"]["test_cfg"]["target_type"] = "combinedtarget"
    spelled["data"]["train"]["pipeline"][-2]["target_type"] = "COMBINEDTARGET"
    assert convert(spelled, "mmpose")[0]["codec"]["heatmap_type"] == "combined"
    assert convert(udp(target_type="GaussianHeatMap"), "mmpose")[0]["codec"]["type"] == "UDPHeatmap0x"
    # a config without a training pipeline's target: the decoding's radius
    test_only = udp_combined(valid_radius_factor=0.06)
    test_only["data"]["train"]["pipeline"] = [t for t in TRAIN if t["type"] != "TopDownGenerateTarget"]
    assert convert(test_only, "mmpose")[0]["codec"]["radius_factor"] == 0.06


def test_udp_encoding_and_decoding_that_disagree_or_are_not_converted_stop_with_one_clear_error() -> None:
    with pytest.raises(ConfigConversionError, match="encoded the targets with UDP and decoded without UDP"):
        convert(udp(use_udp=False), "mmpose")
    cfg = coco(model__test_cfg={"flip_test": True, "use_udp": True})
    with pytest.raises(ConfigConversionError, match="encoded the targets with MSRA and decoded with UDP"):
        convert(cfg, "mmpose")
    with pytest.raises(ConfigConversionError, match="encoded GaussianHeatmap targets and decoded CombinedTarget"):
        convert(udp(target_type="CombinedTarget"), "mmpose")
    with pytest.raises(ConfigConversionError, match=r"valid_radius_factor=0\.0546875 and decoded with 0\.06"):
        convert(udp_combined(valid_radius_factor=0.06), "mmpose")
    # what 0.x could not train, or 1.x's other heads cannot (they measure accuracy on one map a keypoint)
    mse = {"type": "JointsMSELoss", "use_target_weight": True}
    refused = [
        (udp_combined, {"model__keypoint_head__type": "TopdownHeatmapMultiStageHead"}, "for a TopdownHeatmapMulti"),
        (udp_combined, {"model__keypoint_head__loss_keypoint": mse}, "'JointsMSELoss' .*CombinedTargetMSELoss only"),
        (udp_combined, {"model__keypoint_head__out_channels": 17}, r"three maps a keypoint: 3 x 17 = 51"),
        (udp, {"model__keypoint_head__loss_keypoint__type": "CombinedTargetMSELoss"}, "could not train that either"),
    ]
    for make, changes, error in refused:
        with pytest.raises(ConfigConversionError, match=error):
            convert(_changed(make(), changes), "mmpose")
    several = udp_combined()
    several["data"]["train"]["pipeline"][-2]["valid_radius_factor"] = [0.05, 0.06]
    with pytest.raises(ConfigConversionError, match="an encoding of several radii is not converted yet"):
        convert(several, "mmpose")
    with pytest.raises(ConfigConversionError, match="Megvii's blur on a UDP encoding is not converted yet"):
        convert(udp(post_process="megvii"), "mmpose")


def test_rle_s_rescoring_is_1x_s_bbox_rle_score_mode() -> None:
    # 0.29's TopDownCocoDataset.evaluate(rle_score=True): box score + mean + max of the keypoint scores
    cfg = deeppose(rle=True)
    cfg["evaluation"]["rle_score"] = True
    out, _ = convert(cfg, "mmpose")
    assert out["val_evaluator"]["score_mode"] == out["test_evaluator"]["score_mode"] == "bbox_rle"
    assert convert(deeppose(rle=True), "mmpose")[0]["val_evaluator"]["score_mode"] == "bbox_keypoint"


def test_heatmap_test_options_copied_into_a_regression_config_are_dropped_as_0x_ignored_them() -> None:
    # 0.29's hand and fashion DeepPose configs carry the heatmap models' test_cfg; nothing read it there
    test_cfg = {"flip_test": True, "post_process": "default", "shift_heatmap": True, "modulate_kernel": 11}
    out, report = convert(deeppose(model__test_cfg=test_cfg), "mmpose")
    assert out["model"]["test_cfg"] == {"flip_test": True, "shift_coords": False}
    assert any("model.test_cfg.shift_heatmap" in line for line in report.lines())
    with pytest.raises(ConfigConversionError, match="the test option bogus is not converted yet"):
        convert(deeppose(model__test_cfg={"flip_test": True, "bogus": 1}), "mmpose")


def test_cpm_and_hourglass_multi_stage_heads_are_1x_s_cpm_head() -> None:
    # 1.x's td-hm_cpm_8xb64-210e_coco-256x192.py: CPMHead(17, 17, num_stages=6, deconv None, final None);
    # td-hm_hourglass52_8xb32-210e_coco-256x256.py: CPMHead(256, 17, num_stages=1, deconv None)
    cpm = {
        "type": "TopdownHeatmapMultiStageHead",
        "in_channels": 17,
        "out_channels": 17,
        "num_stages": 6,
        "num_deconv_layers": 0,
        "extra": {"final_conv_kernel": 0},
        "loss_keypoint": {"type": "JointsMSELoss", "use_target_weight": True},
    }
    out, _ = convert(coco(model__keypoint_head=cpm), "mmpose")
    head = out["model"]["head"]
    assert head["type"] == "CPMHead" and (head["in_channels"], head["out_channels"], head["num_stages"]) == (17, 17, 6)
    assert head["deconv_out_channels"] is None and head["final_layer"] is None
    assert head["loss"] == {"type": "KeypointMSELoss", "use_target_weight": True}
    hourglass = {**cpm, "in_channels": 256, "num_stages": 1, "extra": {"final_conv_kernel": 1}}
    head = convert(coco(model__keypoint_head=hourglass), "mmpose")[0]["model"]["head"]
    assert head["num_stages"] == 1 and "final_layer" not in head  # 1.x's default: a 1x1 convolution
    # 0.x's defaults (three 256-wide deconvolutions, one stage) written out
    bare = {"type": "TopdownHeatmapMultiStageHead", "in_channels": 32, "out_channels": 17}
    head = convert(coco(model__keypoint_head=bare), "mmpose")[0]["model"]["head"]
    assert head["num_stages"] == 1 and head["deconv_out_channels"] == (256, 256, 256)
    # a loss per stage, as 0.x's nn.Sequential of them
    losses = [{"type": "JointsMSELoss", "use_target_weight": True, "loss_weight": w} for w in (0.5, 1.0)]
    head = convert(coco(model__keypoint_head={**cpm, "num_stages": 2, "loss_keypoint": losses}), "mmpose")[0]
    assert [loss["loss_weight"] for loss in head["model"]["head"]["loss"]] == [0.5, 1.0]
    with pytest.raises(ConfigConversionError, match="a list of losses other than one per stage"):
        convert(coco(model__keypoint_head={**cpm, "loss_keypoint": losses}), "mmpose")


def test_an_unweighted_joints_mse_loss_counts_every_keypoint_as_in_0x() -> None:
    # 1.x's KeypointMSELoss weights by the keypoints' visibility whatever use_target_weight says
    head = dict(coco()["model"]["keypoint_head"])
    for loss in ({"type": "JointsMSELoss"}, {"type": "JointsMSELoss", "use_target_weight": False}):
        out, _ = convert(coco(model__keypoint_head={**head, "loss_keypoint": loss}), "mmpose")
        assert out["model"]["head"]["loss"] == {**loss, "type": "KeypointMSELoss0x"}
        assert "mmfix._legacy_models.mmpose" in out["custom_imports"]["imports"]
    out, _ = convert(coco(), "mmpose")
    assert out["model"]["head"]["loss"] == {"type": "KeypointMSELoss", "use_target_weight": True}


def _mspn(stages: int = 2, kernels=None, **head_changes):
    """MMPose 0.29's {stages}xmspn50_coco_256x192.py's model, targets and test settings."""
    units = 4
    losses = (
        [{"type": "JointsMSELoss", "use_target_weight": True, "loss_weight": 0.25}] * 3
        + [{"type": "JointsOHKMMSELoss", "use_target_weight": True, "loss_weight": 1.0}]
    ) * stages
    head = {
        "type": "TopdownHeatmapMSMUHead",
        "out_shape": (64, 48),
        "unit_channels": 256,
        "out_channels": 17,
        "num_stages": stages,
        "num_units": units,
        "use_prm": False,
        "norm_cfg": {"type": "BN"},
        "loss_keypoint": losses,
        **head_changes,
    }
    if kernels is None:
        kernels = [(15, 15), (11, 11), (9, 9), (7, 7)] + [(11, 11), (9, 9), (7, 7), (5, 5)] * (stages - 1)
    target = {"type": "TopDownGenerateTarget", "kernel": kernels, "encoding": "Megvii"}
    train = [target if step["type"] == "TopDownGenerateTarget" else step for step in TRAIN]
    cfg = coco(
        model__backbone={"type": "MSPN", "unit_channels": 256, "num_stages": stages, "num_units": units},
        model__keypoint_head=head,
        model__test_cfg={"flip_test": True, "post_process": "megvii", "shift_heatmap": False, "modulate_kernel": 5},
    )
    cfg["data"]["train"]["pipeline"] = train
    return cfg


def test_mspn_and_rsn_heads_targets_and_decoding_are_1x_s_official_ones() -> None:
    # 1.x's td-hm_2xmspn50_8xb32-210e_coco-256x192.py: five MegviiHeatmap codecs (kernels 15, 11, 9,
    # 7, 5) for GenerateTarget(multilevel=True), MSPNHead with level_indices [0, 1, 2, 3] + [1, 2, 3,
    # 4], KeypointMSELoss x 3 + KeypointOHKMMSELoss per stage, decoder MegviiHeatmap(kernel_size=5)
    out, _ = convert(_mspn(), "mmpose")
    megvii = {"type": "MegviiHeatmap", "input_size": (192, 256), "heatmap_size": (48, 64)}
    head = out["model"]["head"]
    assert head["type"] == "MSPNHead"
    assert {k: head[k] for k in ("out_shape", "unit_channels", "out_channels", "num_stages", "num_units")} == {
        "out_shape": (64, 48),
        "unit_channels": 256,
        "out_channels": 17,
        "num_stages": 2,
        "num_units": 4,
    }
    assert head["use_prm"] is False and head["norm_cfg"] == {"type": "BN"}
    assert head["level_indices"] == [0, 1, 2, 3] + [1, 2, 3, 4]
    assert [loss["type"] for loss in head["loss"]] == (["KeypointMSELoss"] * 3 + ["KeypointOHKMMSELoss"]) * 2
    assert [loss["loss_weight"] for loss in head["loss"]] == ([0.25] * 3 + [1.0]) * 2
    assert head["decoder"] == {**megvii, "kernel_size": 5}  # 0.x's modulate_kernel, not a target's
    assert out["model"]["test_cfg"] == {"flip_test": True, "flip_mode": "heatmap", "shift_heatmap": False}
    assert out["model"]["backbone"]["type"] == "MSPN" and "neck" not in out["model"]
    generate = [t for t in out["train_dataloader"]["dataset"]["pipeline"] if t["type"] == "GenerateTarget"]
    assert generate == [
        {
            "type": "GenerateTarget",
            "encoder": [{**megvii, "kernel_size": k} for k in (15, 11, 9, 7, 5)],
            "multilevel": True,
        }
    ]
    assert out["codec"] == generate[0]["encoder"]
    affine = [t for t in out["train_dataloader"]["dataset"]["pipeline"] if t["type"] == "TopdownAffine"]
    assert affine[0]["input_size"] == (192, 256)
    # RSN's one stage: four kernels, four levels
    rsn = _mspn(1, kernels=[(11, 11), (9, 9), (7, 7), (5, 5)])
    rsn["model"]["backbone"] = {"type": "RSN", "num_stages": 1, "num_steps": 4}
    rsn["model"]["pretrained"] = None  # RSN's configs: trained from scratch
    out, _ = convert(rsn, "mmpose")
    assert out["model"]["head"]["level_indices"] == [0, 1, 2, 3]
    assert [e["kernel_size"] for e in out["codec"]] == [11, 9, 7, 5]
    assert out["model"]["backbone"] == {"type": "RSN", "num_stages": 1, "num_steps": 4}
    # one loss for every stage and unit, as 0.x's head took it too
    one = convert(_mspn(loss_keypoint={"type": "JointsOHKMMSELoss", "use_target_weight": True, "topk": 6}), "mmpose")[0]
    assert one["model"]["head"]["loss"] == {"type": "KeypointOHKMMSELoss", "use_target_weight": True, "topk": 6}


def test_megvii_targets_and_heads_that_do_not_match_stop_with_one_clear_error() -> None:
    # what 0.29's head required
    for key in ("out_shape", "loss_keypoint"):
        with pytest.raises(ConfigConversionError, match=f"model.keypoint_head.{key}.*requires it"):
            convert(_mspn(**{key: None}), "mmpose")
    # one target per stage and unit: 0.x's head asserted it when training began
    with pytest.raises(ConfigConversionError, match=r"one target per stage and unit \(2 x 4 = 8\)"):
        convert(_mspn(kernels=[(11, 11), (9, 9), (7, 7), (5, 5)]), "mmpose")
    with pytest.raises(ConfigConversionError, match="one target per stage and unit"):
        convert(_mspn(kernels=(11, 11)), "mmpose")
    with pytest.raises(ConfigConversionError, match="one loss, or one per stage and unit"):
        convert(_mspn(loss_keypoint=[{"type": "JointsMSELoss"}] * 3), "mmpose")
    # several targets for a head that learns one
    cfg = _mspn()
    cfg["model"]["keypoint_head"] = coco()["model"]["keypoint_head"]
    with pytest.raises(ConfigConversionError, match="only a multi-stage multi-unit head"):
        convert(cfg, "mmpose")
    # Megvii's encoding decoded otherwise, Megvii's decoding of another encoding, a kernel not square
    cfg = _mspn()
    cfg["model"]["test_cfg"]["post_process"] = "default"
    with pytest.raises(ConfigConversionError, match="a decoding of Megvii's encoding other than 'megvii'"):
        convert(cfg, "mmpose")
    with pytest.raises(ConfigConversionError, match="Megvii's decoding of MSRA's encoding"):
        convert(coco(model__test_cfg={"post_process": "megvii", "modulate_kernel": 5}), "mmpose")
    with pytest.raises(ConfigConversionError, match=r"a kernel other than a square \(k, k\)"):
        convert(_mspn(kernels=[(11, 9)] * 8), "mmpose")
    # several MSRA sigmas: several targets per keypoint, which 0.x's MSRA heads did not learn
    cfg = coco()
    for step in cfg["data"]["train"]["pipeline"]:
        if step["type"] == "TopDownGenerateTarget":
            step["sigma"] = [2, 3]
    with pytest.raises(ConfigConversionError, match="an encoding of several sigmas"):
        convert(cfg, "mmpose")
