"""MMPose 0.x top-down augmentations, decodings, a loss and metrics for converted 0.x configs,
registered in MMPose 1.x's registries.

MMPose 1.x replaced 0.x's random box augmentations with ``RandomHalfBody`` and ``RandomBBoxTransform``,
which draw from other distributions: a shift uniform in ``[-1, 1]`` became a truncated normal; a
scale factor ``clip(N(1, sf), 1 - sf, 1 + sf)`` became a truncated normal on ``[1 - sf, 1 + sf]``; a
rotation ``clip(N(0, rf), -2 rf, 2 rf)`` became a truncated normal on ``[-rf, rf]``; the half body
chose the upper body when ``randn() < 0.5`` (69 % of the time) and needed three joints of a half,
1.x chooses it half the time and needs two. No arguments of the 1.x transforms give 0.x's draws back,
so a converted 0.x config names these copies, which compute 0.29's arithmetic step for step on 1.x's
keys (``bbox_center`` and ``bbox_scale`` in pixels, ``keypoints``, ``keypoints_visible``,
``bbox_rotation``), one instance at a time as 0.x did.

0.x measured box scales in units of 200 px (``pixel_std``); 1.x in pixels: the arithmetic below is
0.x's with that factor folded in (``scale * pixel_std`` is ``bbox_scale``).

0.x's PCK normalised each error by the longer side of a box that each 0.x data set chose its own
way — the annotation's box as written (1.x clips it to the image first), a fixed size for the data
sets of fixed-size crops (Fly 192, Locust and Zebra 160, FreiHand 224), JHMDB's box clipped by
0.x's own rule (1-based); 0.x's NME on AFLW divided by the annotation's ``box_size`` (1.x's official configs
by the box's longer side). ``PCKAccuracy0x``, ``JhmdbPCKAccuracy0x`` and ``NME0x`` are 1.x's metrics
with 0.x's normalisation, read from the sample's ``raw_ann_info`` (1.x packs the annotation there;
``JhmdbDataset0x`` and ``AFLWDataset0x`` are 1.x's data sets keeping it, which theirs drop).
MPII-TRB's PCKh, which 1.x has no metric for, is ``MpiiTrbPCKh0x`` on ``MpiiTrbDataset0x`` (its
head boxes packed).

``PhotometricDistortion0x`` is 0.29's colour augmentation: 1.x's draws its values in another order
and applies them otherwise (see the class).

The decodings: ``MSRAHeatmap0x`` refines by a quarter pixel where 0.x did, ``UDPHeatmap0x`` blurs
as 0.x's UDP did; the loss: ``KeypointMSELoss0x`` counts every keypoint where 0.x's
``JointsMSELoss(use_target_weight=False)`` did.
"""

from __future__ import annotations

import json
import os
from typing import Any

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform
from mmengine.evaluator import BaseMetric
from mmengine.fileio import get_local_path
from mmpose.codecs import MSRAHeatmap, UDPHeatmap
from mmpose.codecs.utils import get_heatmap_maximum
from mmpose.datasets import AFLWDataset, JhmdbDataset, MpiiTrbDataset
from mmpose.evaluation.metrics import NME, JhmdbPCKAccuracy, PCKAccuracy
from mmpose.models.losses import KeypointMSELoss
from mmpose.registry import DATASETS, KEYPOINT_CODECS, METRICS, MODELS, TRANSFORMS
from mmpose.structures.bbox import bbox_cs2xyxy

__all__ = [
    "AFLWDataset0x",
    "JhmdbDataset0x",
    "JhmdbPCKAccuracy0x",
    "MSRAHeatmap0x",
    "MpiiTrbDataset0x",
    "MpiiTrbPCKh0x",
    "NME0x",
    "PCKAccuracy0x",
    "PhotometricDistortion0x",
    "TopDownGetRandomScaleRotation0x",
    "TopDownHalfBodyTransform0x",
    "TopDownRandomShiftBboxCenter0x",
]


def _instances(results: dict[str, Any]) -> int:
    return int(np.asarray(results["bbox_center"]).shape[0])


@TRANSFORMS.register_module()
class TopDownRandomShiftBboxCenter0x(BaseTransform):
    """0.29's ``TopDownRandomShiftBboxCenter``: with probability ``prob``, the center moves by
    ``uniform(-1, 1, 2) * shift_factor * scale``."""

    def __init__(self, shift_factor: float = 0.16, prob: float = 0.3) -> None:
        self.shift_factor = shift_factor
        self.prob = prob

    def transform(self, results: dict[str, Any]) -> dict[str, Any]:
        center = np.array(results["bbox_center"], dtype=np.float32, copy=True)
        scale = np.asarray(results["bbox_scale"], dtype=np.float32)
        for i in range(_instances(results)):
            if np.random.rand() < self.prob:
                center[i] += np.random.uniform(-1, 1, 2) * self.shift_factor * scale[i]
        results["bbox_center"] = center
        return results

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shift_factor={self.shift_factor}, prob={self.prob})"


@TRANSFORMS.register_module()
class TopDownHalfBodyTransform0x(BaseTransform):
    """0.29's ``TopDownHalfBodyTransform``: with more than ``num_joints_half_body`` visible joints and
    probability ``prob_half_body``, the box becomes the upper body's (when ``randn() < 0.5`` and it
    has three visible joints or more) or the lower body's (three or more), at the input's aspect
    ratio, times 1.5."""

    def __init__(self, num_joints_half_body: int = 8, prob_half_body: float = 0.3, image_size: Any = None) -> None:
        if image_size is None:
            raise ValueError(
                "TopDownHalfBodyTransform0x needs image_size (the model input's [w, h], 0.x's data_cfg.image_size)"
            )
        self.num_joints_half_body = num_joints_half_body
        self.prob_half_body = prob_half_body
        self.image_size = (float(image_size[0]), float(image_size[1]))

    def _half_body(self, keypoints: np.ndarray, visible: np.ndarray, upper_ids: Any) -> Any:
        upper: list[np.ndarray] = []
        lower: list[np.ndarray] = []
        for joint in range(len(keypoints)):
            if visible[joint] > 0:
                (upper if joint in upper_ids else lower).append(keypoints[joint])
        if np.random.randn() < 0.5 and len(upper) > 2:
            selected = upper
        elif len(lower) > 2:
            selected = lower
        else:
            selected = upper
        if len(selected) < 2:
            return None
        joints = np.array(selected, dtype=np.float32)
        center = joints.mean(axis=0)[:2]
        left_top = np.amin(joints, axis=0)
        right_bottom = np.amax(joints, axis=0)
        w = right_bottom[0] - left_top[0]
        h = right_bottom[1] - left_top[1]
        aspect_ratio = self.image_size[0] / self.image_size[1]
        if w > aspect_ratio * h:
            h = w * 1.0 / aspect_ratio
        elif w < aspect_ratio * h:
            w = h * aspect_ratio
        # 0.x: np.array([w / 200, h / 200], float32) * 1.5, in units of 200 px
        scale = np.array([w / 200.0, h / 200.0], dtype=np.float32) * 1.5 * 200.0
        return center, scale

    def transform(self, results: dict[str, Any]) -> dict[str, Any]:
        center = np.array(results["bbox_center"], dtype=np.float32, copy=True)
        scale = np.array(results["bbox_scale"], dtype=np.float32, copy=True)
        visible_all = np.asarray(results["keypoints_visible"])
        for i in range(_instances(results)):
            visible = visible_all[i]
            if np.sum(visible) > self.num_joints_half_body and np.random.rand() < self.prob_half_body:
                half = self._half_body(np.asarray(results["keypoints"][i]), visible, results["upper_body_ids"])
                if half is not None:
                    center[i], scale[i] = half
        results["bbox_center"] = center
        results["bbox_scale"] = scale
        return results

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_joints_half_body={self.num_joints_half_body}, "
            f"prob_half_body={self.prob_half_body}, image_size={self.image_size})"
        )


@TRANSFORMS.register_module()
class TopDownGetRandomScaleRotation0x(BaseTransform):
    """0.29's ``TopDownGetRandomScaleRotation``: scale times ``clip(randn() * sf + 1, 1 - sf, 1 + sf)``;
    rotation ``clip(randn() * rf, -2 rf, 2 rf)`` with probability ``rot_prob``, else 0 (the normal
    draw is made either way, as in 0.x)."""

    def __init__(self, rot_factor: float = 40, scale_factor: float = 0.5, rot_prob: float = 0.6) -> None:
        self.rot_factor = rot_factor
        self.scale_factor = scale_factor
        self.rot_prob = rot_prob

    def transform(self, results: dict[str, Any]) -> dict[str, Any]:
        n = _instances(results)
        scale = np.array(results["bbox_scale"], dtype=np.float32, copy=True)
        rotation = np.zeros(n, dtype=np.float32)
        sf, rf = self.scale_factor, self.rot_factor
        for i in range(n):
            scale[i] = scale[i] * np.clip(np.random.randn() * sf + 1, 1 - sf, 1 + sf)
            r_factor = np.clip(np.random.randn() * rf, -rf * 2, rf * 2)
            rotation[i] = r_factor if np.random.rand() <= self.rot_prob else 0
        results["bbox_scale"] = scale
        results["bbox_rotation"] = rotation
        return results

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(rot_factor={self.rot_factor}, scale_factor={self.scale_factor}, "
            f"rot_prob={self.rot_prob})"
        )


@TRANSFORMS.register_module()
class PhotometricDistortion0x(BaseTransform):
    """0.29's ``PhotometricDistortion``, draw for draw: brightness, then contrast (before or after the
    HSV step), saturation and/or hue (hue modulo 180), each with probability 1/2. Where 1.x's namesake
    computes otherwise: it draws every value up front (another sequence), applies the contrast twice
    when it comes first and never when it comes last, lets the hue wrap as uint8, and swaps the
    channels; 0.29 drew the swap (a coin, and a permutation when it came up) but dropped its result,
    so the channels stay in place here too."""

    def __init__(
        self,
        brightness_delta: int = 32,
        contrast_range: Any = (0.5, 1.5),
        saturation_range: Any = (0.5, 1.5),
        hue_delta: int = 18,
        rgb_0x: bool = True,
    ) -> None:
        self.brightness_delta = brightness_delta
        self.contrast_lower, self.contrast_upper = contrast_range
        self.saturation_lower, self.saturation_upper = saturation_range
        self.hue_delta = hue_delta
        # 0.x's LoadImageFromFile gave RGB (its default channel_order) and 0.29's HSV step took it for
        # BGR; 1.x's LoadImage gives BGR (the data preprocessor swaps): the channels are put in 0.x's
        # order around the distortion, so that the hue turns the way it did
        self.rgb_0x = rgb_0x

    @staticmethod
    def _convert(img: np.ndarray, alpha: float = 1, beta: float = 0) -> np.ndarray:
        return np.clip(img.astype(np.float32) * alpha + beta, 0, 255).astype(np.uint8)

    def _contrast(self, img: np.ndarray) -> np.ndarray:
        if np.random.randint(2):
            return self._convert(img, alpha=np.random.uniform(self.contrast_lower, self.contrast_upper))
        return img

    def transform(self, results: dict[str, Any]) -> dict[str, Any]:
        img = results["img"]
        if self.rgb_0x:
            img = np.ascontiguousarray(img[..., ::-1])
        if np.random.randint(2):
            img = self._convert(img, beta=np.random.uniform(-self.brightness_delta, self.brightness_delta))
        mode = np.random.randint(2)  # 1: contrast first, 0: last
        if mode == 1:
            img = self._contrast(img)
        hsv_mode = np.random.randint(4)
        if hsv_mode:
            img = mmcv.bgr2hsv(img)  # 0.x's call, on the image in 0.x's channel order
            if hsv_mode in (1, 3):
                img[:, :, 1] = self._convert(
                    img[:, :, 1], alpha=np.random.uniform(self.saturation_lower, self.saturation_upper)
                )
            if hsv_mode in (2, 3):
                img[:, :, 0] = (img[:, :, 0].astype(int) + np.random.randint(-self.hue_delta, self.hue_delta)) % 180
            img = mmcv.hsv2bgr(img)
        if mode == 0:
            img = self._contrast(img)
        if np.random.randint(2):  # 0.29's channel swap: drawn, its result dropped
            np.random.permutation(3)
        results["img"] = np.ascontiguousarray(img[..., ::-1]) if self.rgb_0x else img
        return results

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(brightness_delta={self.brightness_delta}, "
            f"contrast_range=({self.contrast_lower}, {self.contrast_upper}), "
            f"saturation_range=({self.saturation_lower}, {self.saturation_upper}), hue_delta={self.hue_delta}, "
            f"rgb_0x={self.rgb_0x})"
        )


@KEYPOINT_CODECS.register_module()
class MSRAHeatmap0x(MSRAHeatmap):
    """1.x's ``MSRAHeatmap`` (the same targets) decoding as 0.29's ``keypoints_from_heatmaps`` with
    ``post_process='default'``: the maximum moves a quarter pixel towards its higher neighbour in x
    and y only where it lies inside the heatmap in both directions (``1 < x < W - 1`` and
    ``1 < y < H - 1``); 1.x's ``refine_keypoints`` moves x and y each on its own test, so a maximum
    on the heatmap's second row or column lands a quarter pixel elsewhere. The unbiased (DARK)
    decoding is 1.x's, which computes 0.x's."""

    def decode(self, encoded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.unbiased:
            return super().decode(encoded)
        heatmaps = encoded.copy()
        _, height, width = heatmaps.shape
        keypoints, scores = get_heatmap_maximum(heatmaps)
        keypoints, scores = keypoints[None], scores[None]  # one instance, as 1.x's
        for k in range(keypoints.shape[1]):
            x, y = (int(v) for v in keypoints[0, k, :2])
            if 1 < x < width - 1 and 1 < y < height - 1:
                diff = np.array(
                    [heatmaps[k, y, x + 1] - heatmaps[k, y, x - 1], heatmaps[k, y + 1, x] - heatmaps[k, y - 1, x]]
                )
                keypoints[0, k] += np.sign(diff) * 0.25
        return keypoints * self.scale_factor, scores


@KEYPOINT_CODECS.register_module()
class UDPHeatmap0x(UDPHeatmap):
    """1.x's ``UDPHeatmap`` decoding as 0.29's ``keypoints_from_heatmaps(use_udp=True)``.

    Gaussian heatmaps (1.x's targets): ``post_dark_udp``, DARK's Taylor step on the log of the
    heatmaps blurred by a plain ``cv2.GaussianBlur`` (1.x's blur pads the borders and rescales each
    map to its maximum, moving keypoints by up to pixels).

    Combined targets (``heatmap_type='combined'``: a disc and x, y offsets per keypoint), encoded and
    decoded as 0.29's ``CombinedTarget``: the offsets only inside each keypoint's disc (1.x writes them
    everywhere; the loss reads them only there), the disc's radius ``radius_factor`` times the
    heatmap's height (1.x: its longer side), and before decoding the discs blurred by a
    ``2 * blur_kernel_size + 1`` kernel and the offsets by ``blur_kernel_size`` (1.x leaves the
    offsets unblurred)."""

    def encode(self, keypoints: np.ndarray, keypoints_visible: np.ndarray | None = None) -> dict[str, Any]:
        if self.heatmap_type != "combined":
            return super().encode(keypoints, keypoints_visible)
        if keypoints.shape[0] != 1:
            raise ValueError(f"{type(self).__name__} encodes one instance at a time, as 1.x's UDPHeatmap")
        if keypoints_visible is None:
            keypoints_visible = np.ones(keypoints.shape[:2], dtype=np.float32)
        width, height = self.heatmap_size
        count = keypoints.shape[1]
        target = np.zeros((count, 3, height * width), dtype=np.float32)
        grid_x, grid_y = (a.flatten() for a in np.meshgrid(np.arange(width), np.arange(height)))
        radius = self.radius_factor * height
        stride = (np.asarray(self.input_size, np.float64) - 1.0) / (np.asarray(self.heatmap_size, np.float64) - 1.0)
        for k in range(count):
            x_offset = (keypoints[0, k, 0] / stride[0] - grid_x) / radius
            y_offset = (keypoints[0, k, 1] / stride[1] - grid_y) / radius
            inside = np.where(x_offset**2 + y_offset**2 <= 1)[0]
            if keypoints_visible[0, k] > 0.5:
                target[k, 0, inside] = 1
                target[k, 1, inside] = x_offset[inside]
                target[k, 2, inside] = y_offset[inside]
        return {
            "heatmaps": target.reshape(count * 3, height, width),
            "keypoint_weights": np.asarray(keypoints_visible, dtype=np.float32).copy(),
        }

    def decode(self, encoded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        heatmaps = encoded.copy()
        width, height = self.heatmap_size
        if self.heatmap_type == "combined":
            keypoints, scores = _combined_0x(heatmaps, self.blur_kernel_size, self.radius_factor)
        else:
            keypoints, scores = get_heatmap_maximum(heatmaps)
            keypoints = _dark_udp_0x(keypoints, heatmaps, self.blur_kernel_size)
        # one instance, as 1.x's
        return keypoints[None] / [width - 1, height - 1] * self.input_size, scores[None]


def _combined_0x(heatmaps: np.ndarray, kernel: int, radius_factor: float) -> tuple[np.ndarray, np.ndarray]:
    """0.29's ``CombinedTarget`` decoding of one instance's 3K x H x W maps (blurred in place): its
    index arithmetic too, so a disc with no positive value (its maximum at (-1, -1), as 1.x's
    ``get_heatmap_maximum`` gives it) reads its offsets where 0.29 read them, W + 1 values before
    its own map (0.29 decoded a batch at once: there, the first keypoint read the previous person's
    last map, here its own person's, as decoding one person at a time does in 0.29)."""
    import cv2

    _, height, width = heatmaps.shape
    for i, heatmap in enumerate(heatmaps):
        size = 2 * kernel + 1 if i % 3 == 0 else kernel
        cv2.GaussianBlur(heatmap, (size, size), 0, heatmap)
    radius = radius_factor * height
    offset_x = heatmaps[1::3].flatten() * radius
    offset_y = heatmaps[2::3].flatten() * radius
    keypoints, scores = get_heatmap_maximum(heatmaps[::3])
    index = (keypoints[:, 0] + keypoints[:, 1] * width).flatten()
    index += width * height * np.arange(0, len(keypoints))
    index = index.astype(int)
    keypoints += np.stack((offset_x[index], offset_y[index]), axis=-1)
    return keypoints, scores


def _dark_udp_0x(coords: np.ndarray, heatmaps: np.ndarray, kernel: int) -> np.ndarray:
    """0.29's ``post_dark_udp`` on one instance's K x H x W heatmaps (blurred and logged in place)."""
    import cv2

    k, height, width = heatmaps.shape
    for heatmap in heatmaps:
        cv2.GaussianBlur(heatmap, (kernel, kernel), 0, heatmap)
    np.clip(heatmaps, 0.001, 50, heatmaps)
    np.log(heatmaps, heatmaps)
    pad = np.pad(heatmaps, ((0, 0), (1, 1), (1, 1)), mode="edge").flatten()
    index = coords[:, 0] + 1 + (coords[:, 1] + 1) * (width + 2)
    index += (width + 2) * (height + 2) * np.arange(0, k)
    index = index.astype(int).reshape(-1, 1)
    i_ = pad[index]
    ix1, iy1, ix1y1 = pad[index + 1], pad[index + width + 2], pad[index + width + 3]
    ix1_y1_, ix1_, iy1_ = pad[index - width - 3], pad[index - 1], pad[index - 2 - width]
    derivative = np.concatenate([0.5 * (ix1 - ix1_), 0.5 * (iy1 - iy1_)], axis=1).reshape(k, 2, 1)
    dxx = ix1 - 2 * i_ + ix1_
    dyy = iy1 - 2 * i_ + iy1_
    dxy = 0.5 * (ix1y1 - ix1 - iy1 + i_ + i_ - ix1_ - iy1_ + ix1_y1_)
    hessian = np.concatenate([dxx, dxy, dxy, dyy], axis=1).reshape(k, 2, 2)
    hessian = np.linalg.inv(hessian + np.finfo(np.float32).eps * np.eye(2))
    coords -= np.einsum("imn,ink->imk", hessian, derivative).squeeze(-1)
    return coords


# ----------------------------------------------------------------------------- losses
@MODELS.register_module()
class KeypointMSELoss0x(KeypointMSELoss):
    """0.x's ``JointsMSELoss`` with ``use_target_weight=False``: the mean squared error over every
    keypoint. 1.x's ``KeypointMSELoss`` weights by whatever keypoint weights its head hands it,
    ``use_target_weight`` or not, so invisible keypoints would stop counting."""

    def forward(self, output: Any, target: Any, target_weights: Any = None, mask: Any = None) -> Any:
        if not self.use_target_weight:
            target_weights = None
        return super().forward(output, target, target_weights, mask)


# ----------------------------------------------------------------------------- metrics
def _box_size_0x(sample: dict[str, Any], rule: str | float) -> float:
    """The longer side of the box 0.x normalised one sample's PCK by (``rule``: see the module)."""
    if not isinstance(rule, str):
        return float(rule)
    x, y, w, h = (float(v) for v in sample["raw_ann_info"]["bbox"][:4])
    if rule == "jhmdb":  # 0.29's TopDownJhmdbDataset: 1-based, x1 = max(0, x), x2 = min(width - 1, x1 + max(0, w))
        height, width = sample["ori_shape"][:2]
        x1, y1 = max(0.0, x - 1), max(0.0, y - 1)
        w, h = min(width - 1.0, x1 + max(0.0, w)) - x1, min(height - 1.0, y1 + max(0.0, h)) - y1
    return max(w, h)


class _KeepsRawAnnotation:
    """A 1.x data set whose samples keep their annotation (``raw_ann_info``, which PackPoseInputs
    puts in the sample's meta information) for the 0.x metrics to normalise by."""

    def parse_data_info(self, raw_data_info: dict[str, Any]) -> dict[str, Any] | None:
        info = super().parse_data_info(raw_data_info)  # type: ignore[misc]
        if info is not None and "raw_ann_info" not in info:
            info["raw_ann_info"] = raw_data_info["raw_ann_info"]
        return info


@DATASETS.register_module()
class JhmdbDataset0x(_KeepsRawAnnotation, JhmdbDataset):
    """1.x's ``JhmdbDataset`` keeping each sample's annotation (0.x's PCK box is its own)."""


@DATASETS.register_module()
class AFLWDataset0x(_KeepsRawAnnotation, AFLWDataset):
    """1.x's ``AFLWDataset`` keeping each sample's annotation (0.x's NME divides by its ``box_size``)."""


class _BoxRule:
    """The sample-by-sample replacement of 1.x's ``bbox_size`` by 0.x's (``results`` holds one entry
    per sample, appended by the 1.x metric's own ``process``); ``bbox_0x`` as in ``_box_size_0x``."""

    default_bbox_0x: str | float = "annotation"
    results: list[dict[str, Any]]

    def __init__(self, *args: Any, bbox_0x: str | float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bbox_0x = self.default_bbox_0x if bbox_0x is None else bbox_0x

    def _renormalise(self, data_samples: Any) -> None:
        samples = list(data_samples)
        for result, sample in zip(self.results[len(self.results) - len(samples) :], samples):
            size = _box_size_0x(sample, self.bbox_0x)
            result["bbox_size"] = np.array([[size, size]])


@METRICS.register_module()
class PCKAccuracy0x(_BoxRule, PCKAccuracy):
    """1.x's ``PCKAccuracy`` with 0.x's box for ``norm_item='bbox'`` (``bbox_0x``: ``'annotation'``,
    ``'jhmdb'`` or a fixed size in pixels)."""

    def process(self, data_batch: Any, data_samples: Any) -> None:
        super().process(data_batch, data_samples)
        if "bbox" in self.norm_item:
            self._renormalise(data_samples)


@METRICS.register_module()
class JhmdbPCKAccuracy0x(_BoxRule, JhmdbPCKAccuracy):
    """1.x's ``JhmdbPCKAccuracy`` as 0.29's ``TopDownJhmdbDataset.evaluate`` computed it: its box
    (``bbox_0x='jhmdb'``), and the predictions made 1-based (``preds[..., :2] += 1``) before they
    were compared with the 0-based ground truth — 0.x's reported JHMDB PCK measured that offset."""

    default_bbox_0x = "jhmdb"

    def process(self, data_batch: Any, data_samples: Any) -> None:
        samples = list(data_samples)
        super().process(data_batch, samples)
        for result in self.results[len(self.results) - len(samples) :]:
            result["pred_coords"] = result["pred_coords"] + 1.0  # (the torso's length is a difference)
        if "bbox" in self.norm_item:
            self._renormalise(samples)


@METRICS.register_module()
class NME0x(NME):
    """1.x's ``NME`` normalised, for ``norm_item='box_size'``, by the annotation's ``box_size`` (0.x's
    AFLW), which 1.x's datasets read but do not pack."""

    norm_mode: str
    norm_item: str | None

    def process(self, data_batch: Any, data_samples: Any) -> None:
        if self.norm_mode != "use_norm_item" or self.norm_item != "box_size":
            super().process(data_batch, data_samples)
            return
        samples = list(data_samples)
        self.norm_item = None  # 1.x's process: everything but the normalisation item
        try:
            super().process(data_batch, samples)
        finally:
            self.norm_item = "box_size"
        for result, sample in zip(self.results[len(self.results) - len(samples) :], samples):
            result["box_size"] = np.array([[float(sample["raw_ann_info"]["box_size"])]])


@DATASETS.register_module()
class MpiiTrbDataset0x(MpiiTrbDataset):
    """0.29's ``TopDownMpiiTrbDataset`` reading of MPII-TRB's annotations, as 1.x's ``MpiiTrbDataset``
    samples: an annotation's ``scale`` is a box of ``image_size / scale`` pixels (0.29: ``image_size /
    scale / 200`` in its units of 200 px; 1.x reads ``200 x scale``); every annotation with a
    keypoint is a sample (1.x also drops crowd ones, ones whose ``num_joints`` is 0 and ones whose
    coordinates are all 0 or less, and needs fields 0.29 never read); an annotation's image is the
    file whose name is its image id (0.29 keyed the images so). Samples keep the annotation's head
    box as written (``raw_ann_info``, which PackPoseInputs puts in the sample's meta information)
    for ``MpiiTrbPCKh0x``. ``image_size``: 0.x's ``data_cfg.image_size`` ([w, h]), which a converted
    config passes on."""

    def __init__(self, *args: Any, image_size: Any = None, **kwargs: Any) -> None:
        if image_size is None:
            raise ValueError(
                "MpiiTrbDataset0x needs image_size (the model input's [w, h], 0.x's data_cfg.image_size): "
                "MMPose 0.29 read an MPII-TRB annotation's scale as a box of image_size / scale pixels"
            )
        self.image_size_0x = np.asarray(image_size, dtype=np.float64)  # read by super().__init__'s loading
        super().__init__(*args, **kwargs)

    @staticmethod
    def _is_valid_instance(data_info: dict) -> bool:
        return True  # 0.29 kept every annotation with a keypoint: chosen while loading

    def _load_annotations(self) -> tuple[list[dict], list[dict]]:
        with get_local_path(self.ann_file) as local_path, open(local_path) as fh:
            self.data = json.load(fh)
        files = {}
        for image in self.data["images"]:
            stem = os.path.splitext(image["file_name"])[0]
            if not stem.isdigit():
                raise ValueError(
                    f"MMPose 0.29's MPII-TRB loader found an annotation's image by its file name's number; "
                    f"{image['file_name']!r} is not a number: rename the images as MPII-TRB names them"
                )
            files[int(stem)] = image["file_name"]
        instances: list[dict] = []
        images: dict[Any, dict] = {}
        for ann in self.data["annotations"]:
            if max(ann["keypoints"]) == 0:
                continue  # 0.29 skipped annotations without a keypoint
            keypoints = np.asarray(ann["keypoints"], dtype=np.float32).reshape(1, -1, 3)
            center = np.asarray([ann["center"]], dtype=np.float32)
            scale = (self.image_size_0x / ann["scale"] / 200.0 * 200.0)[None].astype(np.float32)  # 0.29's, px
            info = {
                "id": ann["id"],
                "img_id": ann["image_id"],
                "img_path": os.path.join(self.data_prefix["img"], files[ann["image_id"]]),
                "bbox_center": center,
                "bbox_scale": scale,
                "bbox": bbox_cs2xyxy(center, scale),
                "bbox_score": np.ones(1, dtype=np.float32),
                "keypoints": keypoints[..., :2],
                "keypoints_visible": np.minimum(1, keypoints[..., 2]),
            }
            if "headbox" in ann:
                info["headbox"] = np.asarray(ann["headbox"], dtype=np.float32)
                info["raw_ann_info"] = {"headbox": list(ann["headbox"])}  # as written: 0.29's threshold
            instances.append(info)
            images.setdefault(info["img_id"], {"img_id": info["img_id"], "img_path": info["img_path"]})
        return sorted(instances, key=lambda info: info["id"]), list(images.values())


@METRICS.register_module()
class MpiiTrbPCKh0x(BaseMetric):
    """0.29's ``TopDownMpiiTrbDataset.evaluate``: a labelled keypoint is a hit when it lies nearer
    than ``thr`` times its head box's diagonal; the hits over all samples divided by the labelled
    keypoints, for the first 14 keypoints (``Skeleton_acc``), the others (``Contour_acc``) and all
    (``PCKh``), each pooled over keypoints rather than averaged per keypoint as 1.x's PCK metrics do."""

    default_prefix: str | None = None  # 0.x's names, which save_best names

    def __init__(self, thr: float = 0.3, skeleton: int = 14, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.thr = thr
        self.skeleton = skeleton

    def process(self, data_batch: Any, data_samples: Any) -> None:
        for sample in data_samples:
            # 0.29's arithmetic: predictions read back from its JSON (float64), ground truth float32,
            # the head box as written; a keypoint counts where its visibility is not 0
            pred = np.asarray(sample["pred_instances"]["keypoints"], dtype=np.float64)[0]
            gt = sample["gt_instances"]
            truth = np.asarray(gt["keypoints"], dtype=np.float32)[0]
            visible = np.asarray(gt["keypoints_visible"])[0] != 0
            headbox = np.asarray(sample["raw_ann_info"]["headbox"], dtype=np.float64)
            threshold = np.linalg.norm(headbox[:2] - headbox[2:]) * self.thr
            hit = visible & (np.linalg.norm(pred[:, :2] - truth[:, :2], axis=1) < threshold)
            self.results.append({"hit": hit.astype(np.float32), "exist": visible.astype(np.float32)})

    def compute_metrics(self, results: list) -> dict[str, float]:
        hit = np.sum([r["hit"] for r in results], axis=0)
        exist = np.sum([r["exist"] for r in results], axis=0)
        k = self.skeleton
        return {
            "Skeleton_acc": float(hit[:k].sum() / exist[:k].sum()),
            "Contour_acc": float(hit[k:].sum() / exist[k:].sum()),
            "PCKh": float(hit.sum() / exist.sum()),
        }
