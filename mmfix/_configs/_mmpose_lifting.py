"""MMPose 0.x rules, second part: 3D pose lifting (``PoseLifter``: SimpleBaseline3D and VideoPose3D
on Human3.6M) — model, codec, pipelines, data sets, evaluators.

MMPose 1.x kept 0.x's lifting model (``PoseLifter``, ``TCN``, ``TemporalRegressionHead``: the same
layers and state dict keys; 1.x's own load hook renames ``keypoint_head``) and moved what 0.x's
pipeline did to the 2D input and the 3D target into one codec that the pipeline's
``GenerateTarget`` and the head's decoder share: ``GetRootCenteredPose`` is the codec's
``root_index``/``remove_root``; ``ImageCoordinateNormalization`` (the 2D keypoints over the image's
width, about its middle) is ``VideoPoseLifting``; ``NormalizeJointCoordinate`` of the input and the
target (a mean and std per joint) is ``ImagePoseLifting``'s ``keypoints_mean``/``target_mean``
(whose decoding undoes it, as 0.x's head did with the ``target_mean`` it collected);
``PoseSequenceToTensor`` is the codec's reshape; 0.x's ``data_cfg`` is the data set's arguments
(``seq_frame_interval`` → ``seq_step``, ``temporal_padding`` → ``pad_video_seq``, ``subset`` →
``subset_frac``, ``joint_2d_src`` → ``keypoint_2d_src``). Where 1.x computes otherwise, a converted
config names mmfix's copy of 0.29's behaviour (mmfix/_legacy_models/mmpose_lifting.py: the data set
that holds frame numbers, not arrays; the flip about each image's middle; 0.29's initialisation;
0.29's per-action errors). Rows as data, read from MMPose 0.29.0's and 1.3.2's code.

What this part does not convert (semi-supervised training, MPI-INF-3DHP, filters by subject or
action, a flip 1.x cannot express) stops with a ``ConfigConversionError`` that says so.
"""

from __future__ import annotations

import copy
from typing import Any

from .._errors import ConfigConversionError
from . import _engine
from ._mmpose_common import data_section, dataloaders, schedule_evaluation
from ._mmpose_common import not_yet as _not_yet
from ._report import Report

LEGACY_MODULE = "mmfix._legacy_models.mmpose_lifting"

LIFTERS = ("PoseLifter",)
#: 0.x data set → 1.x data set (mmfix's copy, LEGACY_MODULE)
DATASETS = {"Body3DH36MDataset": "Human36mDataset0x"}
#: 0.x ``data_cfg`` key → (1.x data set argument, 0.29's default: Kpt3dSviewKpt2dDataset.load_config)
DATA_CFG: dict[str, tuple[str, Any]] = {
    "seq_len": ("seq_len", 1),
    "seq_frame_interval": ("seq_step", 1),
    "causal": ("causal", True),
    "temporal_padding": ("pad_video_seq", False),
    "subset": ("subset_frac", 1),
    "joint_2d_src": ("keypoint_2d_src", "gt"),
    "joint_2d_det_file": ("keypoint_2d_det_file", None),
}
#: ``data_cfg`` keys 0.x read that 1.x's data set has no argument for: only 0.x's default converts
ONLY_DEFAULT_0X: dict[str, Any] = {"subjects": "_all_", "actions": "_all_", "need_2d_label": False}
BACKBONES = {"TCN": "TCN0x"}  # 0.29's initialisation (LEGACY_MODULE)
HEADS = ("TemporalRegressionHead",)
#: 0.29's TemporalRegressionHead.init_weights: its convolution Kaiming-normal over the fan in
HEAD_INIT_0X = {
    "type": "Kaiming",
    "layer": "Conv1d",
    "mode": "fan_in",
    "nonlinearity": "relu",
    "distribution": "normal",
    "bias": 0,
}
#: Collect's meta keys 0.x's head and evaluation read → PackPoseInputs' (``root_position``: see ``_meta_keys``)
META_KEYS_1X = {
    "target_image_path": "target_img_path",
    "flip_pairs": "flip_indices",
    "root_position_index": "target_root_index",
    "target_mean": "target_mean",
    "target_std": "target_std",
}
#: what 1.x's lifting configs pack beside them (1.x's MPJPE reads target_img_path)
META_KEYS_ALWAYS = ("id", "category_id", "target_img_path", "flip_indices")
COLLECTED_0X = [("input_2d", "input"), "target"]
#: 0.29's fliplr_regression's defaults
FLIP_DEFAULTS_0X = {"center_mode": "static", "center_x": 0.5, "center_index": 0}
#: 0.x's Body3DH36MDataset's metrics → 1.x's MPJPE mode (MPJPE0x: 0.29's per-action errors)
METRICS = {"mpjpe": "mpjpe", "p-mpjpe": "p-mpjpe", "n-mpjpe": "n-mpjpe"}
SEMI = ("traj_backbone", "traj_neck", "traj_head", "loss_semi")


def is_lifting(src: dict[str, Any]) -> bool:
    model = src.get("model")
    return isinstance(model, dict) and model.get("type") in LIFTERS


# ----------------------------------------------------------------------------- pipelines and codec
class _Pipeline:
    """What one 0.x pipeline did to the input and the target, in its order."""

    def __init__(self) -> None:
        self.root: tuple[int, bool] | None = None  # GetRootCenteredPose: (root_index, remove_root)
        self.image_norm: bool | None = None  # ImageCoordinateNormalization (its norm_camera)
        self.input_norm: tuple[Any, Any] | None = None  # NormalizeJointCoordinate of input_2d
        self.target_norm: tuple[Any, Any] | None = None  # … of target
        self.flip: dict[str, Any] | None = None  # the 1.x flip
        self.meta: list[str] | None = None  # Collect's meta keys, 0.x's names


def _item(t: dict[str, Any], where: str, allowed: tuple[str, ...], what: str) -> str:
    item = t.pop("item", None)
    if item not in allowed:
        raise _not_yet(f"{where}.item", item, f"{what} of {item!r}")
    return str(item)


def _centre(t: dict[str, Any], seen: _Pipeline, where: str) -> None:
    _item(t, where, ("target",), "GetRootCenteredPose")
    if seen.root is not None or seen.target_norm is not None:
        raise _not_yet(where, "GetRootCenteredPose", "a root centring after the target's normalisation or twice")
    root_name = t.pop("root_name", None)
    if root_name != "root_position":  # the name 0.x's head restored the global position from
        raise _not_yet(f"{where}.root_name", root_name, f"a root position named {root_name!r}")
    t.pop("visible_item", None)  # its root removed with the root: 1.x's codec does so with the weights
    seen.root = (int(t.pop("root_index")), bool(t.pop("remove_root", False)))


def _normalise(t: dict[str, Any], seen: _Pipeline, where: str) -> None:
    item = _item(t, where, ("input_2d", "target"), "NormalizeJointCoordinate")
    if t.get("norm_param_file") is not None:
        raise ConfigConversionError(
            f"{where}.norm_param_file",
            t["norm_param_file"],
            "mmfix does not read a pickle file to convert a config: write the file's mean and std "
            "into the transform (NormalizeJointCoordinate(mean=…, std=…)), as the zoo's configs do.",
        )
    t.pop("norm_param_file", None)
    stats = (t.pop("mean"), t.pop("std"))
    if item == "input_2d":
        if seen.image_norm is not None or seen.input_norm is not None:
            raise _not_yet(where, "NormalizeJointCoordinate", "the 2D input normalised twice (1.x's codecs do one)")
        seen.input_norm = stats
    else:
        if seen.root is None or seen.target_norm is not None:
            raise _not_yet(where, "NormalizeJointCoordinate", "a target normalised before its root centring")
        seen.target_norm = stats


def _image_norm(t: dict[str, Any], seen: _Pipeline, where: str) -> None:
    _item(t, where, ("input_2d",), "ImageCoordinateNormalization")
    if t.pop("camera_param", None) is not None:
        raise _not_yet(f"{where}.camera_param", "...", "one camera for every sample")
    if seen.input_norm is not None or seen.image_norm is not None:
        raise _not_yet(where, "ImageCoordinateNormalization", "the 2D input normalised twice (1.x's codecs do one)")
    seen.image_norm = bool(t.pop("norm_camera", False))


def _flip(t: dict[str, Any], seen: _Pipeline, where: str) -> None:
    """0.29's RelativeJointRandomFlip as 1.x's flip, which runs before the codec, on pixels and the
    raw target (the same draw: ``rand() <= flip_prob``, once for the input and the target)."""
    items = t.pop("item")
    items = [items] if isinstance(items, str) else list(items)
    cfgs = t.pop("flip_cfg")
    cfgs = [cfgs] * len(items) if isinstance(cfgs, dict) else list(cfgs)
    visible = t.pop("visible_item", None)
    visible = [] if visible is None else [visible] if isinstance(visible, str) else list(visible)
    if sorted(items) != ["input_2d", "target"] or sorted(visible) != ["input_2d_visible", "target_visible"]:
        raise _not_yet(
            f"{where}.item", items, "a flip of other than both the 2D input and the target (1.x's flips both)"
        )
    if t.pop("flip_camera", False) or t.pop("camera_param", None) is not None:
        raise _not_yet(f"{where}.flip_camera", True, "a flip of the camera")
    if seen.input_norm is not None or seen.target_norm is not None:
        raise _not_yet(where, "RelativeJointRandomFlip", "a flip after a normalisation per joint")
    if seen.flip is not None:
        raise _not_yet(where, "RelativeJointRandomFlip", "a second flip")
    # 0.29's fliplr_regression: static about x = 0.5 unless told (as 1.x's)
    by_item = {item: {**FLIP_DEFAULTS_0X, **cfg} for item, cfg in zip(items, cfgs)}
    keypoints, target = by_item["input_2d"], by_item["target"]
    if keypoints["center_mode"] != "static":
        # 0.29 flipped each frame about that frame's joint; 1.x's flip averages the joint over the
        # frames and fails to broadcast it back
        raise _not_yet(f"{where}.flip_cfg", cfgs, "a flip of the 2D input about a joint")
    new: dict[str, Any] = {"type": "RandomFlipAroundRoot0x", "flip_prob": t.pop("flip_prob", 0.5)}
    if seen.image_norm is not None:
        # about a column of each sample's image given in 0.x's normalised units: 1.x's flip sees pixels
        new["normalized_center_x"] = float(keypoints["center_x"])
        new["keypoints_flip_cfg"] = {}
    else:  # on pixels in both
        new["keypoints_flip_cfg"] = {"center_mode": "static", "center_x": keypoints["center_x"]}
    if seen.root is None:  # the raw target in both
        new["target_flip_cfg"] = target
    else:
        # 0.x flipped the root-centred target; 1.x flips the raw one, then centres it: the same where
        # 0.x flipped about the root (static 0, or the root joint) and kept it
        root, removed = seen.root
        about_root = (target["center_mode"] == "static" and target["center_x"] == 0) or (
            target["center_mode"] == "root" and target["center_index"] == root
        )
        if removed or not about_root:
            raise _not_yet(
                f"{where}.flip_cfg",
                cfgs,
                "a flip of the root-centred target about another point than its root, or with its root removed",
            )
        new["target_flip_cfg"] = {"center_mode": "root", "center_index": root}
    for key in t:
        raise _not_yet(f"{where}.{key}", t[key], f"the flip argument {key}")
    seen.flip = new


def _collect(t: dict[str, Any], seen: _Pipeline, where: str) -> None:
    keys = [tuple(k) if isinstance(k, list) else k for k in t.pop("keys")]
    if keys != COLLECTED_0X:
        raise _not_yet(f"{where}.keys", keys, "a lifting model fed other than the 2D input and the target")
    t.pop("meta_name", None)
    seen.meta = list(t.pop("meta_keys", []))
    for key in seen.meta:
        if key not in META_KEYS_1X and key != "root_position":
            raise _not_yet(f"{where}.meta_keys", key, f"the meta key {key}")


STEPS = {
    "GetRootCenteredPose": _centre,
    "NormalizeJointCoordinate": _normalise,
    "ImageCoordinateNormalization": _image_norm,
    "RelativeJointRandomFlip": _flip,
    "Collect": _collect,
}


def _read_pipeline(pipeline: list[dict[str, Any]], where: str) -> _Pipeline:
    seen = _Pipeline()
    for index, raw in enumerate(pipeline):
        t = dict(raw)
        kind = t.pop("type")
        at = f"{where}[{index}]"
        if kind == "PoseSequenceToTensor":  # the codec's reshape ([K·2, T], x and y a joint)
            _item(t, at, ("input_2d",), "PoseSequenceToTensor")
        elif kind in STEPS:
            STEPS[kind](t, seen, at)
        else:
            raise _not_yet(f"{at}.type", kind, f"the transform {kind}")
        for key in t:
            raise _not_yet(f"{at}.{key}", t[key], f"the {kind} argument {key}")
    if seen.meta is None:
        raise _not_yet(where, "(no Collect)", "a pipeline without Collect")
    return seen


def _codec(seen: _Pipeline, keypoints: int, where: str) -> dict[str, Any]:
    root, removed = seen.root if seen.root is not None else (0, False)
    if removed and root != 0:
        # 1.x's codecs delete the root from the target's visibility along the frame axis: an
        # IndexError for any other root
        raise ConfigConversionError(
            f"{where}: GetRootCenteredPose.root_index",
            root,
            "MMPose 1.x's lifting codecs cannot remove a root other than joint 0 (their visibility "
            "step fails on it); keep the root (remove_root=False) or run this config with MMPose 0.x.",
        )
    if seen.image_norm is not None:
        if seen.target_norm is not None:
            raise _not_yet(where, "NormalizeJointCoordinate", "a normalised target beside an image-normalised input")
        return {
            "type": "VideoPoseLifting",
            "num_keypoints": keypoints,
            "zero_center": seen.root is not None,
            "root_index": root,
            "remove_root": removed,
            "normalize_camera": seen.image_norm,
        }
    if seen.root is None:
        raise _not_yet(
            where, "(no GetRootCenteredPose)", "a target not centred on its root without image normalisation"
        )
    codec: dict[str, Any] = {
        "type": "ImagePoseLifting",
        "num_keypoints": keypoints,
        "root_index": root,
        "remove_root": removed,
    }
    if seen.input_norm is not None:
        codec["keypoints_mean"], codec["keypoints_std"] = seen.input_norm
    if seen.target_norm is not None:
        if not {"target_mean", "target_std"} <= set(seen.meta or ()):
            # 0.x's head undid the normalisation only with the statistics collected; 1.x's codec always does
            raise _not_yet(where, "Collect.meta_keys", "a normalised target whose statistics are not collected")
        codec["target_mean"], codec["target_std"] = seen.target_norm
    return codec


def _meta_keys(seen: _Pipeline, restore: bool) -> list[str]:
    """PackPoseInputs' meta keys: 1.x's decoding restores the global position exactly where
    ``target_root`` is packed — where 0.x's test_cfg.restore_global_position asked."""
    keys = list(META_KEYS_ALWAYS)
    for key in seen.meta or ():
        new = META_KEYS_1X.get(key)
        if new is not None and new not in keys:
            keys.append(new)
    if restore:
        keys.append("target_root")
    return keys


def _pipeline_1x(seen: _Pipeline, codec: dict[str, Any], restore: bool) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    if seen.flip is not None:
        steps.append(copy.deepcopy(seen.flip))
    steps.append({"type": "GenerateTarget", "encoder": copy.deepcopy(codec)})
    steps.append({"type": "PackPoseInputs", "meta_keys": _meta_keys(seen, restore)})
    return steps


# ----------------------------------------------------------------------------- data sets
def _dataset(ds: dict[str, Any], where: str, out: dict[str, Any], report: Report) -> tuple[dict[str, Any], int]:
    ds = dict(ds)
    kind = ds.pop("type")
    if kind not in DATASETS:
        raise _not_yet(f"{where}.type", kind, f"the dataset {kind}")
    data_cfg = dict(ds.pop("data_cfg", None) or {})
    # 0.x's paths are the working folder's; 1.x joins each to data_root ('' joins nothing)
    new: dict[str, Any] = {"type": "Human36mDataset", "ann_file": ds.pop("ann_file"), "data_root": ""}
    if "img_prefix" in ds:
        new["data_prefix"] = {"img": ds.pop("img_prefix")}
    for key, (new_key, default) in DATA_CFG.items():
        value = data_cfg.pop(key, default)
        if value is not None:
            new[new_key] = value
    for key, default in ONLY_DEFAULT_0X.items():
        value = data_cfg.pop(key, default)
        if value not in (default, [default]):
            raise _not_yet(f"{where}.data_cfg.{key}", value, f"the data set's {key} (1.x's data set has none)")
    camera = data_cfg.pop("camera_param_file", None)
    if data_cfg.pop("need_camera_param", False):
        if not camera:
            raise ConfigConversionError(f"{where}.data_cfg.camera_param_file", camera, "need_camera_param needs it")
        new["camera_param_file"] = camera
    keypoints = int(data_cfg.pop("num_joints", 17))
    for key in data_cfg:
        raise _not_yet(f"{where}.data_cfg.{key}", data_cfg[key], f"the data_cfg key {key}")
    info = ds.pop("dataset_info", None)
    if info is not None:
        new["metainfo"] = info
    if bool(ds.pop("test_mode", False)) or where != "data.train":
        new["test_mode"] = True
    new["pipeline"] = ds.pop("pipeline", [])
    for key in ds:
        raise _not_yet(f"{where}.{key}", ds[key], f"the dataset argument {key}")
    report.moved(f"{where}: {kind}", "Human36mDataset")
    _engine.legacy_component(new, out, report, where, DATASETS[kind], LEGACY_MODULE)
    return new, keypoints


# ----------------------------------------------------------------------------- model
def _model(
    model: dict[str, Any], codec: dict[str, Any], out: dict[str, Any], report: Report
) -> tuple[dict[str, Any], bool]:
    model = dict(model)
    model.pop("type")
    for key in SEMI:
        model.pop(key, None)  # (None: _check_semi)
    new: dict[str, Any] = {"type": "PoseLifter"}
    backbone = dict(model.pop("backbone"))
    pretrained = model.pop("pretrained", None)
    if pretrained:
        # 1.x's TCN drops its init_cfg (and 0.29's initialisation, TCN0x's, would overwrite it)
        raise _not_yet("model.pretrained", pretrained, "a lifting backbone's pretrained weights")
    new["backbone"] = backbone
    if backbone.get("type") in BACKBONES:
        _engine.legacy_component(backbone, out, report, "model.backbone", BACKBONES[backbone["type"]], LEGACY_MODULE)
    if "neck" in model:
        new["neck"] = model.pop("neck")
    head = dict(model.pop("keypoint_head"))
    kind = head.pop("type")
    if kind not in HEADS:
        raise _not_yet("model.keypoint_head.type", kind, f"the head {kind}")
    if head.pop("is_trajectory", False) or head.pop("max_norm", None) is not None:
        raise _not_yet("model.keypoint_head", kind, "a trajectory head or a clipped weight norm")
    loss = dict(head.pop("loss_keypoint"))
    if loss.get("use_target_weight"):
        # 0.x's pipelines collected no target_weight: its head weighed every joint 1; 1.x weighs by
        # the target's visibility
        loss["use_target_weight"] = False
        report.moved("model.keypoint_head.loss_keypoint.use_target_weight", "False (0.x weighed every joint 1)")
    new_head: dict[str, Any] = {
        "type": kind,
        "in_channels": head.pop("in_channels"),
        "num_joints": head.pop("num_joints"),
        "loss": loss,
        "decoder": codec,
        "init_cfg": dict(HEAD_INIT_0X),
    }
    for key in head:
        raise _not_yet(f"model.keypoint_head.{key}", head[key], f"the head argument {key}")
    new["head"] = new_head
    report.moved("model.keypoint_head", "model.head (with the codec as its decoder, 0.29's initialisation)")
    test_cfg = dict(model.pop("test_cfg", None) or {})
    restore = bool(test_cfg.pop("restore_global_position", False))
    for key in test_cfg:
        raise _not_yet(f"model.test_cfg.{key}", test_cfg[key], f"the test option {key}")
    if model.pop("train_cfg", None):
        raise _not_yet("model.train_cfg", "...", "a lifting model's train_cfg")
    for key in model:
        raise _not_yet(f"model.{key}", model[key], f"the model argument {key}")
    return new, restore


# ----------------------------------------------------------------------------- the whole config
def _check_semi(model: dict[str, Any]) -> None:
    for key in SEMI:
        if model.get(key) is not None:
            raise _not_yet(
                f"model.{key}",
                model[key]["type"] if isinstance(model[key], dict) else model[key],
                "semi-supervised lifting (MMPose 1.x's PoseLifter cannot train it: its semi-supervised configs "
                "test only)",
            )


def convert(src: dict[str, Any], out: dict[str, Any], report: Report, evaluation: dict[str, Any] | None) -> None:
    """A 0.x PoseLifter config's data, model and evaluation (the rest is _mmpose.rules')."""
    _check_semi(src["model"])
    data, batch, workers, overrides = data_section(src)
    datasets: dict[str, dict[str, Any]] = {}
    codec: dict[str, Any] | None = None
    seens: dict[str, _Pipeline] = {}
    keypoints = 17
    for name in ("train", "val", "test"):
        if name not in data:
            continue
        where = f"data.{name}"
        dataset, keypoints = _dataset(data.pop(name), where, out, report)
        seen = _read_pipeline(dataset["pipeline"], f"{where}.pipeline")
        this = _codec(seen, keypoints, f"{where}.pipeline")
        if codec is not None and this != codec:
            raise _not_yet(
                f"{where}.pipeline",
                "...",
                "pipelines that encode otherwise than each other (1.x's head decodes with one codec)",
            )
        codec, datasets[name], seens[name] = this, dataset, seen
    if codec is None:
        raise _not_yet("data", "...", "a lifting config without data sets")
    model, restore = _model(src.pop("model"), codec, out, report)
    if isinstance(out.get("visualizer"), dict):  # 1.x's lifting configs draw in 3D
        out["visualizer"]["type"] = "Pose3dLocalVisualizer"
    out["model"] = model
    out["codec"] = codec
    for name, dataset in datasets.items():
        dataset["pipeline"] = _pipeline_1x(seens[name], codec, restore)
        report.moved(f"data.{name}.pipeline", "GenerateTarget with the codec, PackPoseInputs")
    dataloaders(datasets, data, batch, workers, overrides, out, report)
    for name in ("train_pipeline", "val_pipeline", "test_pipeline"):  # the variables the data sets named
        if isinstance(src.get(name), list):
            out[name] = _pipeline_1x(_read_pipeline(src.pop(name), name), codec, restore)
    for name in ("data_cfg", "channel_cfg"):
        src.pop(name, None)  # read from the data sets
    if evaluation is not None and "val_dataloader" in out:
        _evaluators(evaluation, out, report)


def _evaluators(evaluation: dict[str, Any], out: dict[str, Any], report: Report) -> None:
    evaluation = dict(evaluation)
    metric = evaluation.pop("metric", "mpjpe")
    names = [metric] if isinstance(metric, str) else list(dict.fromkeys(metric))  # once each, as 0.x reported
    evaluators = []
    _engine.add_custom_import(out, LEGACY_MODULE)
    for name in names:
        if name not in METRICS:
            raise _not_yet("evaluation.metric", name, f"the metric {name!r} on Human3.6M")
        evaluators.append({"type": "MPJPE0x", "mode": METRICS[name]})
    out["val_evaluator"] = evaluators if len(evaluators) > 1 else evaluators[0]
    out["test_evaluator"] = copy.deepcopy(out["val_evaluator"])
    report.moved(
        f"evaluation.metric {metric}",
        "val_evaluator / test_evaluator: MPJPE0x (1.x's MPJPE with 0.29's per-action errors, unaligned)",
    )
    schedule_evaluation(evaluation, out, report, {}, "")
