"""Shared pieces of the MMDetection config tests: the real tools, a synthetic COCO set, user configs.

MMDetection 3.3.0 (with mmcv's compiled ops) is a test requirement. Locally a missing
install skips these tests; CI sets REQUIRE_MMDET=1, so there they fail instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MMDET2_BASE = REPO / "tests" / "data" / "mmdet2_configs" / "_base_"


def require_mmdet() -> Path:
    """The installed mmdet package folder (its .mim/tools and .mim/configs)."""
    try:
        import mmcv.ops  # noqa: F401  (mmdet's detectors need the compiled ops)
        import mmdet
    except ImportError as exc:
        if os.environ.get("REQUIRE_MMDET") == "1":
            raise RuntimeError(
                f"REQUIRE_MMDET=1 but MMDetection 3.x with mmcv ops is not importable: {exc}. "
                "Install it as .ci/run does (mmcv==2.1.0, mmdet==3.3.0)."
            ) from exc
        pytest.skip(f"MMDetection 3.x with mmcv ops not installed ({exc})")
    return Path(mmdet.__file__).parent


def write_coco(root: Path, n_train: int = 8, n_val: int = 4) -> Path:
    """A tiny COCO set: 64x64 images with one coloured box each (category 'box')."""
    import cv2
    import numpy as np

    for split, n, seed in (("train", n_train, 0), ("val", n_val, 1)):
        (root / split).mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(seed)
        images, anns = [], []
        for i in range(n):
            img = np.full((64, 64, 3), 30, np.uint8)
            x, y = (int(v) for v in rng.integers(4, 30, 2))
            w, h = (int(v) for v in rng.integers(12, 28, 2))
            img[y : y + h, x : x + w] = (200, 60, 60)
            cv2.imwrite(str(root / split / f"{i}.jpg"), img)
            images.append({"id": i + 1, "file_name": f"{i}.jpg", "width": 64, "height": 64})
            anns.append(
                {"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0}
            )
        (root / f"{split}.json").write_text(
            json.dumps({"images": images, "annotations": anns, "categories": [{"id": 1, "name": "box"}]})
        )
    return root


OPEN_IMAGES_CLASS = "/m/0box"
OPEN_IMAGES_HEADER = (  # Open Images V6 box annotations
    "ImageID,Source,LabelName,Confidence,XMin,XMax,YMin,YMax,IsOccluded,IsTruncated,IsGroupOf,IsDepiction,IsInside"
)


def write_open_images(root: Path, n_train: int = 6, n_val: int = 4) -> Path:
    """A tiny Open Images V6 set in the official layout: 64x48 JPEGs (not square, so a swapped height
    and width shows), one box each with normalised coordinates, one class, the class hierarchy, the
    human-verified image labels, and the validation image metas that 2.x's tools already needed."""
    import pickle

    import cv2
    import numpy as np

    ann = root / "annotations"
    ann.mkdir(parents=True, exist_ok=True)
    (ann / "class-descriptions-boxable.csv").write_text(f"{OPEN_IMAGES_CLASS},Box\n")
    (ann / "bbox_labels_600_hierarchy.json").write_text(
        json.dumps({"LabelName": "/m/0bl9f", "Subcategory": [{"LabelName": OPEN_IMAGES_CLASS}]})
    )
    for split, n, seed, csv_name in (
        ("train", n_train, 0, "oidv6-train-annotations-bbox.csv"),
        ("validation", n_val, 1, "validation-annotations-bbox.csv"),
    ):
        folder = root / "OpenImages" / split
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(seed)
        rows, labels, metas = [OPEN_IMAGES_HEADER], ["ImageID,Source,LabelName,Confidence"], []
        for i in range(n):
            image_id = f"{split[0]}{i:05d}"
            img = np.full((48, 64, 3), 30, np.uint8)
            x, y = (int(v) for v in rng.integers(4, 24, 2))
            w, h = (int(v) for v in rng.integers(12, 22, 2))
            img[y : y + h, x : x + w] = (200, 60, 60)
            cv2.imwrite(str(folder / f"{image_id}.jpg"), img)
            rows.append(
                f"{image_id},xclick,{OPEN_IMAGES_CLASS},1,{x / 64},{(x + w) / 64},{y / 48},{(y + h) / 48},0,0,0,0,0"
            )
            labels.append(f"{image_id},verification,{OPEN_IMAGES_CLASS},1")
            metas.append({"filename": str(folder / f"{image_id}.jpg"), "ori_shape": (48, 64, 3)})
        (ann / csv_name).write_text("\n".join(rows) + "\n")
        if split == "validation":
            (ann / "validation-annotations-human-imagelabels-boxable.csv").write_text("\n".join(labels) + "\n")
            with open(ann / "validation-image-metas.pkl", "wb") as fh:
                pickle.dump(metas, fh, protocol=4)
    return root


SMALL_MODEL_2X = """
model = dict(
    backbone=dict(depth=18, init_cfg=None, frozen_stages=-1),
    neck=dict(in_channels=[64, 128, 256, 512], out_channels=32),
    rpn_head=dict(in_channels=32, feat_channels=32, anchor_generator=dict(scales=[2])),
    roi_head=dict(bbox_roi_extractor=dict(out_channels=32),
                  bbox_head=dict(in_channels=32, fc_out_channels=64, num_classes=1)))
"""


PIPELINES_2X = """
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', img_scale=(64, 64), keep_ratio=True),
    dict(type='RandomFlip', flip_ratio=0.5),
    dict(type='Normalize', **img_norm_cfg),
    dict(type='Pad', size_divisor=32),
    dict(type='DefaultFormatBundle'),
    dict(type='Collect', keys=['img', 'gt_bboxes', 'gt_labels']),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiScaleFlipAug', img_scale=(64, 64), flip=False,
         transforms=[dict(type='Resize', keep_ratio=True), dict(type='RandomFlip'),
                     dict(type='Normalize', **img_norm_cfg), dict(type='Pad', size_divisor=32),
                     dict(type='ImageToTensor', keys=['img']), dict(type='Collect', keys=['img'])])
]
"""


def user_config_2x(path: Path, data_root: Path, extra: str = "") -> Path:
    """A user's 2.x config: official 2.28.2 bases, a small model, their data and schedule."""
    path.write_text(f"""
_base_ = [
    '{MMDET2_BASE}/models/faster_rcnn_r50_fpn.py', '{MMDET2_BASE}/datasets/coco_detection.py',
    '{MMDET2_BASE}/schedules/schedule_1x.py', '{MMDET2_BASE}/default_runtime.py'
]
{SMALL_MODEL_2X}
classes = ('box',)
{PIPELINES_2X}data_root = '{data_root}/'
data = dict(
    samples_per_gpu=2, workers_per_gpu=0,
    train=dict(classes=classes, ann_file=data_root + 'train.json', img_prefix=data_root + 'train/',
               pipeline=train_pipeline),
    val=dict(classes=classes, ann_file=data_root + 'val.json', img_prefix=data_root + 'val/',
             pipeline=test_pipeline),
    test=dict(classes=classes, ann_file=data_root + 'val.json', img_prefix=data_root + 'val/',
              pipeline=test_pipeline))
optimizer = dict(lr=0.01)
lr_config = dict(warmup_iters=2, step=[1])
runner = dict(max_epochs=1)
log_config = dict(interval=1)
{extra}
""")
    return path


def user_config_3x(path: Path, mmdet_dir: Path, data_root: Path, extra: str) -> Path:
    """A 3.x config on the official 3.3.0 bases, with ``extra`` (2.x keys) appended."""
    base = mmdet_dir / ".mim" / "configs" / "_base_"
    path.write_text(f"""
_base_ = [
    '{base}/models/faster-rcnn_r50_fpn.py', '{base}/datasets/coco_detection.py',
    '{base}/schedules/schedule_1x.py', '{base}/default_runtime.py'
]
{SMALL_MODEL_2X}
metainfo = dict(classes=('box',))
train_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{data_root}/', ann_file='train.json', data_prefix=dict(img='train/'), metainfo=metainfo,
    pipeline=[dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
              dict(type='Resize', scale=(64, 64), keep_ratio=True), dict(type='PackDetInputs')]))
val_dataloader = None
val_cfg = None
val_evaluator = None
train_cfg = dict(max_epochs=1)
param_scheduler = []
default_hooks = dict(logger=dict(interval=1))
{extra}
""")
    return path


def user_config_open_images_2x(path: Path, data_root: Path) -> Path:
    """A user's 2.x Open Images config: the official 2.28.2 dataset base, a small model, their data."""
    paths = "\n".join(
        f"{name}=dict(ann_file=data_root + 'annotations/{ann}', img_prefix=data_root + 'OpenImages/{folder}/', "
        "label_file=data_root + 'annotations/class-descriptions-boxable.csv', "
        "hierarchy_file=data_root + 'annotations/bbox_labels_600_hierarchy.json', "
        + (
            "meta_file=data_root + 'annotations/validation-image-metas.pkl', "
            "image_level_ann_file=data_root + 'annotations/validation-annotations-human-imagelabels-boxable.csv', "
            if name != "train"
            else ""
        )
        + ("pipeline=train_pipeline)," if name == "train" else "pipeline=test_pipeline),")
        for name, ann, folder in (
            ("train", "oidv6-train-annotations-bbox.csv", "train"),
            ("val", "validation-annotations-bbox.csv", "validation"),
            ("test", "validation-annotations-bbox.csv", "validation"),
        )
    )
    path.write_text(f"""
_base_ = [
    '{MMDET2_BASE}/models/faster_rcnn_r50_fpn.py', '{MMDET2_BASE}/datasets/openimages_detection.py',
    '{MMDET2_BASE}/schedules/schedule_1x.py', '{MMDET2_BASE}/default_runtime.py'
]
{SMALL_MODEL_2X}
{PIPELINES_2X.replace("with_bbox=True)", "with_bbox=True, denorm_bbox=True)")}data_root = '{data_root}/'
data = dict(
    samples_per_gpu=2, workers_per_gpu=0,
{paths}
)
optimizer = dict(lr=0.01)
lr_config = dict(warmup_iters=2, step=[1])
runner = dict(max_epochs=1)
log_config = dict(interval=1)
""")
    return path
