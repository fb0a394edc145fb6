"""MMPose 0.x's 3D pose lifting (SimpleBaseline3D, VideoPose3D) where MMPose 1.x computes otherwise,
registered in MMPose 1.x's registries for converted 0.x configs (mmfix/_configs/_mmpose_lifting.py).

- ``Human36mDataset0x``: 1.x's ``Human36mDataset`` holds every sequence's arrays (T frames of 2D
  and 3D keypoints, image names, camera) for the whole run: about 160 KB a sample at 243 frames,
  hundreds of GB for Human3.6M's training set, where 0.29 held the frame numbers and built a
  sample when it was read. This copy does as 0.29 did, and keeps every sequence (1.x drops one
  whose 2D keypoints are all zero or less; 0.29 trained and evaluated on it).
- ``RandomFlipAroundRoot0x``: 0.29's ``RelativeJointRandomFlip`` ran after the 2D keypoints were
  normalised by the image size (``ImageCoordinateNormalization``), so its centre 0 was the middle
  of each sample's image; 1.x's transform runs before the codec normalises, on pixels, with one
  centre for every sample. This one takes the centre in 0.x's normalised units and flips about
  the pixel column it is in that sample's image (its camera's width).
- ``TCN0x``: 0.29's TCN initialised every convolution Kaiming-normal over its inputs (fan in) and
  its batch norms to 1; 1.x's ignores its ``init_cfg`` and leaves the convolutions to
  ``ConvModule`` (fan out): the input convolution's weights 5.5 times smaller.
- ``MPJPE0x``: 0.29 reported each action's error without the alignment its mode names
  (``P-MPJPE_Walking`` was the plain MPJPE of the walking samples); 1.x aligns them. The overall
  ``MPJPE``/``P-MPJPE``/``N-MPJPE`` are the same in both.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

import numpy as np
from mmengine.fileio import get_local_path
from mmpose.datasets import Human36mDataset
from mmpose.datasets.transforms import RandomFlipAroundRoot
from mmpose.evaluation.functional import keypoint_mpjpe
from mmpose.evaluation.metrics import MPJPE
from mmpose.models.backbones import TCN
from mmpose.registry import DATASETS, METRICS, MODELS, TRANSFORMS
from torch import nn

__all__ = ["Human36mDataset0x", "MPJPE0x", "RandomFlipAroundRoot0x", "TCN0x"]


@DATASETS.register_module()
class Human36mDataset0x(Human36mDataset):
    """1.x's ``Human36mDataset`` (its arguments, sequences and sample keys) holding what 0.29 held:
    the annotation arrays once and each sample's frame numbers, a sample's arrays built when it is
    read; every sequence kept."""

    def _load_annotations(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        ann = self.ann_data
        names = ann["imgname"]
        count = len(names)
        keypoints = self.metainfo["num_keypoints"]
        # the arrays, read once (an npz file reads a key again at each access)
        self._frames_3d = ann["S"].astype(np.float32)
        if self.keypoint_2d_src == "detection":
            with get_local_path(self.keypoint_2d_det_file) as local_path:
                frames_2d = np.load(local_path).astype(np.float32)
            if frames_2d.shape[0] != count or frames_2d.shape[-1] != 3:
                raise ValueError(
                    f"{self.keypoint_2d_det_file}: {frames_2d.shape[0]} frames of 2D keypoints with "
                    f"{frames_2d.shape[-1]} values each, where the annotation file has {count} frames "
                    "and each keypoint needs x, y and a score"
                )
        elif "part" in ann:
            frames_2d = ann["part"].astype(np.float32)
        else:
            frames_2d = np.zeros((count, keypoints, 3), dtype=np.float32)
        self._frames_2d = frames_2d
        self._names = np.asarray(names)
        self._centers = ann["center"].astype(np.float32) if "center" in ann else np.zeros((count, 2), np.float32)
        self._scales = ann["scale"].astype(np.float32) if "scale" in ann else np.zeros(count, np.float32)
        if self.factor_file:
            with get_local_path(self.factor_file) as local_path:
                self._factors = np.load(local_path).astype(np.float32)
        else:
            self._factors = np.zeros(count, dtype=np.float32)
        instances = [
            {
                "num_keypoints": keypoints,
                "id": index,
                "category_id": 1,
                "iscrowd": 0,
                "img_ids": np.asarray(frame_ids, dtype=np.int64),
            }
            for index, frame_ids in enumerate(self.sequence_indices)
        ]
        return instances, []

    @staticmethod
    def _is_valid_instance(data_info: dict[str, Any]) -> bool:
        return True  # 0.29 kept every sequence

    def get_data_info(self, idx: int) -> dict[str, Any]:
        info = super().get_data_info(idx)
        frame_ids = info["img_ids"]
        target = [-1] if self.causal else [int(self.seq_len) // 2]
        frames_2d, frames_3d = self._frames_2d[frame_ids], self._frames_3d[frame_ids]
        names = self._names[frame_ids]
        middle = frame_ids[target[0]]
        info.update(
            keypoints=frames_2d[..., :2],
            keypoints_visible=frames_2d[..., 2],
            keypoints_3d=frames_3d[..., :3],
            keypoints_3d_visible=frames_3d[..., 3],
            lifting_target=frames_3d[target, :, :3],
            lifting_target_visible=frames_3d[target, :, 3],
            target_img_path=names[target],
            img_paths=list(names),
            img_ids=list(frame_ids),
            # the target frame's (1.x's reads the sample's number as a frame's; nothing lifts from them)
            scale=self._scales[middle],
            center=self._centers[middle].reshape(1, -1),
            factor=self._factors[frame_ids],
        )
        if self.camera_param_file:
            info["camera_param"] = self.get_camera_param(names[0])
        return info


@TRANSFORMS.register_module()
class RandomFlipAroundRoot0x(RandomFlipAroundRoot):
    """1.x's ``RandomFlipAroundRoot`` (one draw, ``rand() <= flip_prob``, the flip pairs swapped,
    the target about its root) with the keypoints' static centre ``normalized_center_x`` given in
    0.x's ``ImageCoordinateNormalization`` units: the pixel column ``w/2 + c·w/2`` of each sample's
    camera (0.29 flipped the normalised coordinates about ``c``)."""

    def __init__(self, *args: Any, normalized_center_x: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.normalized_center_x = normalized_center_x

    def transform(self, results: dict[str, Any]) -> dict[str, Any]:
        flip = self
        if self.normalized_center_x is not None:
            half = float(results["camera_param"]["w"]) / 2
            flip = copy.copy(self)
            flip.keypoints_flip_cfg = {"center_mode": "static", "center_x": half + self.normalized_center_x * half}
        if "camera_param" not in results:  # 1.x's copies it unread unless it flips the camera
            results = dict(results, camera_param={})
            out = RandomFlipAroundRoot.transform(flip, results)
            out.pop("camera_param")
            return out
        return RandomFlipAroundRoot.transform(flip, results)


@MODELS.register_module()
class TCN0x(TCN):
    """1.x's ``TCN`` (the same layers and keys) initialised as 0.29's: every convolution
    Kaiming-normal over its fan in with zero bias, every batch norm weight 1 and bias 0, in module
    order (the same random draws as 0.29's ``init_weights`` from the same seed)."""

    def init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.modules.conv._ConvNd):
                nn.init.kaiming_normal_(module.weight, a=0, mode="fan_in", nonlinearity="relu")
                if module.bias is not None:
                    nn.init.constant_(module.bias, 0)
            elif isinstance(module, nn.modules.batchnorm._BatchNorm):
                nn.init.constant_(module.weight, 1)
                nn.init.constant_(module.bias, 0)
        self._is_init = True


@METRICS.register_module()
class MPJPE0x(MPJPE):
    """1.x's ``MPJPE`` with 0.29's per-action errors: each action's without alignment, whatever
    the mode (``{MODE}_{action}``); the overall error aligned as the mode says."""

    def compute_metrics(self, results: list) -> dict[str, float]:
        pred = np.concatenate([r["pred_coords"] for r in results])
        gt = np.concatenate([r["gt_coords"] for r in results])
        mask = np.concatenate([r["mask"] for r in results])
        actions = np.concatenate([r["actions"] for r in results])
        name = self.mode.upper()
        metrics = {name: keypoint_mpjpe(pred, gt, mask, self.ALIGNMENT[self.mode])}
        by_action: dict[str, list[int]] = defaultdict(list)
        for index, action in enumerate(actions):
            by_action[action.split("_")[0]].append(index)
        for action, indices in by_action.items():
            metrics[f"{name}_{action}"] = keypoint_mpjpe(pred[indices], gt[indices], mask[indices], "none")
        return metrics
