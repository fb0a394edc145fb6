"""MMPose 0.x 3D lifting config rules (mmfix/_configs/_mmpose_lifting.py), as pure functions on dicts.

Each rule on a small 0.x config written as MMPose 0.29's zoo writes them
(videopose3d_h36m_27frames_fullconv_supervised.py, simplebaseline3d_h36m.py, merged); the 1.x side
is MMPose 1.3.2's video-pose-lift_tcn-27frm-supv_8xb128-160e_h36m.py and
image-pose-lift_tcn_8xb64-200e_h36m.py. tests/integration/test_family_0x_mmpose_lifting.py runs
the official configs against the real MMPose 0.29.0.
"""

from __future__ import annotations

import copy
import re

import pytest

from mmfix._configs import ConfigConversionError, convert

ROOT = "data/h36m"
CENTRE = {
    "type": "GetRootCenteredPose",
    "item": "target",
    "visible_item": "target_visible",
    "root_index": 0,
    "root_name": "root_position",
    "remove_root": False,
}
IMAGE_NORM = {"type": "ImageCoordinateNormalization", "item": "input_2d"}
FLIP = {
    "type": "RelativeJointRandomFlip",
    "item": ["input_2d", "target"],
    "flip_cfg": [{"center_mode": "static", "center_x": 0.0}, {"center_mode": "root", "center_index": 0}],
    "visible_item": ["input_2d_visible", "target_visible"],
    "flip_prob": 0.5,
}
TENSOR = {"type": "PoseSequenceToTensor", "item": "input_2d"}
COLLECT = {
    "type": "Collect",
    "keys": [("input_2d", "input"), "target"],
    "meta_name": "metas",
    "meta_keys": ["target_image_path", "flip_pairs", "root_position"],
}
MEAN_2D, STD_2D = [[500.0 + j, 400.0 - j] for j in range(17)], [[100.0, 60.0 + j] for j in range(17)]
MEAN_3D, STD_3D = [[0.01 * j, 0.02, -0.01] for j in range(16)], [[0.1, 0.2 + 0.01 * j, 0.15] for j in range(16)]


def _changed(cfg, changes):
    """``cfg`` with each ``a__b__c=value`` of ``changes`` set at ``cfg[a][b][c]`` (digits index lists)."""
    for path, value in changes.items():
        node = cfg
        *parents, last = path.split("__")
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return cfg


def videopose(frames: int = 27, detection: bool = False, **changes):
    data_cfg = {
        "num_joints": 17,
        "seq_len": frames,
        "seq_frame_interval": 1,
        "causal": False,
        "temporal_padding": True,
        "joint_2d_src": "detection" if detection else "gt",
        "need_camera_param": True,
        "camera_param_file": f"{ROOT}/annotation_body3d/cameras.pkl",
    }
    if detection:
        data_cfg["joint_2d_det_file"] = f"{ROOT}/joint_2d_det_files/cpn_ft_h36m_dbb_train.npy"
    train = [CENTRE, IMAGE_NORM, FLIP, TENSOR, COLLECT]
    val = [CENTRE, IMAGE_NORM, TENSOR, COLLECT]

    def ds(split, pipeline):
        return {
            "type": "Body3DH36MDataset",
            "ann_file": f"{ROOT}/annotation_body3d/fps50/h36m_{split}.npz",
            "img_prefix": f"{ROOT}/images/",
            "data_cfg": copy.deepcopy(data_cfg),
            "pipeline": copy.deepcopy(pipeline),
        }

    cfg = {
        "evaluation": {"interval": 10, "metric": ["mpjpe", "p-mpjpe"], "save_best": "MPJPE"},
        "optimizer": {"type": "Adam", "lr": 1e-3},
        "optimizer_config": {"grad_clip": None},
        "lr_config": {"policy": "exp", "by_epoch": True, "gamma": 0.975},
        "total_epochs": 160,
        "log_config": {"interval": 20, "hooks": [{"type": "TextLoggerHook"}]},
        "checkpoint_config": {"interval": 10},
        "log_level": "INFO",
        "load_from": None,
        "resume_from": None,
        "dist_params": {"backend": "nccl"},
        "workflow": [("train", 1)],
        "model": {
            "type": "PoseLifter",
            "pretrained": None,
            "backbone": {
                "type": "TCN",
                "in_channels": 34,
                "stem_channels": 1024,
                "num_blocks": 2,
                "kernel_sizes": (3, 3, 3),
                "dropout": 0.25,
                "use_stride_conv": True,
            },
            "keypoint_head": {
                "type": "TemporalRegressionHead",
                "in_channels": 1024,
                "num_joints": 17,
                "loss_keypoint": {"type": "MPJPELoss"},
            },
            "train_cfg": {},
            "test_cfg": {"restore_global_position": True},
        },
        "data": {
            "samples_per_gpu": 128,
            "workers_per_gpu": 2,
            "val_dataloader": {"samples_per_gpu": 128},
            "test_dataloader": {"samples_per_gpu": 128},
            "train": ds("train", train),
            "val": ds("test", val),
            "test": ds("test", val),
        },
        "train_pipeline": copy.deepcopy(train),
        "val_pipeline": copy.deepcopy(val),
        "test_pipeline": copy.deepcopy(val),
    }
    return _changed(cfg, changes)


def simplebaseline(**changes):
    cfg = videopose(1)
    pipeline = [
        {**CENTRE, "remove_root": True},
        {"type": "NormalizeJointCoordinate", "item": "target", "mean": MEAN_3D, "std": STD_3D},
        {"type": "NormalizeJointCoordinate", "item": "input_2d", "mean": MEAN_2D, "std": STD_2D},
        TENSOR,
        {
            **COLLECT,
            "meta_keys": [
                "target_image_path",
                "flip_pairs",
                "root_position",
                "root_position_index",
                "target_mean",
                "target_std",
            ],
        },
    ]
    cfg["model"]["backbone"].update(num_blocks=2, kernel_sizes=(1, 1, 1), dropout=0.5)
    cfg["model"]["backbone"].pop("use_stride_conv")
    cfg["model"]["keypoint_head"].update(num_joints=16, loss_keypoint={"type": "MSELoss"})
    cfg["lr_config"] = {"policy": "step", "by_epoch": False, "step": 100000, "gamma": 0.96}
    cfg["total_epochs"] = 200
    cfg["data"].update(
        samples_per_gpu=64, val_dataloader={"samples_per_gpu": 64}, test_dataloader={"samples_per_gpu": 64}
    )
    for split in ("train", "val", "test"):
        ds = cfg["data"][split]
        ds["data_cfg"].update(causal=True, temporal_padding=False, need_camera_param=False)
        ds["data_cfg"].pop("temporal_padding")
        ds["pipeline"] = copy.deepcopy(pipeline)
    for name in ("train_pipeline", "val_pipeline", "test_pipeline"):
        cfg[name] = copy.deepcopy(pipeline)
    return _changed(cfg, changes)


def test_videopose3d_is_1x_s_lifter_with_0x_s_copies_where_1x_computes_otherwise() -> None:
    out, report = convert(videopose(), "mmpose")
    assert out["default_scope"] == "mmpose"
    codec = {
        "type": "VideoPoseLifting",
        "num_keypoints": 17,
        "zero_center": True,
        "root_index": 0,
        "remove_root": False,
        "normalize_camera": False,
    }
    assert out["codec"] == codec
    model = out["model"]
    assert model["type"] == "PoseLifter"
    assert model["backbone"]["type"] == "TCN0x"  # 0.29's initialisation
    assert model["backbone"]["kernel_sizes"] == (3, 3, 3) and model["backbone"]["use_stride_conv"] is True
    head = model["head"]
    assert head["type"] == "TemporalRegressionHead" and head["decoder"] == codec
    assert head["loss"] == {"type": "MPJPELoss"} and (head["in_channels"], head["num_joints"]) == (1024, 17)
    assert head["init_cfg"]["type"] == "Kaiming" and head["init_cfg"]["mode"] == "fan_in"
    # 0.x's data_cfg as the data set's arguments; its paths from the working folder, as 0.x read them
    train = out["train_dataloader"]
    assert train["batch_size"] == 128 and train["sampler"]["shuffle"] is True
    dataset = train["dataset"]
    assert dataset["type"] == "Human36mDataset0x" and dataset["data_root"] == ""
    assert dataset["ann_file"] == f"{ROOT}/annotation_body3d/fps50/h36m_train.npz"
    assert dataset["camera_param_file"] == f"{ROOT}/annotation_body3d/cameras.pkl"
    expected = {"seq_len": 27, "seq_step": 1, "causal": False, "pad_video_seq": True, "keypoint_2d_src": "gt"}
    assert {k: dataset[k] for k in expected} == expected and dataset["subset_frac"] == 1
    # the flip about each image's middle, the target about its root; then the codec and the packing
    flip, target, pack = dataset["pipeline"]
    assert flip == {
        "type": "RandomFlipAroundRoot0x",
        "flip_prob": 0.5,
        "normalized_center_x": 0.0,
        "keypoints_flip_cfg": {},
        "target_flip_cfg": {"center_mode": "root", "center_index": 0},
    }
    assert target == {"type": "GenerateTarget", "encoder": codec}
    assert pack["type"] == "PackPoseInputs"
    assert {"target_img_path", "flip_indices", "target_root"} <= set(pack["meta_keys"])
    val = out["val_dataloader"]
    assert val["batch_size"] == 128 and val["dataset"]["test_mode"] is True
    assert [t["type"] for t in val["dataset"]["pipeline"]] == ["GenerateTarget", "PackPoseInputs"]
    assert out["test_dataloader"]["dataset"]["ann_file"].endswith("h36m_test.npz")
    assert [t["type"] for t in out["train_pipeline"]] == ["RandomFlipAroundRoot0x", "GenerateTarget", "PackPoseInputs"]
    # 0.29's metrics (its per-action errors), the best checkpoint by the lowest MPJPE
    assert out["val_evaluator"] == [{"type": "MPJPE0x", "mode": "mpjpe"}, {"type": "MPJPE0x", "mode": "p-mpjpe"}]
    assert out["test_evaluator"] == out["val_evaluator"]
    checkpoint = out["default_hooks"]["checkpoint"]
    assert (checkpoint["save_best"], checkpoint["rule"]) == ("MPJPE", "less")
    assert out["train_cfg"] == {"type": "EpochBasedTrainLoop", "max_epochs": 160, "val_interval": 10}
    # the decay over the whole run (1.x's official config stops it at epoch 80 of 160)
    assert out["param_scheduler"] == [
        {"type": "ExponentialLR", "gamma": 0.975, "begin": 0, "end": 160, "by_epoch": True}
    ]
    assert out["optim_wrapper"]["optimizer"] == {"type": "Adam", "lr": 1e-3}
    assert out["visualizer"]["type"] == "Pose3dLocalVisualizer"
    assert "mmfix._legacy_models.mmpose_lifting" in out["custom_imports"]["imports"]
    assert not any(key in out for key in ("data", "lr_config", "total_epochs", "evaluation"))
    moved = " ".join(report.lines())
    assert "Human36mDataset0x" in moved and "TCN0x" in moved and "MPJPE0x" in moved


def test_cpn_detections_are_1x_s_detection_source() -> None:
    out, _ = convert(videopose(243, detection=True), "mmpose")
    dataset = out["train_dataloader"]["dataset"]
    assert dataset["seq_len"] == 243 and dataset["keypoint_2d_src"] == "detection"
    assert dataset["keypoint_2d_det_file"] == f"{ROOT}/joint_2d_det_files/cpn_ft_h36m_dbb_train.npy"


def test_simplebaseline3d_is_1x_s_image_pose_lifting_with_0x_s_statistics() -> None:
    out, _ = convert(simplebaseline(), "mmpose")
    codec = out["codec"]
    assert codec == {
        "type": "ImagePoseLifting",
        "num_keypoints": 17,
        "root_index": 0,
        "remove_root": True,
        "keypoints_mean": MEAN_2D,
        "keypoints_std": STD_2D,
        "target_mean": MEAN_3D,
        "target_std": STD_3D,
    }
    assert out["model"]["head"]["num_joints"] == 16 and out["model"]["head"]["loss"] == {"type": "MSELoss"}
    dataset = out["train_dataloader"]["dataset"]
    assert "camera_param_file" not in dataset  # need_camera_param=False: 0.x read no cameras
    assert dataset["causal"] is True and dataset["pad_video_seq"] is False
    target, pack = dataset["pipeline"]  # no flip
    assert target["encoder"] == codec
    assert {"target_root", "target_root_index", "target_mean", "target_std"} <= set(pack["meta_keys"])
    assert out["train_dataloader"]["batch_size"] == 64
    # 0.x's steps were iterations (by_epoch=False), to the end of the run: counted per iteration
    # (1.x's official config ends its StepLR at iteration 80: no decay at all)
    assert out["param_scheduler"] == [
        {"type": "StepLR", "step_size": 100000, "gamma": 0.96, "begin": 0, "by_epoch": False}
    ]


def test_without_restore_global_position_the_root_is_not_packed() -> None:
    out, _ = convert(videopose(model__test_cfg={}), "mmpose")
    pack = out["val_dataloader"]["dataset"]["pipeline"][-1]
    assert "target_root" not in pack["meta_keys"]


@pytest.mark.parametrize(
    ("flip_cfg", "before_norm", "converted"),
    [
        # before the image normalisation: 0.x's static centre was in pixels, as 1.x's is
        (
            [{"center_mode": "static", "center_x": 500.0}, {"center_mode": "root", "center_index": 0}],
            True,
            {"keypoints_flip_cfg": {"center_mode": "static", "center_x": 500.0}},
        ),
        # after it, without a centre: 0.29's fliplr_regression's default, 0.5 (of the normalised
        # units: three quarters across each image), not 0
        (
            [{"center_mode": "static"}, {"center_mode": "root", "center_index": 0}],
            False,
            {"keypoints_flip_cfg": {}, "normalized_center_x": 0.5},
        ),
    ],
)
def test_flips_1x_can_express_are_converted_to_the_same_flip(flip_cfg, before_norm, converted) -> None:
    cfg = videopose()
    flip = {**FLIP, "flip_cfg": flip_cfg}
    train = [CENTRE, flip, IMAGE_NORM, TENSOR, COLLECT] if before_norm else [CENTRE, IMAGE_NORM, flip, TENSOR, COLLECT]
    cfg["data"]["train"]["pipeline"] = train
    cfg["train_pipeline"] = copy.deepcopy(train)
    out, _ = convert(cfg, "mmpose")
    step = out["train_dataloader"]["dataset"]["pipeline"][0]
    assert step == {
        "type": "RandomFlipAroundRoot0x",
        "flip_prob": 0.5,
        "target_flip_cfg": {"center_mode": "root", "center_index": 0},
        **converted,
    }


def test_a_weighted_loss_weighs_every_joint_as_0x_did_and_each_metric_is_evaluated_once() -> None:
    out, report = convert(
        videopose(
            model__keypoint_head__loss_keypoint={"type": "MPJPELoss", "use_target_weight": True},
            evaluation__metric=["mpjpe", "p-mpjpe", "mpjpe"],
        ),
        "mmpose",
    )
    # 0.x's pipelines collected no weights (all 1); 1.x's would weigh by the target's visibility
    assert out["model"]["head"]["loss"] == {"type": "MPJPELoss", "use_target_weight": False}
    assert any("use_target_weight" in line for line in report.lines())
    assert out["val_evaluator"] == [{"type": "MPJPE0x", "mode": "mpjpe"}, {"type": "MPJPE0x", "mode": "p-mpjpe"}]


def _pipeline(cfg, split, pipeline):
    cfg["data"][split]["pipeline"] = pipeline
    return cfg


NOT_YET = [
    # semi-supervised training: 1.x's PoseLifter cannot train it
    ("model.traj_backbone", lambda: videopose(model__traj_backbone={"type": "TCN", "in_channels": 34})),
    # the other lifting data sets
    ("data.train.type", lambda: videopose(data__train__type="Body3DMpiInf3dhpDataset")),
    ("data.train.data_cfg.subjects", lambda: videopose(data__train__data_cfg__subjects=["S1"])),
    ("data.train.data_cfg.need_2d_label", lambda: videopose(data__train__data_cfg__need_2d_label=True)),
    ("data.train.data_cfg.extra", lambda: videopose(data__train__data_cfg__extra=1)),
    # a flip of the root-centred target about another joint, or with its root removed
    (
        "data.train.pipeline[2].flip_cfg",
        lambda: videopose(
            data__train__pipeline__2__flip_cfg=[{"center_mode": "static"}, {"center_mode": "root", "center_index": 4}]
        ),
    ),
    (
        "data.train.pipeline[2].flip_cfg",
        lambda: videopose(
            data__train__pipeline__0=dict(CENTRE, remove_root=True),
            data__val__pipeline__0=dict(CENTRE, remove_root=True),
            data__test__pipeline__0=dict(CENTRE, remove_root=True),
        ),
    ),
    # a flip of the root-centred target about static 0.5 (0.29's default: not its root)
    (
        "data.train.pipeline[2].flip_cfg",
        lambda: videopose(data__train__pipeline__2__flip_cfg=[{"center_mode": "static"}, {"center_mode": "static"}]),
    ),
    # a flip of the 2D input about a joint (0.29: each frame's; 1.x averages it over the frames)
    (
        "data.train.pipeline[2].flip_cfg",
        lambda: videopose(
            data__train__pipeline__2__flip_cfg=[
                {"center_mode": "root", "center_index": 0},
                {"center_mode": "root", "center_index": 0},
            ]
        ),
    ),
    (
        "data.train.pipeline[3]",
        lambda: _pipeline(videopose(), "train", [CENTRE, IMAGE_NORM, FLIP, FLIP, TENSOR, COLLECT]),
    ),
    ("data.train.pipeline[2].item", lambda: videopose(data__train__pipeline__2__item="input_2d")),
    ("data.train.pipeline[2].flip_camera", lambda: videopose(data__train__pipeline__2__flip_camera=True)),
    # the 2D input normalised by the image and per joint: 1.x's codecs do one
    (
        "data.train.pipeline[2]",
        lambda: _pipeline(
            videopose(),
            "train",
            [
                CENTRE,
                IMAGE_NORM,
                {"type": "NormalizeJointCoordinate", "item": "input_2d", "mean": MEAN_2D, "std": STD_2D},
                TENSOR,
                COLLECT,
            ],
        ),
    ),
    # a flip after a normalisation per joint
    (
        "data.train.pipeline[3]",
        lambda: _pipeline(
            simplebaseline(),
            "train",
            simplebaseline()["data"]["train"]["pipeline"][:3]
            + [FLIP]
            + simplebaseline()["data"]["train"]["pipeline"][3:],
        ),
    ),
    # the target normalised before its root centring
    (
        "data.train.pipeline[0]",
        lambda: _pipeline(
            simplebaseline(),
            "train",
            [simplebaseline()["data"]["train"]["pipeline"][i] for i in (1, 0, 2, 3, 4)],
        ),
    ),
    (
        "data.train.pipeline[0].type",
        lambda: videopose(data__train__pipeline__0={"type": "CameraProjection", "item": "target"}),
    ),
    (
        "data.train.pipeline[4].keys",
        lambda: videopose(data__train__pipeline__4__keys=[("input_2d", "input"), "target", "target_weight"]),
    ),
    (
        "data.train.pipeline[4].meta_keys",
        lambda: videopose(data__train__pipeline__4__meta_keys=["target_image_path", "camera_param"]),
    ),
    ("data.train.pipeline[0].root_name", lambda: videopose(data__train__pipeline__0=dict(CENTRE, root_name="pelvis"))),
    # pipelines that encode otherwise than each other: the head decodes with one codec
    ("data.val.pipeline", lambda: _pipeline(videopose(), "val", [CENTRE, TENSOR, COLLECT])),
    ("model.keypoint_head", lambda: videopose(model__keypoint_head__max_norm=1.0)),
    # 1.x's TCN drops its init_cfg: the weights would silently not load
    ("model.pretrained", lambda: videopose(model__pretrained="tcn.pth")),
    ("model.keypoint_head.type", lambda: videopose(model__keypoint_head__type="Kpt3dHead")),
    ("model.test_cfg.flip_test", lambda: videopose(model__test_cfg__flip_test=True)),
    ("evaluation.metric", lambda: videopose(evaluation__metric=["mpjpe", "3dpck"])),
]


@pytest.mark.parametrize(("key", "make"), NOT_YET, ids=[f"{i}-{k}" for i, (k, _) in enumerate(NOT_YET)])
def test_what_is_not_converted_yet_stops_with_one_clear_error(key, make) -> None:
    with pytest.raises(ConfigConversionError) as info:
        convert(make(), "mmpose")
    message = str(info.value)
    assert "\n" not in message and "MMDetection" not in message
    assert f"`{key}`" in message, message
    assert re.search(r"so far; .+ is not converted yet", message) or "MMPose 0.x" in message, message


@pytest.mark.parametrize(
    ("make", "key"),
    [
        # 1.x's codecs delete a removed root along the frame axis: an IndexError for any root but 0
        (
            lambda: _changed(
                simplebaseline(),
                {
                    f"data__{s}__pipeline__0": dict(CENTRE, remove_root=True, root_index=14)
                    for s in ("train", "val", "test")
                },
            ),
            "data.train.pipeline: GetRootCenteredPose.root_index",
        ),
        # statistics 0.x would read from a pickle file
        (
            lambda: videopose(
                data__train__pipeline__1={
                    "type": "NormalizeJointCoordinate",
                    "item": "input_2d",
                    "norm_param_file": "stats.pkl",
                }
            ),
            "data.train.pipeline[1].norm_param_file",
        ),
        (lambda: videopose(data__train__data_cfg__camera_param_file=None), "data.train.data_cfg.camera_param_file"),
    ],
)
def test_what_1x_cannot_do_or_mmfix_will_not_read_stops_with_one_clear_error(make, key) -> None:
    with pytest.raises(ConfigConversionError) as info:
        convert(make(), "mmpose")
    message = str(info.value)
    assert "\n" not in message and f"`{key}`" in message, message
