"""MMPose 0.x rules (first part: top-down heatmap and regression models): model, codec, pipelines, datasets, evaluators.

MMPose 1.x rebuilt the top-down path around one *codec* that both the pipeline (``GenerateTarget``)
and the head (its ``decoder``) use, where 0.x spread it over ``data_cfg`` (``image_size``,
``heatmap_size``), ``TopDownGenerateTarget`` (``sigma``, ``encoding``, ``unbiased_encoding``) and the
model's ``test_cfg`` (``post_process``, ``modulate_kernel``). ``TopDown`` is ``TopdownPoseEstimator``,
``keypoint_head`` is ``head`` (``TopdownHeatmapSimpleHead`` → ``HeatmapHead``, whose own load hook
renames a 0.x head's state dict), ``NormalizeTensor`` after ``ToTensor`` is the
``PoseDataPreprocessor`` (×255, RGB: 0.x loaded images as RGB), ``TopDown*Dataset`` are the 1.x
datasets with ``data_mode='topdown'``, and ``evaluation.metric='mAP'`` is a ``CocoMetric`` with
``data_cfg``'s keypoint-score and OKS-NMS thresholds. 0.x's random box augmentations draw from
other distributions than 1.x's ``RandomBBoxTransform`` / ``RandomHalfBody``: a converted config
names mmfix's copies of the 0.x ones (mmfix/_legacy_models/mmpose.py). DeepPose's regression head
(``DeepposeRegressionHead``, with RLE's sigmas where ``out_sigma``) is 1.x's ``RegressionHead`` /
``RLEHead`` on a ``RegressionLabel`` codec (``TopDownGenerateTargetRegression``'s coordinates over
the input size), 0.x's ``regression_flip_shift`` 1.x's ``shift_coords``.

Rows are as data, read from MMPose 0.29.0's and 1.3.2's code and 1.x's migration guide
(docs/en/migration.md). 3D lifting (``PoseLifter``) is _mmpose_lifting.py's. What this part does not
convert yet (bottom-up, integral and other regression heads) stops with a ``ConfigConversionError``
that says so, never converted halfway.
"""

from __future__ import annotations

import copy
import posixpath
from typing import Any

from .._errors import ConfigConversionError
from . import _engine, _mmpose_lifting
from ._mmpose_common import data_section, dataloaders, schedule_evaluation
from ._mmpose_common import not_yet as _not_yet
from ._report import Report

LEGACY_MODULE = "mmfix._legacy_models.mmpose"

#: 0.x top-down dataset -> its 1.x class (``data_mode='topdown'``).
TOPDOWN_DATASETS: dict[str, str] = {
    "TopDownCocoDataset": "CocoDataset",
    "TopDownMpiiDataset": "MpiiDataset",
    "TopDownMpiiTrbDataset": "MpiiTrbDataset",
    "TopDownAicDataset": "AicDataset",
    "TopDownCrowdPoseDataset": "CrowdPoseDataset",
    "TopDownOCHumanDataset": "OCHumanDataset",
    "TopDownPoseTrack18Dataset": "PoseTrack18Dataset",
    "TopDownJhmdbDataset": "JhmdbDataset",
    "TopDownMhpDataset": "MhpDataset",
    "TopDownHalpeDataset": "HalpeDataset",
    "TopDownCocoWholeBodyDataset": "CocoWholeBodyDataset",
    "AnimalAP10KDataset": "AP10KDataset",
    "AnimalATRWDataset": "ATRWDataset",
    "AnimalFlyDataset": "FlyDataset",
    "AnimalHorse10Dataset": "Horse10Dataset",
    "AnimalLocustDataset": "LocustDataset",
    "AnimalMacaqueDataset": "MacaqueDataset",
    "AnimalPoseDataset": "AnimalPoseDataset",
    "AnimalZebraDataset": "ZebraDataset",
    "FaceWFLWDataset": "WFLWDataset",
    "FaceCOFWDataset": "COFWDataset",
    "FaceAFLWDataset": "AFLWDataset",
    "Face300WDataset": "Face300WDataset",
    "FaceCocoWholeBodyDataset": "CocoWholeBodyFaceDataset",
    "OneHand10KDataset": "OneHand10KDataset",
    "FreiHandDataset": "FreiHandDataset",
    "Rhd2DDataset": "Rhd2DDataset",
    "HandCocoWholeBodyDataset": "CocoWholeBodyHandDataset",
    "PanopticDataset": "PanopticHand2DDataset",
    "DeepFashionDataset": "DeepFashionDataset",
}
#: the 0.x data sets that read ``data_cfg.use_gt_bbox`` (the others always took the annotated boxes,
#: whatever their data_cfg said: DeepFashion's configs name a COCO person detection file they never read)
DETECTED_BOX_DATASETS = frozenset(
    {
        "TopDownCocoDataset",
        "TopDownAicDataset",
        "TopDownCocoWholeBodyDataset",
        "TopDownCrowdPoseDataset",
        "TopDownHalpeDataset",
        "TopDownJhmdbDataset",
        "TopDownMhpDataset",
        "TopDownOCHumanDataset",
        "TopDownPoseTrack18Dataset",
        "AnimalAP10KDataset",
        "AnimalATRWDataset",
        "AnimalMacaqueDataset",
        "AnimalPoseDataset",
    }
)
#: test data sets whose 0.x metric normalises by the annotation, which the 1.x class drops: mmfix's
#: copy keeps it (mmfix/_legacy_models/mmpose.py)
RAW_ANNOTATION_DATASETS = ("TopDownJhmdbDataset", "FaceAFLWDataset")  # (MPII-TRB's copy: OTHER_BOXES_1X)
#: 0.x data sets whose 1.x class reads the annotations' boxes otherwise: mmfix's copy reads them as
#: 0.x did, on every split (its input size passed on), and keeps what the 0.x metric reads
OTHER_BOXES_1X = {
    # 0.29 read an annotation's scale as a box of image_size / scale pixels (and skipped annotations
    # without keypoints); 1.x's MpiiTrbDataset as 200 x scale
    "TopDownMpiiTrbDataset": "MpiiTrbDataset0x",
}
#: 0.x data sets that set ``use_different_joint_weights`` back to False whatever data_cfg said
JOINT_WEIGHTS_OFF_0X = frozenset(
    {
        *(f"Animal{name}Dataset" for name in ("AP10K", "ATRW", "Fly", "Horse10", "Locust", "Macaque", "Zebra")),
        "AnimalPoseDataset",
        *(f"Face{name}Dataset" for name in ("300W", "AFLW", "COFW", "CocoWholeBody", "WFLW")),
        "DeepFashionDataset",
        *("FreiHandDataset", "HandCocoWholeBodyDataset", "OneHand10KDataset", "PanopticDataset", "Rhd2DDataset"),
        *("InterHand2DDataset", "InterHand3DDataset"),
        "TopDownHalpeDataset",
    }
)
#: dataset arguments a 1.x class takes as 0.x's did (same name, same meaning)
KEPT_DATASET_ARGS: dict[str, tuple[str, ...]] = {"DeepFashionDataset": ("subset",)}
#: 0.x heatmap heads -> 1.x's (whose own load hook renames a 0.x head's weights), with 0.x's default
#: deconvolution widths (1.x's defaults differ for the simple head: written out)
HEATMAP_HEADS: dict[str, tuple[str, tuple[int, ...]]] = {
    "TopdownHeatmapSimpleHead": ("HeatmapHead", (256, 256, 256)),
    "ViPNASHeatmapSimpleHead": ("ViPNASHead", (144, 144, 144)),
    # CPM's and Hourglass's: one deconvolution and final layer per stage, the last stage predicts
    # (1.x's CPMHead: the same module names, multi_deconv_layers / multi_final_layers)
    "TopdownHeatmapMultiStageHead": ("CPMHead", (256, 256, 256)),
}
#: 0.x heatmap losses -> 1.x's, where 1.x computes the same (same arguments, outputs, targets and
#: weights: tests/integration/test_family_0x_mmpose.py)
LOSSES = {
    "JointsMSELoss": "KeypointMSELoss",
    "AdaptiveWingLoss": "AdaptiveWingLoss",
    "JointsOHKMMSELoss": "KeypointOHKMMSELoss",  # MSPN's and RSN's online hard keypoint mining
    "CombinedTargetMSELoss": "CombinedTargetMSELoss",  # UDP's combined targets: disc and offsets
}
#: MSPN's and RSN's multi-stage multi-unit head -> 1.x's (the same module names: predict_layers);
#: its arguments, kept as they were (0.x's defaults are 1.x's)
MSMU_HEADS = {"TopdownHeatmapMSMUHead": "MSPNHead"}
MSMU_HEAD_ARGS = ("out_shape", "unit_channels", "out_channels", "num_stages", "num_units", "use_prm", "norm_cfg")
VOXELPOSE = (
    "multi-view 3D pose estimation (VoxelPose's model and data sets; 1.x keeps only its V2VNet backbone "
    "and the data sets' metadata)"
)
#: What MMPose 0.29 had and MMPose 1.x has not, by 0.x type: no data set, model or head to convert
#: to (1.3.2's packages and configs have none of these). Refused first, saying so.
NO_1X = {
    "NVGestureDataset": "gesture recognition (NVGesture, MTUT's I3D models)",
    "GestureRecognizer": "gesture recognition (NVGesture, MTUT's I3D models)",
    "Body3DMviewDirectPanopticDataset": VOXELPOSE,
    "Body3DMviewDirectShelfDataset": VOXELPOSE,
    "Body3DMviewDirectCampusDataset": VOXELPOSE,
    "DetectAndRegress": VOXELPOSE,
    "MeshAdversarialDataset": "human mesh recovery (HMR, its SMPL data sets)",
    "ParametricMesh": "human mesh recovery (HMR, its SMPL data sets)",
    "AEHigherResolutionHead": "HigherHRNet (its higher-resolution associative-embedding head)",
    "AEMultiStageHead": "multi-stage associative-embedding head (Hourglass-AE)",
    "TCFormer": "TCFormer backbone (nor its MTA neck) in its package",
    "MTA": "TCFormer backbone (nor its MTA neck) in its package",
}
#: 0.x's TopDown test_cfg default for the blur of Megvii's and DARK's decodings
MODULATE_KERNEL_0X = 11
#: UDP's targets 0.x encoded (TopDownGenerateTarget.target_type) -> 1.x's UDPHeatmap.heatmap_type;
#: the combined targets' disc radius over the heatmap's height, 0.x's default (encoding and decoding)
UDP_TARGETS = {"GaussianHeatmap": "gaussian", "CombinedTarget": "combined"}
RADIUS_FACTOR_0X = 0.0546875
#: 0.x's target types by their lower-case names (0.x compared them so)
TARGET_TYPES_0X = {"gaussianheatmap": "GaussianHeatmap", "combinedtarget": "CombinedTarget"}
#: the 1.x heads that take combined targets as 0.x's simple head did (no accuracy on them)
COMBINED_HEADS = ("HeatmapHead", "ViPNASHead")
#: 0.x regression heads, by ``out_sigma`` (RLE's sigmas beside the coordinates) -> 1.x's head, whose
#: own load hook renames a 0.x head's weights (``loss`` -> ``loss_module``: RLE's flow model)
REGRESSION_HEADS: dict[tuple[str, bool], str] = {
    ("DeepposeRegressionHead", False): "RegressionHead",
    ("DeepposeRegressionHead", True): "RLEHead",
}
#: 0.x regression losses -> 1.x's and the arguments 1.x renamed; each computes what 0.x's did (same
#: weights, outputs and targets: tests/integration/test_family_0x_mmpose.py). RLE's reads the sigmas.
REGRESSION_LOSSES: dict[str, tuple[str, dict[str, str]]] = {
    "SmoothL1Loss": ("SmoothL1Loss", {}),
    "WingLoss": ("WingLoss", {}),
    "SoftWingLoss": ("SoftWingLoss", {}),
    "RLELoss": ("RLELoss", {"q_dis": "q_distribution"}),
}
#: RLE's ``q_dis`` values 0.x took and 1.x does not: 0.x's ``'strict'`` computed the Gaussian's term
RLE_Q_0X = {"strict": "gaussian"}
#: the test options 0.x's heatmap heads and decoding read (its regression heads none of them)
HEATMAP_TEST_OPTIONS = (
    "post_process",
    "shift_heatmap",
    "modulate_kernel",
    "target_type",
    "use_udp",
    "valid_radius_factor",
)
#: 0.x's TopDown.forward_test flipped unless its test_cfg said otherwise
FLIP_TEST_0X = True
#: 0.x transforms whose 1.x namesakes (or replacements) draw otherwise: mmfix's copies, "<name>0x"
LEGACY_TRANSFORMS = (
    "TopDownRandomShiftBboxCenter",
    "TopDownGetRandomScaleRotation",
    "TopDownHalfBodyTransform",
    "PhotometricDistortion",
)
#: 0.x formatting steps: the data preprocessor and PackPoseInputs do them in 1.x.
PACKING = ("ToTensor", "Collect")
WRAPPERS = ("RepeatDataset", "ConcatDataset")
TOOLBOX = "MMPose"


class _State:
    """What the pipelines and ``data_cfg`` told that the model section needs."""

    def __init__(self) -> None:
        self.normalize: dict[str, Any] | None = None
        self.rgb = True  # 0.x's LoadImageFromFile: channel_order='rgb'
        self.target: dict[str, Any] | None = None  # TopDownGenerateTarget's arguments
        self.regression_target = False  # a pipeline had TopDownGenerateTargetRegression
        self.image_size: tuple[int, int] | None = None
        self.heatmap_size: tuple[int, int] | None = None
        self.data_cfg: dict[str, Any] = {}
        self.kinds: dict[str, str] = {}  # "data.val" -> its (innermost) 0.x dataset type
        # the pipeline's encoder where it is not the head's decoder (Megvii's: a list, one per level,
        # and ``levels``, the level of each stage and unit of the head)
        self.encoders: dict[str, Any] | list[dict[str, Any]] | None = None
        self.levels: list[int] | None = None
        self.dataset_kind: str | None = None  # the 0.x data set whose pipeline is being converted


# ----------------------------------------------------------------------------- codec
def _size(value: Any, key: str) -> tuple[int, int]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ConfigConversionError(key, value, "MMPose 0.x took [width, height]")
    return int(value[0]), int(value[1])


def _target_type(value: Any) -> Any:
    """0.x compared target types without regard to case ('GaussianHeatMap' was 'GaussianHeatmap')."""
    return TARGET_TYPES_0X.get(value.lower(), value) if isinstance(value, str) else value


def codec(state: _State, test_cfg: dict[str, Any]) -> dict[str, Any]:
    """The 1.x codec that encodes the targets and decodes the heatmaps as 0.x's three places did."""
    if state.image_size is None or state.heatmap_size is None:
        raise ConfigConversionError(
            "data_cfg", None, "MMPose 0.x top-down configs give data_cfg.image_size and data_cfg.heatmap_size"
        )
    if state.regression_target:
        raise ConfigConversionError(
            "model.keypoint_head",
            None,
            "the training pipeline makes regression targets (TopDownGenerateTargetRegression) for a heatmap head; "
            "MMPose 0.x could not train that either: use TopDownGenerateTarget, or a regression head",
        )
    target = dict(state.target or {})
    # 0.x set the encoding (the pipeline's TopDownGenerateTarget) and the decoding (test_cfg's use_udp
    # and target_type) apart; 1.x's codec does both one way
    decode_udp = bool(test_cfg.get("use_udp", False))
    encoding = target.pop("encoding", "UDP" if state.target is None and decode_udp else "MSRA")
    if (encoding == "UDP") != decode_udp:
        raise ConfigConversionError(
            "model.test_cfg.use_udp",
            decode_udp,
            f"MMPose 0.x encoded the targets with {encoding} and decoded {'with' if decode_udp else 'without'} UDP; "
            "MMPose 1.x's codec encodes and decodes one way: make them agree",
        )
    kind = _target_type(test_cfg.get("target_type", "GaussianHeatmap"))
    # 0.x's TopDownGenerateTarget made Gaussian heatmaps unless told otherwise; a config without one
    # (testing only) has the decoding's
    target["target_type"] = _target_type(target.get("target_type", "GaussianHeatmap" if state.target else kind))
    if target["target_type"] != kind:
        raise ConfigConversionError(
            "model.test_cfg.target_type",
            kind,
            f"MMPose 0.x encoded {target['target_type']} targets and decoded {kind}; MMPose 1.x's codec does one: "
            "make them agree",
        )
    if encoding == "UDP":
        return _udp_codec(state, target, test_cfg)
    if encoding == "Megvii" and kind == "GaussianHeatmap":
        return _megvii_codec(state, target, test_cfg)
    if test_cfg.get("post_process") == "megvii":
        raise _not_yet("model.test_cfg.post_process", "megvii", f"Megvii's decoding of {encoding}'s encoding")
    if encoding != "MSRA" or kind != "GaussianHeatmap":
        raise _not_yet("TopDownGenerateTarget.encoding", encoding, f"the {encoding} encoding of {kind}")
    unbiased = bool(target.pop("unbiased_encoding", False))
    post = test_cfg.get("post_process", "default")
    if post not in ("default", "unbiased") or (post == "unbiased") != unbiased:
        # 1.x's MSRAHeatmap encodes and decodes with one `unbiased`; 0.x set them apart
        raise _not_yet("model.test_cfg.post_process", post, "decoding other than the encoding's")
    sigma = target.pop("sigma", 2)
    if not isinstance(sigma, (int, float)):  # several heatmaps per keypoint
        raise _not_yet("TopDownGenerateTarget.sigma", sigma, "an encoding of several sigmas")
    out: dict[str, Any] = {
        "type": "MSRAHeatmap",
        "input_size": state.image_size,
        "heatmap_size": state.heatmap_size,
        "sigma": sigma,
    }
    if unbiased:
        out["unbiased"] = True
        out["blur_kernel_size"] = test_cfg.get("modulate_kernel", MODULATE_KERNEL_0X)
    target.pop("kernel", None)  # the Megvii encoding's; MSRA ignores it
    target.pop("target_type", None)
    for key in target:
        raise _not_yet(f"TopDownGenerateTarget.{key}", target[key], f"its argument {key}")
    return out


def _udp_codec(state: _State, target: dict[str, Any], test_cfg: dict[str, Any]) -> dict[str, Any]:
    """UDP's Gaussian heatmaps or combined targets (a disc and offsets per keypoint): 1.x's
    ``UDPHeatmap``. 0.x decoded Gaussian ones with DARK's UDP refinement (``post_dark_udp``, blurred
    by ``modulate_kernel``) whatever ``post_process`` said, but for Megvii's."""
    kind = target.pop("target_type")
    if kind not in UDP_TARGETS:
        raise _not_yet("TopDownGenerateTarget.target_type", kind, f"UDP's {kind} encoding")
    post = test_cfg.get("post_process", "default")
    if post == "megvii":
        raise _not_yet("model.test_cfg.post_process", post, "Megvii's blur on a UDP encoding")
    out: dict[str, Any] = {"type": "UDPHeatmap", "input_size": state.image_size, "heatmap_size": state.heatmap_size}
    if kind == "CombinedTarget":
        # the disc's radius, set twice in 0.x: the pipeline's for the targets, test_cfg's for decoding
        decode_factor = test_cfg.get("valid_radius_factor", RADIUS_FACTOR_0X)
        # a config without a training pipeline's encoding: the decoding's
        factor = target.pop("valid_radius_factor", RADIUS_FACTOR_0X if state.target is not None else decode_factor)
        if not isinstance(factor, (int, float)):  # several targets per keypoint
            raise _not_yet("TopDownGenerateTarget.valid_radius_factor", factor, "an encoding of several radii")
        if decode_factor != factor:
            raise ConfigConversionError(
                "model.test_cfg.valid_radius_factor",
                decode_factor,
                f"MMPose 0.x encoded the combined targets with valid_radius_factor={factor} and decoded with "
                f"{decode_factor}; MMPose 1.x's codec has one radius_factor: make them agree",
            )
        target.pop("sigma", None)  # the Gaussian's: 0.x's combined targets ignored it
        out.update(heatmap_type=UDP_TARGETS[kind], radius_factor=factor)
    else:
        sigma = target.pop("sigma", 2)
        if not isinstance(sigma, (int, float)):  # several heatmaps per keypoint
            raise _not_yet("TopDownGenerateTarget.sigma", sigma, "an encoding of several sigmas")
        target.pop("valid_radius_factor", None)  # the combined targets': 0.x's Gaussian ignored it
        out["sigma"] = sigma
    target.pop("unbiased_encoding", None)  # MSRA's: 0.x's UDP encoding ignored it
    target.pop("kernel", None)  # Megvii's
    for key in target:
        raise _not_yet(f"TopDownGenerateTarget.{key}", target[key], f"its argument {key}")
    out["blur_kernel_size"] = test_cfg.get("modulate_kernel", MODULATE_KERNEL_0X)
    return out


def _megvii_codec(state: _State, target: dict[str, Any], test_cfg: dict[str, Any]) -> dict[str, Any]:
    """Megvii's heatmaps (MSPN, RSN): 1.x's ``MegviiHeatmap``, one per kernel 0.x listed (a target
    per stage and unit: ``state.encoders``, with ``state.levels`` the level of each), decoded as 0.x's
    ``post_process='megvii'`` did (blurred by ``modulate_kernel``, a quarter pixel towards the
    higher neighbour plus half a pixel, scores / 255 + 0.5: 1.x's decode, the same steps)."""
    post = test_cfg.get("post_process", "default")
    if post != "megvii":
        raise _not_yet("model.test_cfg.post_process", post, "a decoding of Megvii's encoding other than 'megvii'")
    kernels = target.pop("kernel", (11, 11))
    several = isinstance(kernels, list)
    sizes = []
    for kernel in kernels if several else [kernels]:
        if not (isinstance(kernel, (list, tuple)) and len(kernel) == 2 and kernel[0] == kernel[1]):
            raise _not_yet("TopDownGenerateTarget.kernel", kernel, "a kernel other than a square (k, k)")
        sizes.append(int(kernel[0]))
    for key in ("sigma", "unbiased_encoding", "target_type"):
        target.pop(key, None)  # the MSRA and UDP encodings' arguments; Megvii's ignored them
    for key in target:
        raise _not_yet(f"TopDownGenerateTarget.{key}", target[key], f"its argument {key}")
    sizes_once = list(dict.fromkeys(sizes))  # 1.x: one codec per distinct kernel, in order of first use

    def megvii(kernel_size: int) -> dict[str, Any]:
        return {
            "type": "MegviiHeatmap",
            "input_size": state.image_size,
            "heatmap_size": state.heatmap_size,
            "kernel_size": kernel_size,
        }

    state.encoders = [megvii(k) for k in sizes_once] if several else megvii(sizes[0])
    state.levels = [sizes_once.index(k) for k in sizes] if several else None
    return megvii(int(test_cfg.get("modulate_kernel", MODULATE_KERNEL_0X)))


def regression_codec(state: _State) -> dict[str, Any]:
    """1.x's ``RegressionLabel``: 0.x's ``TopDownGenerateTargetRegression`` (the keypoints over the
    input size) and its decoding (times the input size)."""
    if state.image_size is None:
        raise ConfigConversionError("data_cfg", None, "MMPose 0.x top-down configs give data_cfg.image_size")
    if state.target is not None:
        raise ConfigConversionError(
            "model.keypoint_head",
            None,
            "the training pipeline makes heatmap targets (TopDownGenerateTarget) for a regression head; MMPose 0.x "
            "could not train that either: use TopDownGenerateTargetRegression, or a heatmap head",
        )
    return {"type": "RegressionLabel", "input_size": state.image_size}


# ----------------------------------------------------------------------------- pipelines
def _transform(t: dict[str, Any], state: _State, out: dict[str, Any], report: Report, where: str) -> Any:
    t = dict(t)
    kind = t.pop("type")
    if kind == "LoadImageFromFile":
        state.rgb = t.pop("channel_order", "rgb") == "rgb"
        new = {"type": "LoadImage", **t}
    elif kind == "TopDownGetBboxCenterScale":
        new = {"type": "GetBBoxCenterScale", "padding": t.pop("padding", 1.25)}
    elif kind == "TopDownRandomFlip":
        new = {"type": "RandomFlip", "direction": "horizontal", "prob": t.pop("flip_prob", 0.5)}
    elif kind == "TopDownAffine":
        # UDP's unbiased warp (1.x's own, the same matrix), whatever the codec
        new = {"type": "TopdownAffine", "input_size": "CODEC_INPUT_SIZE", "use_udp": bool(t.pop("use_udp", False))}
    elif kind in LEGACY_TRANSFORMS:
        new = {"type": kind, **t}
        if kind == "TopDownHalfBodyTransform":
            new["image_size"] = "CODEC_INPUT_SIZE"
        if kind == "PhotometricDistortion":  # the channel order 0.x's image had (1.x loads BGR)
            new["rgb_0x"] = state.rgb
        _engine.legacy_component(new, out, report, where, kind + "0x", LEGACY_MODULE)
        return new
    elif kind == "NormalizeTensor":
        state.normalize = t
        report.moved(f"{where}: NormalizeTensor", "model.data_preprocessor (mean/std ×255)")
        return None
    elif kind == "TopDownGenerateTarget":
        state.target = t
        new = {"type": "GenerateTarget", "encoder": "ENCODER"}
        # Megvii's targets ignored the flag in 0.x (and 1.x's multi-level ones do too)
        if _joint_weights_0x(state) and t.get("encoding") != "Megvii":
            new["use_dataset_keypoint_weights"] = True  # the data set's joint_weights, as 0.x's target weights
    elif kind == "TopDownGenerateTargetRegression":
        for key in t:  # 0.x's class takes no argument
            raise ConfigConversionError(f"{where}: {kind}.{key}", t[key], f"MMPose 0.x's {kind} takes no arguments")
        state.regression_target = True
        new = {"type": "GenerateTarget", "encoder": "CODEC"}
        if _joint_weights_0x(state):
            new["use_dataset_keypoint_weights"] = True
    elif kind in PACKING:
        if kind == "Collect":
            report.moved(f"{where}: Collect", "PackPoseInputs (1.x's own meta keys)")
            return {"type": "PackPoseInputs"}
        return None
    else:
        raise _not_yet(f"{where}: {kind}", kind, f"the transform {kind}")
    return new


def _joint_weights_0x(state: _State) -> bool:
    """Whether 0.x weighted the targets by the data set's joint_weights: ``data_cfg`` asked, and the
    data set did not turn the flag off (``JOINT_WEIGHTS_OFF_0X``)."""
    return bool(state.data_cfg.get("use_different_joint_weights")) and state.dataset_kind not in JOINT_WEIGHTS_OFF_0X


def _fill(node: Any, codec_cfg: dict[str, Any], state: _State) -> Any:
    """The placeholders the rules left: the codec (the head's decoder), the pipeline's encoder (the
    codec, or Megvii's one per level: then ``multilevel``), the input size, the head's levels."""
    if node == "CODEC":
        return copy.deepcopy(codec_cfg)
    if node == "CODEC_INPUT_SIZE":
        return codec_cfg["input_size"]
    if node == "LEVEL_INDICES":
        return list(state.levels or ())
    if isinstance(node, dict):
        filled = {k: _fill(v, codec_cfg, state) for k, v in node.items()}
        if node.get("encoder") == "ENCODER":
            encoder = state.encoders if state.encoders is not None else codec_cfg
            filled["encoder"] = copy.deepcopy(encoder)
            if isinstance(encoder, list):
                filled["multilevel"] = True
        return filled
    if isinstance(node, list):
        return [_fill(v, codec_cfg, state) for v in node]
    return node


def convert_pipeline(
    pipeline: list[dict[str, Any]], state: _State, out: dict[str, Any], report: Report, where: str
) -> list[dict[str, Any]]:
    steps = [_transform(t, state, out, report, where) for t in pipeline]
    return [s for s in steps if s is not None]


# ----------------------------------------------------------------------------- data
def _dataset(ds: dict[str, Any], state: _State, out: dict[str, Any], report: Report, where: str) -> dict[str, Any]:
    ds = dict(ds)
    kind = ds.pop("type")
    if kind in WRAPPERS:
        inner = "datasets" if kind == "ConcatDataset" else "dataset"
        items = ds[inner]
        ds[inner] = (
            [_dataset(d, state, out, report, where) for d in items]
            if isinstance(items, list)
            else _dataset(items, state, out, report, where)
        )
        return {"type": kind, **ds}
    new_type = TOPDOWN_DATASETS.get(kind)
    if new_type is None:
        raise _not_yet(f"{where}.type", kind, f"the dataset {kind}")
    state.kinds.setdefault(where, kind)
    data_cfg = dict(ds.pop("data_cfg", {}) or {})
    if data_cfg:
        state.data_cfg = data_cfg
        state.image_size = _size(data_cfg.get("image_size"), f"{where}.data_cfg.image_size")
        state.heatmap_size = _size(data_cfg.get("heatmap_size"), f"{where}.data_cfg.heatmap_size")
    new: dict[str, Any] = {"type": new_type, "data_mode": "topdown"}
    if kind in OTHER_BOXES_1X:  # 0.x's box reading, which needs the input size
        new["image_size"] = "CODEC_INPUT_SIZE"
        _engine.legacy_component(new, out, report, where, OTHER_BOXES_1X[kind], LEGACY_MODULE)
    if "ann_file" in ds:
        new["ann_file"] = ds.pop("ann_file")
    if "img_prefix" in ds:
        new["data_prefix"] = {"img": ds.pop("img_prefix")}
    for key in KEPT_DATASET_ARGS.get(kind, ()):
        if key in ds:
            new[key] = ds.pop(key)
    info = ds.pop("dataset_info", None)
    if info is not None:
        new["metainfo"] = info
    test = bool(ds.pop("test_mode", False)) or where != "data.train"
    if test:
        new["test_mode"] = True
        if kind in RAW_ANNOTATION_DATASETS:  # the 0.x metric normalises by the annotation itself
            _engine.legacy_component(new, out, report, where, new_type + "0x", LEGACY_MODULE)
        if kind == "TopDownMpiiDataset" and isinstance(new.get("ann_file"), str):
            # 0.x's evaluate read the head boxes from beside the annotation file; 1.x's data set does
            new["headbox_file"] = posixpath.join(posixpath.dirname(new["ann_file"]), MPII_HEADBOXES)
        if kind in DETECTED_BOX_DATASETS and not data_cfg.get("use_gt_bbox", True):
            new["bbox_file"] = data_cfg.get("bbox_file")
            thr = data_cfg.get("det_bbox_thr", 0.0)
            if thr:
                new["filter_cfg"] = {"bbox_score_thr": thr}
    pipeline = ds.pop("pipeline", None)
    if pipeline is not None:
        state.dataset_kind = kind
        new["pipeline"] = convert_pipeline(pipeline, state, out, report, f"{where}.pipeline")
    for key in ds:
        raise _not_yet(f"{where}.{key}", ds[key], f"the dataset argument {key}")
    report.moved(f"{where}: {kind}", f"{new['type']}(data_mode='topdown')")
    return new


#: 0.x's ``_report_metric`` (the top-down data sets' PCK, PCKh, AUC and EPE): its thresholds.
PCK_THR, PCKH_THR, AUC_NORM, AUC_STEPS = 0.2, 0.7, 30, 20
#: the box 0.x's PCK normalised by, per data set that measured PCK (their ``allowed_metrics``):
#: ``PCKAccuracy0x``'s ``bbox_0x`` (mmfix/_legacy_models/mmpose.py) — the annotation's box as
#: written, or the crop's size; ``None``: 1.x's box is 0.x's.
PCK_BOX_0X: dict[str, str | float | None] = {
    "AnimalHorse10Dataset": "annotation",
    "OneHand10KDataset": "annotation",
    "Rhd2DDataset": "annotation",
    "DeepFashionDataset": "annotation",
    "AnimalFlyDataset": 192,
    "AnimalLocustDataset": 160,
    "AnimalZebraDataset": 160,
    "FreiHandDataset": 224,
    "HandCocoWholeBodyDataset": None,  # the hand's box, unclipped by both
}
#: NME's normalisation per 0.x data set (its ``_get_normalize_factor``): the two keypoints whose
#: distance divides (1.x's ``keypoint_distance``), or AFLW's annotated ``box_size``.
NME_NORM_0X: dict[str, list[int] | str] = {
    "Face300WDataset": [36, 45],
    "FaceCocoWholeBodyDataset": [36, 45],
    "FaceWFLWDataset": [60, 72],
    "FaceCOFWDataset": [8, 9],
    "FaceAFLWDataset": "box_size",
}
#: the data sets whose 0.x ``evaluate`` is ``_report_metric``'s (the rows above)
REPORT_METRIC_DATASETS = frozenset({*PCK_BOX_0X, *NME_NORM_0X, "PanopticDataset"})
#: data sets with an ``evaluate`` of their own: 0.x metric names -> (1.x evaluator, mmfix's copy of
#: it where 0.x computed otherwise or None, 0.x result key -> 1.x's)
OWN_EVALUATE: dict[tuple[str, tuple[str, ...]], tuple[dict[str, Any], str | None, dict[str, str]]] = {
    ("TopDownMpiiDataset", ("PCKh",)): (
        {"type": "MpiiPCKAccuracy", "thr": 0.5, "norm_item": "head"},
        None,
        {"PCKh": "PCK", "PCKh@0.1": "PCK@0.1", **{j: f"{j} PCK" for j in ("Head", "Shoulder", "Elbow", "Wrist")}},
    ),
    # 0.29's own: PCKh at 0.3 of the head box's diagonal, pooled, for the skeleton, the contour and all
    ("TopDownMpiiTrbDataset", ("PCKh",)): ({"type": "MpiiTrbPCKh0x", "thr": 0.3}, "MpiiTrbPCKh0x", {}),
    ("TopDownJhmdbDataset", ("PCK",)): (
        {"type": "JhmdbPCKAccuracy", "thr": PCK_THR, "norm_item": ["bbox"], "bbox_0x": "jhmdb"},
        "JhmdbPCKAccuracy0x",
        {"Mean PCK": "PCK"},
    ),
    ("TopDownJhmdbDataset", ("tPCK",)): (
        {"type": "JhmdbPCKAccuracy", "thr": PCK_THR, "norm_item": ["torso"], "bbox_0x": "jhmdb"},
        "JhmdbPCKAccuracy0x",
        {"Mean tPCK": "tPCK"},
    ),
    ("TopDownJhmdbDataset", ("PCK", "tPCK")): (
        {"type": "JhmdbPCKAccuracy", "thr": PCK_THR, "norm_item": ["bbox", "torso"], "bbox_0x": "jhmdb"},
        "JhmdbPCKAccuracy0x",
        {"Mean PCK": "PCK", "Mean tPCK": "tPCK"},
    ),
}
OWN_EVALUATE_DATASETS = frozenset(kind for kind, _ in OWN_EVALUATE)
#: what MPII's headbox_file is, next to the annotation file (0.29's TopDownMpiiDataset.evaluate)
MPII_HEADBOXES = "mpii_gt_val.mat"


def _keypoint_evaluators(names: list[str], kind: str, out: dict[str, Any], report: Report) -> list[dict[str, Any]]:
    """The 1.x evaluators that compute what 0.x's ``_report_metric`` reported for ``names`` on a
    ``kind`` data set (each a row above), with 0.x's normalisation where 1.x's differs."""
    evaluators: list[dict[str, Any]] = []
    if kind not in REPORT_METRIC_DATASETS:  # MPII-TRB's, H36M's … own evaluate
        raise _not_yet("evaluation.metric", names, f"the metric {names!r} on {kind}")
    for name in names:
        if name == "PCK" and kind in PCK_BOX_0X:
            box = PCK_BOX_0X[kind]
            metric: dict[str, Any] = {"type": "PCKAccuracy", "thr": PCK_THR, "norm_item": "bbox"}
            if box is not None:
                metric["bbox_0x"] = box
                _engine.legacy_component(metric, out, report, "evaluation.metric PCK", "PCKAccuracy0x", LEGACY_MODULE)
        elif name == "PCKh" and kind == "PanopticDataset":  # the annotation's head_size, as 1.x reads it
            metric = {"type": "PCKAccuracy", "thr": PCKH_THR, "norm_item": "head"}
        elif name == "AUC":
            metric = {"type": "AUC", "norm_factor": AUC_NORM, "num_thrs": AUC_STEPS}
        elif name == "EPE":
            metric = {"type": "EPE"}
        elif name == "NME" and kind in NME_NORM_0X:
            norm = NME_NORM_0X[kind]
            if norm == "box_size":
                metric = {"type": "NME", "norm_mode": "use_norm_item", "norm_item": "box_size"}
                _engine.legacy_component(metric, out, report, "evaluation.metric NME", "NME0x", LEGACY_MODULE)
            else:
                metric = {"type": "NME", "norm_mode": "keypoint_distance", "keypoint_indices": list(norm)}
        else:
            raise _not_yet("evaluation.metric", name, f"the metric {name!r} on {kind}")
        evaluators.append(metric)
    return evaluators


def _coco_metric(out: dict[str, Any], state: _State, rle_score: bool) -> dict[str, Any]:
    """0.x's ``mAP``: 1.x's ``CocoMetric`` with ``data_cfg``'s keypoint-score and OKS-NMS thresholds
    (``rle_score``: RLE's rescoring, the box score plus the keypoint scores' mean and maximum)."""
    data_cfg = state.data_cfg
    metric: dict[str, Any] = {
        "type": "CocoMetric",
        "score_mode": "bbox_rle" if rle_score else "bbox_keypoint",
        "keypoint_score_thr": data_cfg.get("vis_thr", 0.2),
        "nms_mode": ("soft_oks_nms" if data_cfg.get("soft_nms", False) else "oks_nms")
        if data_cfg.get("use_nms", True)
        else "none",
        "nms_thr": data_cfg.get("oks_thr", 0.9),
    }
    loader = out.get("val_dataloader") or out.get("test_dataloader")
    if loader is not None:
        metric["ann_file"] = _engine.innermost(loader["dataset"], WRAPPERS).get("ann_file")
    return metric


def _own_evaluator(
    names: list[str], kind: str, out: dict[str, Any], report: Report
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The evaluator of a data set whose 0.x ``evaluate`` was its own (``OWN_EVALUATE``), with 1.x's
    names of its result keys."""
    row = OWN_EVALUATE.get((kind, tuple(names)))
    if row is None:
        raise _not_yet("evaluation.metric", names, f"the metric {names!r} on {kind}")
    evaluator, copied, keys = copy.deepcopy(row[0]), row[1], row[2]
    if copied is not None:
        _engine.legacy_component(evaluator, out, report, f"evaluation.metric {names}", copied, LEGACY_MODULE)
    return [evaluator], keys


def _evaluators(evaluation: dict[str, Any], out: dict[str, Any], state: _State, report: Report) -> None:
    evaluation = dict(evaluation)
    metric = evaluation.pop("metric", "mAP")
    names = [metric] if isinstance(metric, str) else list(metric)
    kind = state.kinds.get("data.val") or state.kinds.get("data.test", "")
    keys: dict[str, str] = {}
    rle_score = bool(evaluation.pop("rle_score", False))
    if rle_score and names != ["mAP"]:
        report.drop("evaluation.rle_score", "MMPose 0.x's COCO-style mAP alone read it")
    if names == ["mAP"]:
        evaluators, prefix, how = [_coco_metric(out, state, rle_score)], "coco/", "data_cfg's thresholds"
    elif kind in OWN_EVALUATE_DATASETS:
        (evaluators, keys), prefix, how = _own_evaluator(names, kind, out, report), "", "0.x's thresholds"
    else:
        evaluators, prefix, how = _keypoint_evaluators(names, kind, out, report), "", "0.x's thresholds"
    out["val_evaluator"] = evaluators if len(evaluators) > 1 else evaluators[0]
    out["test_evaluator"] = copy.deepcopy(out["val_evaluator"])
    types = ", ".join(e["type"] for e in evaluators)
    report.moved(
        f"evaluation.metric {'mAP' if names == ['mAP'] else metric}", f"val_evaluator / test_evaluator: {types} ({how})"
    )
    schedule_evaluation(evaluation, out, report, keys, prefix)


def convert_data(src: dict[str, Any], out: dict[str, Any], report: Report, state: _State) -> None:
    data, batch, workers, overrides = data_section(src)
    datasets: dict[str, dict[str, Any]] = {}
    for name in ("train", "val", "test"):
        if name not in data:
            continue
        raw = data.pop(name)
        if isinstance(raw, list):
            raw = {"type": "ConcatDataset", "datasets": raw}
        datasets[name] = _dataset(raw, state, out, report, f"data.{name}")
    dataloaders(datasets, data, batch, workers, overrides, out, report)


# ----------------------------------------------------------------------------- model
def _merged_inputs(head: dict[str, Any], report: Report) -> tuple[int, dict[str, Any] | None]:
    """The head's input channels, and the neck that merges several feature maps as 0.x's head did
    itself (``input_transform='resize_concat'``: the maps ``in_index`` selects, resized bilinearly
    to the first one's size and concatenated — 1.x's ``FeatureMapProcessor(concat=True)``)."""
    channels = head.pop("in_channels")
    transform = head.pop("input_transform", None)
    index = head.pop("in_index", 0)
    align_corners = bool(head.pop("align_corners", False))
    if transform is None:
        return channels, None
    if transform != "resize_concat" or not isinstance(channels, (list, tuple)):
        raise _not_yet("model.keypoint_head.input_transform", transform, f"the input transform {transform!r}")
    index = [index] if isinstance(index, int) else list(index)
    neck: dict[str, Any] = {"type": "FeatureMapProcessor", "concat": True}
    if index != list(range(len(channels))):
        neck["select_index"] = tuple(index)
    if align_corners:
        neck["align_corners"] = True
    report.moved("model.keypoint_head.input_transform='resize_concat'", "model.neck (FeatureMapProcessor, concat=True)")
    return sum(channels[i] for i in index), neck


def _heatmap_head(
    head: dict[str, Any], out: dict[str, Any], report: Report
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    head = dict(head)
    kind = head.pop("type")
    if kind not in HEATMAP_HEADS:
        raise _not_yet("model.keypoint_head.type", kind, f"the head {kind}")
    new_kind, default_filters = HEATMAP_HEADS[kind]
    channels, neck = _merged_inputs(head, report)
    new: dict[str, Any] = {"type": new_kind, "in_channels": channels}
    new["out_channels"] = head.pop("out_channels")
    if new_kind == "CPMHead":
        new["num_stages"] = head.pop("num_stages", 1)
    layers = head.pop("num_deconv_layers", 3)
    filters = tuple(head.pop("num_deconv_filters", default_filters))[:layers]
    kernels = tuple(head.pop("num_deconv_kernels", (4, 4, 4)))[:layers]
    new["deconv_out_channels"] = filters if layers else None
    new["deconv_kernel_sizes"] = kernels if layers else None
    if kind == "ViPNASHeatmapSimpleHead":  # grouped deconvolutions (0.x's default 16 groups, 1.x's too)
        groups = tuple(head.pop("num_deconv_groups", (16, 16, 16)))[:layers]
        new["deconv_num_groups"] = groups if layers else None
    extra = dict(head.pop("extra", None) or {})
    final = extra.pop("final_conv_kernel", 1)
    if final == 0:
        new["final_layer"] = None
    elif final == 3:
        new["final_layer"] = {"kernel_size": 3, "padding": 1}
    n_conv = extra.pop("num_conv_layers", 0)
    if n_conv and new_kind == "CPMHead":  # 0.x's multi-stage head never read it
        raise _not_yet("model.keypoint_head.extra.num_conv_layers", n_conv, "conv layers in a multi-stage head")
    if n_conv:
        channels = filters[-1] if layers else new["in_channels"]
        new["conv_out_channels"] = (channels,) * n_conv
        new["conv_kernel_sizes"] = tuple(extra.pop("num_conv_kernels", [1] * n_conv))
    for key in extra:
        raise _not_yet(f"model.keypoint_head.extra.{key}", extra[key], f"the head option {key}")
    loss = head.pop("loss_keypoint", None) or {"type": "JointsMSELoss"}
    # a list: one per stage (0.x: nn.Sequential; 1.x: a list too)
    if isinstance(loss, (list, tuple)) and (new_kind != "CPMHead" or len(loss) != new["num_stages"]):
        raise _not_yet("model.keypoint_head.loss_keypoint", loss, "a list of losses other than one per stage")
    new["loss"] = _heatmap_losses(loss, out, report)
    _rest_of_head(head, f"model.keypoint_head ({kind})", new, report)
    return new, neck


def _msmu_head(head: dict[str, Any], out: dict[str, Any], report: Report) -> dict[str, Any]:
    """MSPN's and RSN's head: a heatmap per stage and unit, each with its own loss and target level."""
    head = dict(head)
    kind = head.pop("type")
    new: dict[str, Any] = {"type": MSMU_HEADS[kind]}
    for key, why in (("out_shape", "the heatmaps' (height, width)"), ("loss_keypoint", "one loss or a list")):
        if head.get(key) is None:  # 0.29's head required both (1.x would fill in a default)
            raise ConfigConversionError(
                f"model.keypoint_head.{key}", None, f"MMPose 0.x's {kind} requires it ({why}); set it"
            )
    for key in MSMU_HEAD_ARGS:
        if key in head:
            new[key] = head.pop(key)
    new.setdefault("num_stages", 4)  # 0.x's defaults, written out
    new.setdefault("num_units", 4)
    new["level_indices"] = "LEVEL_INDICES"  # the codec's: which target each stage and unit learns
    loss = head.pop("loss_keypoint")
    # a list: one per stage and unit (0.x: nn.Sequential; 1.x: a list)
    if isinstance(loss, (list, tuple)) and len(loss) != new["num_stages"] * new["num_units"]:
        raise ConfigConversionError(
            "model.keypoint_head.loss_keypoint",
            f"{len(loss)} losses",
            f"MMPose 0.x's {kind} takes one loss, or one per stage and unit "
            f"({new['num_stages']} x {new['num_units']}); its training stopped on this too",
        )
    new["loss"] = _heatmap_losses(loss, out, report)
    _rest_of_head(head, f"model.keypoint_head ({kind})", new, report)
    return new


def _check_levels(head: dict[str, Any], state: _State) -> None:
    """One target per stage and unit for a multi-stage multi-unit head, one target for the others:
    what 0.x's heads asserted when training began."""
    levels = state.levels
    if head.get("level_indices") == "LEVEL_INDICES":
        expected = head["num_stages"] * head["num_units"]
        if levels is None or len(levels) != expected:
            raise ConfigConversionError(
                "TopDownGenerateTarget.kernel",
                (state.target or {}).get("kernel"),
                f"MMPose 0.x's multi-stage multi-unit head learns one target per stage and unit "
                f"({head['num_stages']} x {head['num_units']} = {expected}): give TopDownGenerateTarget "
                "encoding='Megvii' with one kernel for each (0.x's training stopped on this too)",
            )
    elif levels is not None:
        raise ConfigConversionError(
            "TopDownGenerateTarget.kernel",
            (state.target or {}).get("kernel"),
            f"a list of kernels makes one target per kernel, which only a multi-stage multi-unit head "
            f"(TopdownHeatmapMSMUHead) learns; {head['type']}'s 0.x namesake took one: give one kernel",
        )


def _rest_of_head(head: dict[str, Any], what: str, new: dict[str, Any], report: Report) -> None:
    """The head's decoder is the codec; its own train/test settings are the model's (0.x copied
    them in); any other argument left is one the rules do not convert."""
    new["decoder"] = "CODEC"
    head.pop("train_cfg", None)
    head.pop("test_cfg", None)
    for key in head:
        raise _not_yet(f"model.keypoint_head.{key}", head[key], f"the head argument {key}")
    report.moved(what, f"model.head ({new['type']})")


def _heatmap_losses(loss: Any, out: dict[str, Any], report: Report) -> Any:
    """One 0.x heatmap loss, or a list of them (one per stage, or per stage and unit), as 1.x's."""
    if isinstance(loss, (list, tuple)):
        return [_heatmap_loss(item, out, report) for item in loss]
    return _heatmap_loss(loss, out, report)


def _heatmap_loss(loss: dict[str, Any], out: dict[str, Any], report: Report) -> dict[str, Any]:
    loss = dict(loss)
    loss_type = loss.pop("type")
    if loss_type not in LOSSES:
        raise _not_yet("model.keypoint_head.loss_keypoint", loss_type, f"the loss {loss_type}")
    new = {"type": LOSSES[loss_type], **loss}
    if loss_type == "JointsMSELoss" and not loss.get("use_target_weight", False):
        # 0.x's then counted every keypoint; 1.x's weights by the keypoints' visibility regardless
        new["type"] = loss_type
        _engine.legacy_component(
            new, out, report, "model.keypoint_head.loss_keypoint", "KeypointMSELoss0x", LEGACY_MODULE
        )
    return new


def _regression_head(head: dict[str, Any], report: Report) -> dict[str, Any]:
    """DeepPose's fully connected head: 1.x's ``RegressionHead``, or ``RLEHead`` where 0.x's also
    predicted each coordinate's sigma (``out_sigma``: RLE's loss reads them)."""
    head = dict(head)
    kind = head.pop("type")
    sigma = bool(head.pop("out_sigma", False))
    new_kind = REGRESSION_HEADS[(kind, sigma)]
    new: dict[str, Any] = {"type": new_kind, "in_channels": head.pop("in_channels")}
    new["num_joints"] = head.pop("num_joints")
    loss = dict(head.pop("loss_keypoint", None) or {})
    loss_type = loss.pop("type", None)
    if loss_type not in REGRESSION_LOSSES:
        raise _not_yet("model.keypoint_head.loss_keypoint", loss_type, f"the loss {loss_type}")
    if (loss_type == "RLELoss") != sigma:
        raise ConfigConversionError(
            "model.keypoint_head.out_sigma",
            sigma,
            f"MMPose 0.x's {kind} predicts sigmas (out_sigma=True) exactly for RLELoss, which reads them; "
            f"with out_sigma={sigma} and {loss_type} 0.x's training failed too: set one to match the other",
        )
    new_loss, renamed = REGRESSION_LOSSES[loss_type]
    if loss_type == "RLELoss" and loss.get("q_dis") in RLE_Q_0X:
        report.moved(
            f"RLELoss.q_dis={loss['q_dis']!r}", f"q_distribution={RLE_Q_0X[loss['q_dis']]!r} (0.x computed it so)"
        )
        loss["q_dis"] = RLE_Q_0X[loss["q_dis"]]
    new["loss"] = {"type": new_loss, **{renamed.get(key, key): value for key, value in loss.items()}}
    _rest_of_head(head, f"model.keypoint_head ({kind}, out_sigma={sigma})", new, report)
    return new


def convert_model(src: dict[str, Any], out: dict[str, Any], report: Report, state: _State) -> None:
    model = dict(src.pop("model"))
    kind = model.pop("type")
    if kind != "TopDown":
        raise _not_yet("model.type", kind, f"the {kind} model")
    new: dict[str, Any] = {"type": "TopdownPoseEstimator"}
    norm = state.normalize or {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
    new["data_preprocessor"] = {
        "type": "PoseDataPreprocessor",
        "mean": [round(m * 255, 6) for m in norm["mean"]],
        "std": [round(s * 255, 6) for s in norm["std"]],
        "bgr_to_rgb": state.rgb,
    }
    backbone = dict(model.pop("backbone"))
    pretrained = model.pop("pretrained", None)
    if pretrained:
        backbone["init_cfg"] = {"type": "Pretrained", "checkpoint": pretrained}
        report.moved("model.pretrained", "model.backbone.init_cfg")
    new["backbone"] = backbone
    test_cfg = dict(model.pop("test_cfg", None) or {})
    head = model.pop("keypoint_head")
    regression = isinstance(head, dict) and any(kind == head.get("type") for kind, _ in REGRESSION_HEADS)
    if regression:
        new["head"], merging = _regression_head(head, report), None
    elif isinstance(head, dict) and head.get("type") in MSMU_HEADS:
        new["head"], merging = _msmu_head(head, out, report), None
    else:
        new["head"], merging = _heatmap_head(head, out, report)
    if "neck" in model:
        if merging is not None:
            raise _not_yet("model.neck", model["neck"], "a neck before a head that merges feature maps")
        new["neck"] = model.pop("neck")
    elif merging is not None:
        new["neck"] = merging
    if regression:
        codec_cfg = regression_codec(state)
        new["test_cfg"] = {
            "flip_test": test_cfg.pop("flip_test", FLIP_TEST_0X),
            # 0.x moved the flipped x by one pixel only where asked; 1.x's default is to move it
            "shift_coords": bool(test_cfg.pop("regression_flip_shift", False)),
        }
        for key in HEATMAP_TEST_OPTIONS:  # copied into some regression configs; 0.x read them for heatmaps only
            if key in test_cfg:
                report.drop(f"model.test_cfg.{key}", "MMPose 0.x's regression heads did not read it")
                test_cfg.pop(key)
    else:
        codec_cfg = codec(state, test_cfg)
        if codec_cfg["type"] == "UDPHeatmap":  # 0.x's plain blur before UDP's Taylor step
            _engine.legacy_component(
                codec_cfg, out, report, "the codec (data_cfg, model.test_cfg)", "UDPHeatmap0x", LEGACY_MODULE
            )
        elif codec_cfg["type"] == "MSRAHeatmap" and not codec_cfg.get("unbiased"):
            # 0.x's quarter-pixel refinement; DARK's is 1.x's own
            _engine.legacy_component(
                codec_cfg, out, report, "the codec (data_cfg, model.test_cfg)", "MSRAHeatmap0x", LEGACY_MODULE
            )
        combined = codec_cfg.get("heatmap_type") == "combined"
        _check_combined(head, new["head"], combined, state)
        new["test_cfg"] = {
            "flip_test": test_cfg.pop("flip_test", FLIP_TEST_0X),
            # 0.x's flip_back(target_type='CombinedTarget') also negated the x offsets: 1.x's mode
            "flip_mode": "udp_combined" if combined else "heatmap",
            "shift_heatmap": test_cfg.pop("shift_heatmap", False),
        }
        if combined:  # 0.x's head measured its accuracy on Gaussian heatmaps only
            new["train_cfg"] = {"compute_acc": False}
        for key in ("post_process", "modulate_kernel", "target_type", "use_udp", "valid_radius_factor"):
            test_cfg.pop(key, None)  # in the codec
    for key in test_cfg:
        raise _not_yet(f"model.test_cfg.{key}", test_cfg[key], f"the test option {key}")
    model.pop("train_cfg", None)
    for key in model:
        raise _not_yet(f"model.{key}", model[key], f"the model argument {key}")
    out["model"] = new
    out["codec"] = copy.deepcopy(state.encoders) if state.encoders is not None else codec_cfg
    if not regression:
        _check_levels(new["head"], state)
    for key in ("model", "train_dataloader", "val_dataloader", "test_dataloader", "train_pipeline", "val_pipeline"):
        if key in out:
            out[key] = _fill(out[key], codec_cfg, state)


def _check_combined(head_0x: Any, head: dict[str, Any], combined: bool, state: _State) -> None:
    """UDP's combined targets (three maps a keypoint) go with the one head and loss 0.x trained them
    with; what 0.x could not train (or 1.x's other heads cannot: they measure an accuracy on one map
    a keypoint) stops here rather than at the first step. ``head_0x``: the config's, for the errors."""
    head_0x = head_0x if isinstance(head_0x, dict) else {}
    loss_0x = head_0x.get("loss_keypoint")
    loss_type = loss_0x.get("type") if isinstance(loss_0x, dict) else loss_0x
    if not combined:
        if loss_type == "CombinedTargetMSELoss":
            raise ConfigConversionError(
                "model.keypoint_head.loss_keypoint.type",
                loss_type,
                "it reads combined targets (a disc and offsets a keypoint: TopDownGenerateTarget(encoding='UDP', "
                "target_type='CombinedTarget')), and the pipeline makes Gaussian heatmaps; MMPose 0.x could not "
                "train that either",
            )
        return
    if head["type"] not in COMBINED_HEADS:
        raise _not_yet(
            "model.keypoint_head.type", head_0x.get("type"), f"UDP's combined targets for a {head_0x.get('type')}"
        )
    if loss_type != "CombinedTargetMSELoss":
        raise ConfigConversionError(
            "model.keypoint_head.loss_keypoint.type",
            loss_type,
            "the pipeline makes UDP's combined targets (a disc and x, y offsets a keypoint), which MMPose 0.x "
            "trained with CombinedTargetMSELoss only: use it",
        )
    keypoints = state.data_cfg.get("num_output_channels")
    if isinstance(keypoints, int) and head.get("out_channels") != 3 * keypoints:
        raise ConfigConversionError(
            "model.keypoint_head.out_channels",
            head.get("out_channels"),
            f"UDP's combined targets take three maps a keypoint: 3 x {keypoints} = {3 * keypoints}",
        )


# ----------------------------------------------------------------------------- the whole config
def _check_1x_has_it(src: dict[str, Any]) -> None:
    """Stop first, and say so, where MMPose 1.x has nothing the config's model or data could become
    (``NO_1X``): not a conversion to wait for, unlike what ``_not_yet`` names."""
    model = src.get("model") or {}
    head = model.get("keypoint_head") if isinstance(model, dict) else None
    found: list[tuple[str, Any]] = []
    if isinstance(head, dict):
        found.append(("model.keypoint_head.type", head.get("type")))
    if isinstance(model, dict):
        found.append(("model.type", model.get("type")))
        for part in ("backbone", "neck"):
            if isinstance(model.get(part), dict):
                found.append((f"model.{part}.type", model[part].get("type")))

    def datasets(where: str, ds: Any) -> None:
        if isinstance(ds, list):
            for i, d in enumerate(ds):
                datasets(f"{where}[{i}]", d)
        elif isinstance(ds, dict):
            found.append((f"{where}.type", ds.get("type")))
            for inner in ("dataset", "datasets"):
                if inner in ds:
                    datasets(f"{where}.{inner}", ds[inner])

    for split in ("train", "val", "test"):
        datasets(f"data.{split}", (src.get("data") or {}).get(split))
    for key, kind in found:
        if isinstance(kind, str) and kind in NO_1X:
            raise ConfigConversionError(
                key,
                kind,
                f"MMPose 1.x has no {NO_1X[kind]} at all, so this is not a conversion to wait for: run this "
                "config with MMPose 0.x (and mmcv-full 1.x), or choose a model MMPose 1.x has.",
            )


def rules(src: dict[str, Any], out: dict[str, Any], report: Report) -> None:
    """MMPose 0.x's sections of ``src`` (a private plain copy) into ``out`` (1.x keys)."""
    _check_1x_has_it(src)
    if "runner" in src:
        report.drop("runner", "MMPose 0.x always trained with EpochBasedRunner for total_epochs")
        src.pop("runner")
    if "total_epochs" not in src:
        raise ConfigConversionError("total_epochs", None, "MMPose 0.x trained for total_epochs epochs; set it")
    src["runner"] = {"type": "EpochBasedRunner", "max_epochs": src.pop("total_epochs")}
    loop = _engine.convert_runner(src, out, report)
    base_lr = (src.get("optimizer") or {}).get("lr")
    _engine.convert_optimizer(src, out, report)
    _engine.convert_lr_config(src, out, report, loop, base_lr)
    _engine.convert_runtime(src, out, report, loop, "PoseLocalVisualizer", "PoseVisualizationHook")
    evaluation = src.pop("evaluation", None)
    if _mmpose_lifting.is_lifting(src):
        _mmpose_lifting.convert(src, out, report, evaluation)
    else:
        _topdown(src, out, report, evaluation)
    if "train_dataloader" in out and "auto_scale_lr" not in out:  # a config's own (convert_runtime) wins
        # 0.x's `tools/train.py --autoscale-lr` multiplied the lr by GPUs / 8; 1.x's `--auto-scale-lr`
        # by the total batch / base_batch_size (and needs the key): 8 GPUs' worth is 0.x's rule.
        out["auto_scale_lr"] = {"enable": False, "base_batch_size": 8 * out["train_dataloader"]["batch_size"]}
    _engine.convert_custom_hooks(src, out, report, {})


def _topdown(src: dict[str, Any], out: dict[str, Any], report: Report, evaluation: dict[str, Any] | None) -> None:
    """A top-down config's data, model and evaluation."""
    state = _State()
    convert_data(src, out, report, state)
    for name in ("train_pipeline", "val_pipeline", "test_pipeline"):
        if isinstance(src.get(name), list):
            out[name] = convert_pipeline(src.pop(name), _State(), out, Report(), name)
    for name in ("data_cfg", "channel_cfg"):
        src.pop(name, None)  # read from the datasets
    convert_model(src, out, report, state)
    if evaluation is not None and "val_dataloader" in out:
        _evaluators(evaluation, out, state, report)
