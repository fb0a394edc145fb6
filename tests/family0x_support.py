"""The family's real 0.x toolboxes beside the test environment: 0.x models, checkpoints, predictions.

The 0.x toolboxes (MMSegmentation 0.30.0, MMClassification 0.25.0) live in MMDetection 2.28.2's
real environment (tests/mmdet2_support.py builds it once per run, with them). ``predict_0x`` runs
a batch of jobs there (tests/family0x_worker.py): each builds a 0.x config's model with 0.x's code,
seeds its weights, saves them as a 0.x checkpoint and writes 0.x's prediction for each image.
``configs_0x`` finds the official 0.x configs (those of the 0.x packages installed there).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "family0x_worker.py"


def seeded_images(folder: Path, count: int = 2, seed: int = 0) -> list[Path]:
    """Small images of different sizes (not a multiple of any stride), written as PNG."""
    import cv2

    rng = np.random.default_rng(seed)
    paths = []
    for index in range(count):
        img = (rng.random((45 + 8 * index, 61 + 4 * index, 3)) * 255).astype(np.uint8)
        path = folder / f"image{index}.png"
        cv2.imwrite(str(path), img)
        paths.append(path)
    return paths


def predict_0x(python: Path, jobs: list[dict[str, Any]], folder: Path, timeout: float = 900) -> None:
    """Run ``jobs`` (see tests/family0x_worker.py) in the 0.x environment of ``python``."""
    listing = folder / "jobs.json"
    listing.write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MMFIX_", "PYTHONPATH"))}
    proc = subprocess.run(
        [str(python), str(WORKER), str(listing)], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


def predict_current(script: str, jobs: list[dict[str, Any]], folder: Path, overlay: Path, timeout: float = 900) -> None:
    """Run ``script`` (a test's current side: ``python -c script JOBS.json``) on ``jobs`` in a process
    of its own, with the torchvision ``overlay`` (``torchvision_overlay``) on its PYTHONPATH."""
    import sys

    from conftest import clean_env, run

    listing = folder / "current.json"
    listing.write_text(json.dumps(jobs))
    env = clean_env(PYTHONPATH=os.pathsep.join(filter(None, [str(overlay), os.environ.get("PYTHONPATH")])))
    proc = run([sys.executable, "-c", script, str(listing)], env=env, timeout=timeout)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]


#: where a package of another environment is, found without importing it (mmpose's import: 2.5 s of CPU)
_WHERE = "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec({module!r}).origin))"


def configs_0x(python: Path, module: str) -> Path:
    """The official configs of a 0.x toolbox: its installed package's .mim/configs in the 0.x environment."""
    proc = subprocess.run(
        [str(python), "-c", _WHERE.format(module=module)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    configs = Path(proc.stdout.strip().splitlines()[-1]) / ".mim" / "configs"
    assert (configs / "_base_").is_dir(), configs
    return configs


def torchvision_overlay(python: Path, folder: Path) -> Path:
    """A folder for PYTHONPATH that gives the test environment (which has no torchvision: PyPI's
    needs a CUDA torch) the 0.x environment's torchvision 0.28.0, patched as ../shared/wheels says
    to import beside a CPU torch, linked (MMPretrain's models import it; nothing calls its ops)."""
    link = folder / "torchvision"
    if not link.exists():
        proc = subprocess.run(
            [str(python), "-c", _WHERE.format(module="torchvision")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        link.symlink_to(proc.stdout.strip().splitlines()[-1], target_is_directory=True)
    return folder


def write_seg_data(root: Path, count: int = 6, seed: int = 0) -> Path:
    """A tiny MMSegmentation 0.x-layout data set (img/*.png, ann/*.png, labels 0/1: a bright square)."""
    import cv2

    rng = np.random.default_rng(seed)
    for sub in ("img", "ann"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for index in range(count):
        img = (rng.random((40, 56, 3)) * 80).astype(np.uint8)
        label = np.zeros((40, 56), np.uint8)
        y, x = rng.integers(0, 20), rng.integers(0, 30)
        img[y : y + 16, x : x + 20] += 150
        label[y : y + 16, x : x + 20] = 1
        cv2.imwrite(str(root / "img" / f"{index}.png"), img)
        cv2.imwrite(str(root / "ann" / f"{index}.png"), label)
    return root


def write_seg_config_0x(path: Path, data_root: Path, max_iters: int = 4) -> Path:
    """An MMSegmentation 0.x config written as the 0.30 zoo writes them (EncoderDecoder, ResNetV1c +
    FCNHead, 0.x pipelines, MultiScaleFlipAug, IterBasedRunner, poly schedule), tiny enough for CPU."""
    path.write_text(f"""
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    type='EncoderDecoder',
    pretrained=None,
    backbone=dict(
        type='ResNetV1c', depth=18, stem_channels=8, base_channels=8, num_stages=4,
        out_indices=(0, 1, 2, 3), dilations=(1, 1, 2, 4), strides=(1, 2, 1, 1),
        norm_cfg=norm_cfg, norm_eval=False, style='pytorch', contract_dilation=True),
    decode_head=dict(
        type='FCNHead', in_channels=64, in_index=3, channels=16, num_convs=1, concat_input=True,
        dropout_ratio=0.1, num_classes=2, norm_cfg=norm_cfg, align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=dict(
        type='FCNHead', in_channels=32, in_index=2, channels=8, num_convs=1, concat_input=False,
        dropout_ratio=0.1, num_classes=2, norm_cfg=norm_cfg, align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=0.4)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
dataset_type = 'CustomDataset'
data_root = {str(data_root)!r}
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)
crop_size = (32, 32)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='Resize', img_scale=(56, 40), ratio_range=(0.5, 2.0)),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='Normalize', **img_norm_cfg),
    dict(type='Pad', size=crop_size, pad_val=0, seg_pad_val=255),
    dict(type='DefaultFormatBundle'),
    dict(type='Collect', keys=['img', 'gt_semantic_seg']),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='MultiScaleFlipAug',
        img_scale=(56, 40),
        flip=False,
        transforms=[
            dict(type='Resize', keep_ratio=True),
            dict(type='RandomFlip'),
            dict(type='Normalize', **img_norm_cfg),
            dict(type='ImageToTensor', keys=['img']),
            dict(type='Collect', keys=['img']),
        ])
]
_set = dict(type=dataset_type, data_root=data_root, img_dir='img', ann_dir='ann', img_suffix='.png',
            classes=('background', 'square'), palette=[[0, 0, 0], [255, 255, 255]])
data = dict(
    samples_per_gpu=2,
    workers_per_gpu=0,
    train=dict(**_set, pipeline=train_pipeline),
    val=dict(**_set, pipeline=test_pipeline),
    test=dict(**_set, pipeline=test_pipeline))
log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook', by_epoch=False)])
dist_params = dict(backend='nccl')
log_level = 'INFO'
load_from = None
resume_from = None
workflow = [('train', 1)]
cudnn_benchmark = True
optimizer = dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=0.0005)
optimizer_config = dict()
lr_config = dict(policy='poly', power=0.9, min_lr=1e-4, by_epoch=False)
runner = dict(type='IterBasedRunner', max_iters={max_iters})
checkpoint_config = dict(by_epoch=False, interval=2)
evaluation = dict(interval=2, metric='mIoU', pre_eval=True)
""")
    return path


def write_cls_data(root: Path, per_class: int = 4, seed: int = 0) -> Path:
    """A tiny folder-per-class data set (MMClassification 0.x's CustomDataset layout): three classes
    told apart by their mean colour."""
    import cv2

    rng = np.random.default_rng(seed)
    for label, name in enumerate(("red", "green", "blue")):
        (root / name).mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            img = (rng.random((40 + 4 * index, 48, 3)) * 60).astype(np.uint8)
            img[..., 2 - label] += 150  # BGR on disk
            cv2.imwrite(str(root / name / f"{index}.png"), img)
    return root


def write_cls_config_0x(path: Path, data_root: Path, max_epochs: int = 2) -> Path:
    """An MMClassification 0.x config written as the 0.25 zoo writes them (ImageClassifier, ResNet +
    GlobalAveragePooling + LinearClsHead, 0.x pipelines with RandomResizedCrop(size) and
    Resize(size=(h, -1)), EpochBasedRunner, step schedule, top-k accuracy), tiny enough for CPU."""
    path.write_text(f"""
model = dict(
    type='ImageClassifier',
    backbone=dict(type='ResNet', depth=18, stem_channels=8, base_channels=8, num_stages=4,
                  out_indices=(3, ), style='pytorch'),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(type='LinearClsHead', num_classes=3, in_channels=64,
              loss=dict(type='CrossEntropyLoss', loss_weight=1.0), topk=(1, 2)))
dataset_type = 'CustomDataset'
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', size=32),
    dict(type='RandomFlip', flip_prob=0.5, direction='horizontal'),
    dict(type='Normalize', **img_norm_cfg),
    dict(type='ImageToTensor', keys=['img']),
    dict(type='ToTensor', keys=['gt_label']),
    dict(type='Collect', keys=['img', 'gt_label'])
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', size=(36, -1)),
    dict(type='CenterCrop', crop_size=32),
    dict(type='Normalize', **img_norm_cfg),
    dict(type='ImageToTensor', keys=['img']),
    dict(type='Collect', keys=['img'])
]
data = dict(
    samples_per_gpu=2,
    workers_per_gpu=0,
    train=dict(type=dataset_type, data_prefix={str(data_root)!r}, pipeline=train_pipeline),
    val=dict(type=dataset_type, data_prefix={str(data_root)!r}, pipeline=test_pipeline),
    test=dict(type=dataset_type, data_prefix={str(data_root)!r}, pipeline=test_pipeline))
evaluation = dict(interval=1, metric='accuracy', metric_options=dict(topk=(1, 2)))
optimizer = dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=0.0001)
optimizer_config = dict(grad_clip=None)
lr_config = dict(policy='step', step=[1])
runner = dict(type='EpochBasedRunner', max_epochs={max_epochs})
checkpoint_config = dict(interval=1)
log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook')])
dist_params = dict(backend='nccl')
log_level = 'INFO'
load_from = None
resume_from = None
workflow = [('train', 1)]
""")
    return path


def write_pose_data(root: Path, count: int = 6, seed: int = 0) -> Path:
    """A tiny COCO-keypoints data set (MMPose 0.x's TopDownCocoDataset layout: images/, one
    annotation file with a person box and 17 keypoints per image, some not labelled)."""
    import cv2

    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for index in range(count):
        height, width = 72 + 4 * index, 64
        img = (rng.random((height, width, 3)) * 80).astype(np.uint8)
        x, y, w, h = 8.0 + index, 6.0, 40.0, 56.0
        points = np.stack([rng.uniform(x, x + w, 17), rng.uniform(y, y + h, 17)], axis=1)
        visible = np.where(rng.random(17) < 0.85, 2, 0)
        for (px, py), v in zip(points, visible):
            if v:
                cv2.circle(img, (int(px), int(py)), 2, (255, 255, 255), -1)  # something to learn
        cv2.imwrite(str(root / "images" / f"{index}.png"), img)
        images.append({"id": index + 1, "file_name": f"{index}.png", "height": height, "width": width})
        keypoints = np.concatenate([points * (visible[:, None] > 0), visible[:, None]], axis=1)
        annotations.append(
            {
                "id": index + 1,
                "image_id": index + 1,
                "category_id": 1,
                "bbox": [x, y, w, h],
                "area": w * h,
                "iscrowd": 0,
                "num_keypoints": int((visible > 0).sum()),
                "keypoints": [round(float(v), 2) for v in keypoints.reshape(-1)],
            }
        )
    categories = [{"id": 1, "name": "person", "supercategory": "person", "keypoints": [], "skeleton": []}]
    (root / "keypoints.json").write_text(
        json.dumps({"images": images, "annotations": annotations, "categories": categories})
    )
    return root


def write_pose_config_0x(path: Path, data_root: Path, configs: Path, max_epochs: int = 2) -> Path:
    """An MMPose 0.x config written as the 0.29 zoo writes them (res50_coco_256x192.py: TopDown,
    ResNet + TopdownHeatmapSimpleHead, data_cfg/channel_cfg, the 0.x top-down pipelines,
    total_epochs, Adam with a step schedule and warm-up, mAP evaluation on the ground-truth boxes),
    tiny enough for CPU. ``configs``: the 0.29 package's configs/ (its COCO dataset_info)."""
    path.write_text(f"""
_base_ = [{str(configs / '_base_' / 'datasets' / 'coco.py')!r}]
checkpoint_config = dict(interval=1)
log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook')])
log_level = 'INFO'
load_from = None
resume_from = None
dist_params = dict(backend='nccl')
workflow = [('train', 1)]
evaluation = dict(interval=1, metric='mAP', save_best='AP')
optimizer = dict(type='Adam', lr=5e-4)
optimizer_config = dict(grad_clip=None)
lr_config = dict(policy='step', warmup='linear', warmup_iters=2, warmup_ratio=0.001, step=[1])
total_epochs = {max_epochs}
channel_cfg = dict(
    num_output_channels=17,
    dataset_joints=17,
    dataset_channel=[list(range(17))],
    inference_channel=list(range(17)))
model = dict(
    type='TopDown',
    pretrained=None,
    backbone=dict(type='ResNet', depth=18, stem_channels=8, base_channels=8),
    keypoint_head=dict(
        type='TopdownHeatmapSimpleHead',
        in_channels=64,
        out_channels=channel_cfg['num_output_channels'],
        num_deconv_layers=2,
        num_deconv_filters=(16, 16),
        num_deconv_kernels=(4, 4),
        loss_keypoint=dict(type='JointsMSELoss', use_target_weight=True)),
    train_cfg=dict(),
    test_cfg=dict(flip_test=True, post_process='default', shift_heatmap=True, modulate_kernel=11))
data_cfg = dict(
    image_size=[64, 64],
    heatmap_size=[8, 8],
    num_output_channels=channel_cfg['num_output_channels'],
    num_joints=channel_cfg['dataset_joints'],
    dataset_channel=channel_cfg['dataset_channel'],
    inference_channel=channel_cfg['inference_channel'],
    soft_nms=False,
    nms_thr=1.0,
    oks_thr=0.9,
    vis_thr=0.2,
    use_gt_bbox=True,
    det_bbox_thr=0.0,
    bbox_file='')
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='TopDownGetBboxCenterScale', padding=1.25),
    dict(type='TopDownRandomShiftBboxCenter', shift_factor=0.16, prob=0.3),
    dict(type='TopDownRandomFlip', flip_prob=0.5),
    dict(type='TopDownHalfBodyTransform', num_joints_half_body=8, prob_half_body=0.3),
    dict(type='TopDownGetRandomScaleRotation', rot_factor=40, scale_factor=0.5),
    dict(type='TopDownAffine'),
    dict(type='ToTensor'),
    dict(type='NormalizeTensor', mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    dict(type='TopDownGenerateTarget', sigma=2),
    dict(type='Collect', keys=['img', 'target', 'target_weight'],
         meta_keys=['image_file', 'joints_3d', 'joints_3d_visible', 'center', 'scale', 'rotation',
                    'bbox_score', 'flip_pairs']),
]
val_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='TopDownGetBboxCenterScale', padding=1.25),
    dict(type='TopDownAffine'),
    dict(type='ToTensor'),
    dict(type='NormalizeTensor', mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    dict(type='Collect', keys=['img'],
         meta_keys=['image_file', 'center', 'scale', 'rotation', 'bbox_score', 'flip_pairs']),
]
test_pipeline = val_pipeline
data_root = {str(data_root)!r}
data = dict(
    samples_per_gpu=2,
    workers_per_gpu=0,
    val_dataloader=dict(samples_per_gpu=2),
    test_dataloader=dict(samples_per_gpu=2),
    train=dict(type='TopDownCocoDataset', ann_file=f'{{data_root}}/keypoints.json',
               img_prefix=f'{{data_root}}/images/', data_cfg=data_cfg, pipeline=train_pipeline,
               dataset_info={{{{_base_.dataset_info}}}}),
    val=dict(type='TopDownCocoDataset', ann_file=f'{{data_root}}/keypoints.json',
             img_prefix=f'{{data_root}}/images/', data_cfg=data_cfg, pipeline=val_pipeline,
             dataset_info={{{{_base_.dataset_info}}}}),
    test=dict(type='TopDownCocoDataset', ann_file=f'{{data_root}}/keypoints.json',
              img_prefix=f'{{data_root}}/images/', data_cfg=data_cfg, pipeline=test_pipeline,
              dataset_info={{{{_base_.dataset_info}}}}),
)
""")
    return path


#: MPII's joint names in its mpii_gt_val.mat order (0.29's TopDownMpiiDataset.evaluate looks them up)
MPII_JOINTS = ["rank", "rkne", "rhip", "lhip", "lkne", "lank", "pelv", "thor", "neck", "head"]
MPII_JOINTS += ["rwri", "relb", "rsho", "lsho", "lelb", "lwri"]


def write_keypoint_eval_data(
    root: Path, layout: str, keypoints: int, count: int = 10, seed: int = 0, crop: int | None = None
) -> tuple[Path, Path, Path]:
    """A small annotated keypoint data set in one of MMPose's layouts, and predictions near its
    ground truth: ``(annotation file, image folder, predictions.npz)``.

    ``layout``: ``coco`` (one annotation per image, with every field a 0.x or 1.x top-down loader
    reads: box, keypoints, ``center``/``scale``, AFLW's ``box_size``, Panoptic's ``head_size``),
    ``jhmdb`` (the same, 1-based as JHMDB's), ``mpii`` (MPII's JSON list, 1-based, and its
    ``mpii_gt_val.mat``) or ``mpii_trb`` (MPII-TRB's: ``center``/``scale`` and a ``headbox`` per
    annotation, image ids the file names' numbers). ``crop``: every image that size and its box the whole image (Fly's,
    Locust's, FreiHand's). Boxes cross the image's edges now and then, some keypoints are not
    labelled. Predictions (keyed by image file name, K x 2, 0-based as the loaders read the ground
    truth) are the ground truth moved by a normal error of 0.12 box sides, so that thresholds split
    them."""
    import cv2

    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    images, annotations, mpii, predictions = [], [], [], {}
    one_based = layout in ("jhmdb", "mpii")
    for index in range(count):
        height, width = (crop, crop) if crop else (int(rng.integers(120, 180)), int(rng.integers(120, 180)))
        name = f"{index + 1:06d}.jpg"
        cv2.imwrite(str(root / "images" / name), (rng.random((height, width, 3)) * 255).astype(np.uint8))
        if crop:
            x, y, w, h = 0.0, 0.0, float(crop), float(crop)
        else:  # every third box crosses an edge (1.x clips boxes to the image, 0.x did not everywhere)
            w, h = float(rng.uniform(50, 90)), float(rng.uniform(50, 90))
            x = float(rng.uniform(-20, -5)) if index % 3 == 0 else float(rng.uniform(5, width - w - 5))
            y = (
                float(rng.uniform(height - h + 5, height - h + 20))
                if index % 3 == 1
                else float(rng.uniform(5, height - h - 5))
            )
        points = np.stack(
            [rng.uniform(x + 0.1 * w, x + 0.9 * w, keypoints), rng.uniform(y + 0.1 * h, y + 0.9 * h, keypoints)], 1
        )
        points = np.clip(points, 2, [width - 3, height - 3]).round(2)
        visible = np.where(rng.random(keypoints) < 0.8, 2, 0)
        visible[:2] = 2  # the normalising pairs (300W's, a torso's) are labelled
        if keypoints > 5:
            visible[4:6] = 2
        side = max(w, h)
        predictions[name] = points + rng.normal(0, 0.12 * side, points.shape)
        labelled = points * (visible[:, None] > 0) + (1.0 if one_based else 0.0) * (visible[:, None] > 0)
        if layout == "mpii":
            mpii.append(
                {
                    "image": name,
                    "center": [x + w / 2 + 1, y + h / 2 + 1],
                    "scale": side / 200.0,
                    "joints": labelled.tolist(),
                    "joints_vis": (visible > 0).astype(int).tolist(),
                    "head": [[x + 1, y + 1], [x + 1 + w * 0.3, y + 1 + h * 0.25]],
                }
            )
            continue
        # ids of one length: 0.29's JHMDB evaluate sorts its results by "<image id>_<n>" strings;
        # MPII-TRB's 0.29 loader keys its images by their file names' numbers
        image_id = index + 1 if layout == "mpii_trb" else 101 + index
        images.append({"id": image_id, "file_name": name, "height": height, "width": width})
        annotations.append(
            {
                "id": 101 + index,
                "image_id": image_id,
                "category_id": 1,
                "bbox": [round(v, 2) for v in (x + one_based, y + one_based, w, h)],
                "area": w * h,
                "iscrowd": 0,
                "num_keypoints": int((visible > 0).sum()),
                "keypoints": [round(float(v), 2) for v in np.concatenate([labelled, visible[:, None]], 1).reshape(-1)],
                "center": [x + w / 2, y + h / 2],
                "scale": side / 200.0,
                "box_size": float(np.sqrt(w * h)),
                "head_size": float(rng.uniform(15, 40)),
                "segmentation": [],
                # MPII-TRB's head box (x1, y1, x2, y2): its diagonal times 0.3 is the PCKh threshold
                "headbox": [x, y, x + w * float(rng.uniform(0.3, 0.6)), y + h * float(rng.uniform(0.3, 0.6))],
                "num_joints": keypoints,
            }
        )
    if layout == "mpii":
        from scipy.io import savemat

        ann_file = root / "mpii_val.json"
        ann_file.write_text(json.dumps(mpii))
        savemat(
            str(root / "mpii_gt_val.mat"),
            {
                "dataset_joints": np.array([MPII_JOINTS], dtype=object),
                "jnt_missing": np.array([[1 - v for v in a["joints_vis"]] for a in mpii]).T,
                "pos_gt_src": np.transpose(np.array([a["joints"] for a in mpii]), [1, 2, 0]),
                "headboxes_src": np.transpose(np.array([a["head"] for a in mpii]), [1, 2, 0]),
            },
        )
    else:
        ann_file = root / "keypoints.json"
        categories = [{"id": 1, "name": "thing", "supercategory": "thing", "keypoints": [], "skeleton": []}]
        ann_file.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    np.savez(root / "predictions.npz", **predictions)
    return ann_file, root / "images", root / "predictions.npz"


#: Human3.6M's camera numbers (the image names carry them; 0.x and 1.x read a camera per subject and
#: number) and image sizes: one wider than Human3.6M's (all 1000 px), so that a flip about one fixed
#: pixel column for every camera, not each image's middle, would show
H36M_CAMERAS = {"54138969": (1000, 1002), "55011271": (1000, 1000), "58860488": (1000, 1000), "60457274": (1224, 1002)}


def write_h36m_data(root: Path, seed: int = 0) -> Path:
    """A tiny Human3.6M in the layout MMPose 0.x's and 1.x's preprocessing write (under
    ``root/data/h36m``, where the zoo's configs look from the working folder): for each split an
    npz of image names (``S1_Directions_1.54138969_000001.jpg``: subject, action, camera, frame),
    boxes, 2D keypoints with visibility (``part``) and 3D joints in metres with visibility (``S``);
    CPN-style detected 2D keypoints (``joint_2d_det_files/cpn_ft_h36m_dbb_{split}.npy``: the ground
    truth moved a few pixels, random scores); ``cameras.pkl`` (each subject's four cameras: R, T,
    c, f, k, p, w, h). Videos of several lengths (shorter and longer than the configs' sequences),
    some joints not visible. Returns ``root`` (the working folder the configs' paths start from)."""
    import pickle

    rng = np.random.RandomState(seed)
    base = root / "data" / "h36m"
    (base / "annotation_body3d" / "fps50").mkdir(parents=True, exist_ok=True)
    (base / "joint_2d_det_files").mkdir(parents=True, exist_ok=True)

    def split(name: str, subjects: list[str], lengths: list[int]) -> None:
        names: list[str] = []
        joints_3d, joints_2d = [], []
        for subject in subjects:
            for action in ("Directions_1", "Walking", "Eating_2"):
                for camera in ("54138969", "60457274"):
                    frames = lengths[len(names) % len(lengths)]
                    names += [f"{subject}_{action}.{camera}_{i + 1:06d}.jpg" for i in range(frames)]
                    root_3d = rng.randn(3) * [0.5, 0.2, 0.5] + [0, 0, 5]
                    pose = rng.randn(frames, 17, 3) * 0.3 + root_3d
                    visible = np.ones((frames, 17, 1))
                    visible[rng.rand(frames, 17, 1) < 0.05] = 0
                    joints_3d.append(np.concatenate([pose, visible], -1))
                    points = rng.rand(frames, 17, 2) * 1000
                    joints_2d.append(np.concatenate([points, np.ones((frames, 17, 1))], -1))
        s = np.concatenate(joints_3d).astype(np.float32)
        part = np.concatenate(joints_2d).astype(np.float32)
        count = len(names)
        np.savez(
            base / "annotation_body3d" / "fps50" / f"h36m_{name}.npz",
            imgname=np.array(names),
            center=(rng.rand(count, 2) * 1000).astype(np.float32),
            scale=(rng.rand(count) * 5).astype(np.float32),
            part=part,
            S=s,
        )
        detected = part.copy()
        detected[..., :2] += rng.randn(count, 17, 2) * 5
        detected[..., 2] = rng.rand(count, 17)
        np.save(base / "joint_2d_det_files" / f"cpn_ft_h36m_dbb_{name}.npy", detected.astype(np.float32))

    split("train", ["S1", "S5", "S6"], [30, 7, 13])
    split("test", ["S9", "S11"], [25, 9, 40])
    cameras = {
        (subject, camera): {
            "R": np.eye(3),
            "T": np.zeros((3, 1)),
            "c": np.array([[w / 2 + 3.0], [h / 2 - 2.0]]),
            "f": np.array([[1145.0], [1144.0]]),
            "k": np.zeros((3, 1)),
            "p": np.zeros((2, 1)),
            "w": w,
            "h": h,
            "name": camera,
        }
        for subject in ("S1", "S5", "S6", "S7", "S8", "S9", "S11")
        for camera, (w, h) in H36M_CAMERAS.items()
    }
    with open(base / "annotation_body3d" / "cameras.pkl", "wb") as fh:
        pickle.dump(cameras, fh)
    return root
