"""Run a real OpenMMLab zoo model on one mmcv extension or the other, and compare.

Used by tests/integration/test_zoo_ops.py (MMDetection 3.3.0), test_toolbox_zoo_ops.py
(MMSegmentation 1.2.2, MMPretrain 1.2.0, MMPose 1.3.2), benchmarks/zoo_ops.py and
benchmarks/model_ops_speed.py. A config is loaded as MMEngine loads it, its model built with
its toolbox's registry (the toolbox is the package whose ``.mim/configs`` holds the file;
pretrained downloads cut off: weights are seeded random), and run on a synthetic batch built
directly as that toolbox's data samples — for MMDetection images, boxes, labels, masks and a
semantic map, so detection, instance and panoptic heads all find their targets; a semantic map
for MMSegmentation, a class label for MMPretrain, keypoints and the targets the config's codec
encodes from them for MMPose — through the model's own data preprocessor:

* predict: ``model(**data, mode='predict')`` in eval mode, no grad (MMPose: ``mode='tensor'``,
  the heads' raw outputs: its predict mode needs the metainfo of a real top-down or bottom-up
  pipeline, and decodes with numpy);
* train step: ``model(**data, mode='loss')`` in train mode, the summed loss backpropagated.

Each run starts from the same state dict and the same RNG seeds, so the only difference
between two runs is the extension ``mmcv.ops`` calls (``ops_support.swap_ext``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import random
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import numpy as np
import torch

from ops_support import swap_ext

#: Image size of the synthetic batch (height, width): small enough for CPU, large enough for FPN levels.
IMAGE_HW = (256, 320)
#: The other toolboxes' sizes: small enough for CPU; MMPose's follow each config's codec.
TOOLBOX_IMAGE_HW = {"mmseg": (128, 128), "mmpretrain": (64, 64)}

#: The MMSegmentation, MMPretrain and MMPose models tests/integration/test_toolbox_zoo_ops.py compares
#: (see why these there): (package, config) -> what it exercises
TOOLBOX_MODELS = {
    ("mmseg", "psanet/psanet_r50-d8_4xb2-40k_cityscapes-512x1024.py"): "psamask (PSAHead, bi-direction)",
    ("mmseg", "ccnet/ccnet_r50-d8_4xb2-40k_cityscapes-512x1024.py"): "CrissCrossAttention (mmcv.ops)",
    ("mmseg", "point_rend/pointrend_r50_4xb2-80k_cityscapes-512x1024.py"): "point_sample (mmcv.ops)",
    ("mmseg", "segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py"): "control: no mmcv.ops",
    ("mmpretrain", "resnet/resnet50_8xb32_in1k.py"): "control: no mmcv.ops",
    ("mmpose", "body_2d_keypoint/dekr/coco/dekr_hrnet-w32_8xb10-140e_coco-512x512.py"): "DeformConv2d (DEKR head)",
    ("mmpose", "body_2d_keypoint/topdown_heatmap/coco/td-hm_hrnet-w32_8xb64-210e_coco-256x192.py"): "control",
}


def configs_root(package: str = "mmdet") -> Path:
    """The installed toolbox's zoo configs (``<package>/.mim/configs``)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None, f"{package} is not installed"
    return Path(spec.origin).parent / ".mim" / "configs"


def mmdet_configs() -> Path:
    return configs_root("mmdet")


def toolbox_of(config: Path) -> str:
    """The package a zoo config belongs to: the folder above its ``.mim``."""
    parts = Path(config).parts
    return parts[parts.index(".mim") - 1] if ".mim" in parts else "mmdet"


def zoo_configs() -> list[Path]:
    """Every model config of the zoo (not the _base_ files, not the common/ recipes)."""
    root = mmdet_configs()
    return sorted(p for p in root.rglob("*.py") if "_base_" not in p.parts and "common" not in p.parts)


def _cut_downloads(cfg: Any) -> None:
    """Pretrained weights are downloads; the comparison needs the same seeded weights on both sides."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in list(node):
                value = node[key]
                if (key == "init_cfg" and isinstance(value, dict) and value.get("type") == "Pretrained") or (
                    key in ("pretrained", "teacher_ckpt", "checkpoint") and isinstance(value, str)
                ):
                    node[key] = None
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(cfg)


def _keep_every_prediction(cfg: Any) -> None:
    """Seeded random weights score below the zoo's thresholds: without this, predictions are empty."""
    if isinstance(cfg, dict):
        for key, value in cfg.items():
            if key == "score_thr" and isinstance(value, (int, float)):
                cfg[key] = 0.0
            else:
                _keep_every_prediction(value)
    elif isinstance(cfg, list):
        for item in cfg:
            _keep_every_prediction(item)


def _pad_to_the_batch(model_cfg: Any) -> None:
    """MMSegmentation's configs pad every training batch to the data set's crop (512x1024 for
    Cityscapes): the synthetic batch is small, padded only to a multiple of 32."""
    preprocessor = model_cfg.get("data_preprocessor")
    if isinstance(preprocessor, dict) and preprocessor.get("size") is not None:
        preprocessor["size"] = None
        preprocessor["size_divisor"] = 32


@contextlib.contextmanager
def _torchvision_ops_stub() -> Iterator[None]:
    """MMPretrain's models import its metrics, whose visual-grounding one imports
    torchvision.ops.boxes at import time; torch 2.13's only torchvision build (CUDA) cannot load
    beside a CPU torch, and no model here calls it. An empty stand-in serves that import only: it
    leaves ``sys.modules`` afterwards, so later ``import torchvision`` fails as it should."""
    if importlib.util.find_spec("torchvision") is not None:
        yield
        return
    torchvision = types.ModuleType("torchvision")
    ops = types.ModuleType("torchvision.ops")
    boxes = types.ModuleType("torchvision.ops.boxes")
    torchvision.ops, ops.boxes = ops, boxes  # type: ignore[attr-defined]
    stubs = {"torchvision": torchvision, "torchvision.ops": ops, "torchvision.ops.boxes": boxes}
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for name in stubs:
            sys.modules.pop(name, None)


def _register(package: str) -> None:
    """The toolbox's models registered and its scope the default one."""
    if package == "mmdet":
        importlib.import_module("mmdet.utils").register_all_modules()
        return
    # Only the models (their register_all_modules imports the data sets too: MMPretrain's
    # transforms import torchvision)
    from mmengine.registry import init_default_scope

    with _torchvision_ops_stub():
        importlib.import_module(f"{package}.models")
    init_default_scope(package)


def build_model(config: Path, seed: int = 0) -> torch.nn.Module:
    from mmengine.config import Config

    package = toolbox_of(config)
    _register(package)
    models = importlib.import_module(f"{package}.registry").MODELS
    cfg = Config.fromfile(str(config))
    model_cfg = cfg.model
    _cut_downloads(model_cfg)
    _keep_every_prediction(model_cfg)
    _pad_to_the_batch(model_cfg)
    seed_everything(seed)
    model = models.build(model_cfg)
    if hasattr(model, "init_weights"):
        model.init_weights()
    if package == "mmpose":  # its training targets come from the config's own pipeline
        model.zoo_train_pipeline = copy.deepcopy(cfg.train_dataloader.dataset.pipeline)
    return model


def model_toolbox(model: torch.nn.Module) -> str:
    """The toolbox whose code a built model is (its class's top package)."""
    return type(model).__module__.split(".", 1)[0]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def synthetic_batch(
    batch: int = 2, seed: int = 1, model: torch.nn.Module | None = None, image_hw: tuple[int, int] | None = None
) -> dict[str, Any]:
    """Raw inputs and data samples as a dataloader would give them (before the preprocessor), for
    ``model``'s toolbox (MMDetection without a model); ``image_hw`` overrides the toolbox's size."""
    toolbox = "mmdet" if model is None else model_toolbox(model)
    if toolbox == "mmpose":
        assert model is not None
        return _pose_batch(model, batch, seed, image_hw)
    builder = {"mmdet": _detection_batch, "mmseg": _segmentation_batch, "mmpretrain": _classification_batch}
    return builder[toolbox](batch, seed, image_hw or TOOLBOX_IMAGE_HW.get(toolbox, IMAGE_HW))


def _boxes(g: torch.Generator, h: int, w: int, n: int) -> torch.Tensor:
    xy = torch.rand(n, 2, generator=g) * torch.tensor([w * 0.6, h * 0.6])
    wh = 24 + torch.rand(n, 2, generator=g) * torch.tensor([w * 0.35, h * 0.35])
    return torch.cat([xy, xy + wh], 1)


def _detection_batch(batch: int, seed: int, image_hw: tuple[int, int]) -> dict[str, Any]:
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData, PixelData

    g = torch.Generator().manual_seed(seed)
    h, w = image_hw
    inputs, samples = [], []
    for _ in range(batch):
        image = torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8)
        n = 3
        boxes = _boxes(g, h, w, n)
        masks = np.zeros((n, h, w), np.uint8)
        for i, (x1, y1, x2, y2) in enumerate(boxes.round().long().tolist()):
            masks[i, y1:y2, x1:x2] = 1
            image[:, y1:y2, x1:x2] = torch.tensor([200, 60, 60], dtype=torch.uint8)[:, None, None]
        sample = DetDataSample(
            metainfo=dict(
                img_shape=(h, w),
                ori_shape=(h, w),
                pad_shape=(h, w),
                scale_factor=(1.0, 1.0),
                flip=False,
                flip_direction=None,
                img_id=len(samples),
                img_path=f"synthetic_{len(samples)}.jpg",
            )
        )
        sample.gt_instances = InstanceData(
            bboxes=boxes, labels=torch.randint(0, 3, (n,), generator=g), masks=BitmapMasks(masks, h, w)
        )
        sample.ignored_instances = InstanceData(bboxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.long))
        sem = torch.full((1, h, w), 3, dtype=torch.long)
        for i, (x1, y1, x2, y2) in enumerate(boxes.round().long().tolist()):
            sem[0, y1:y2, x1:x2] = i % 3
        sample.gt_sem_seg = PixelData(sem_seg=sem)
        inputs.append(image)
        samples.append(sample)
    return {"inputs": inputs, "data_samples": samples}


def _segmentation_batch(batch: int, seed: int, image_hw: tuple[int, int]) -> dict[str, Any]:
    """Images with painted rectangles and their semantic map (classes 0-2, background 3)."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    g = torch.Generator().manual_seed(seed)
    h, w = image_hw
    inputs, samples = [], []
    for i in range(batch):
        image = torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8)
        sem = torch.full((1, h, w), 3, dtype=torch.long)
        for k, (x1, y1, x2, y2) in enumerate(_boxes(g, h, w, 3).round().long().tolist()):
            sem[0, y1:y2, x1:x2] = k
            image[:, y1:y2, x1:x2] = torch.tensor([200, 60 * k, 60], dtype=torch.uint8)[:, None, None]
        sample = SegDataSample(
            metainfo=dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w), flip=False, img_path=f"s{i}.png")
        )
        sample.gt_sem_seg = PixelData(data=sem)
        inputs.append(image)
        samples.append(sample)
    return {"inputs": inputs, "data_samples": samples}


#: MMPose's synthetic images: the codec's input size, scaled down to at most this side for CPU
POSE_MAX_SIDE = 128


def _pose_batch(model: torch.nn.Module, batch: int, seed: int, image_hw: tuple[int, int] | None) -> dict[str, Any]:
    """Images with keypoints, and the training targets the config's own pipeline makes of them:
    its steps from ``GenerateTarget`` on (the codec's heatmaps, displacements, weights …, and
    ``PackPoseInputs``), the codec's sizes scaled to the synthetic image."""
    import mmpose.datasets.transforms  # noqa: F401  (registers them)
    from mmengine.registry import TRANSFORMS, init_default_scope

    init_default_scope("mmpose")
    steps = list(model.zoo_train_pipeline)
    first = next(i for i, step in enumerate(steps) if step["type"] == "GenerateTarget")
    steps = copy.deepcopy(steps[first:])
    encoder = steps[0]["encoder"]
    width, height = encoder["input_size"]
    if image_hw is None:
        scale = min(1.0, POSE_MAX_SIDE / max(width, height))
    else:
        scale = image_hw[0] / height
    encoder["input_size"] = (round(width * scale), round(height * scale))
    encoder["heatmap_size"] = tuple(round(side * scale) for side in encoder["heatmap_size"])
    w, h = encoder["input_size"]
    if "sigma" in encoder and isinstance(encoder["sigma"], (int, float)):
        encoder["sigma"] = max(1.0, encoder["sigma"] * scale)
    transforms = [TRANSFORMS.build(step) for step in steps]
    keypoint_count = getattr(model.head, "num_keypoints", None) or model.head.out_channels
    rng = np.random.default_rng(seed)
    inputs, samples = [], []
    for i in range(batch):
        people = 1 if "Topdown" in type(model).__name__ else 2
        keypoints = (rng.random((people, keypoint_count, 2)) * [w * 0.8, h * 0.8] + [w * 0.1, h * 0.1]).astype(
            np.float32
        )
        results: dict[str, Any] = dict(
            img=rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
            img_id=i,
            img_path=f"p{i}.jpg",
            img_shape=(h, w),
            ori_shape=(h, w),
            input_size=(w, h),
            input_center=np.array([w / 2, h / 2], np.float32),
            input_scale=np.array([w, h], np.float32),
            keypoints=keypoints,
            keypoints_visible=np.ones((people, keypoint_count), np.float32),
            bbox=np.array([[w * 0.05, h * 0.05, w * 0.95, h * 0.95]] * people, np.float32),
            bbox_score=np.ones(people, np.float32),
            area=np.full(people, w * h * 0.8, np.float32),
            flip=False,
            flip_direction=None,
            flip_indices=list(range(keypoint_count)),
            # the affine step before GenerateTarget in bottom-up pipelines leaves its matrix
            # (BottomupGetHeatmapMask warps the mask with it): here the identity
            warp_mat=np.eye(2, 3, dtype=np.float32),
        )
        for transform in transforms:
            results = transform(results)
        inputs.append(results["inputs"])
        samples.append(results["data_samples"])
    return {"inputs": inputs, "data_samples": samples}


def _classification_batch(batch: int, seed: int, image_hw: tuple[int, int]) -> dict[str, Any]:
    from mmpretrain.structures import DataSample

    g = torch.Generator().manual_seed(seed)
    h, w = image_hw
    inputs = [torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8) for _ in range(batch)]
    labels = torch.randint(0, 10, (batch,), generator=g).tolist()
    samples = [DataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w))).set_gt_label(c) for c in labels]
    return {"inputs": inputs, "data_samples": samples}


#: toolbox -> the mode its models are run in for predictions (see the module's docstring)
PREDICT_MODE = {"mmpose": "tensor"}


@dataclass
class Run:
    predictions: list[dict[str, torch.Tensor]] = field(default_factory=list)
    losses: dict[str, torch.Tensor] = field(default_factory=dict)
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    error: str | None = None


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.ndarray):  # MMPose decodes keypoints with numpy
        return torch.as_tensor(value.copy())
    if hasattr(value, "masks"):  # BitmapMasks
        return torch.as_tensor(np.asarray(value.masks))
    return None


def _prediction_tensors(results: Any) -> list[dict[str, torch.Tensor]]:
    """Every tensor of each sample's predictions: the ``pred_*`` fields (instances, panoptic and
    semantic maps, MMPretrain's scores and labels) and MMSegmentation's ``seg_logits``; for a
    ``tensor``-mode output, its tensors in order, as one sample."""
    from mmengine.structures import BaseDataElement

    if isinstance(results, torch.Tensor) or (
        isinstance(results, (list, tuple)) and not all(isinstance(r, BaseDataElement) for r in results)
    ):
        flat: list[torch.Tensor] = []

        def walk(node: Any) -> None:
            if isinstance(node, torch.Tensor):
                flat.append(node.detach().clone())
            elif isinstance(node, (list, tuple)):
                for item in node:
                    walk(item)
            elif isinstance(node, dict):
                for item in node.values():
                    walk(item)

        walk(results)
        return [{f"tensor.{i}": t for i, t in enumerate(flat)}]
    out = []
    for sample in results:
        found = {}
        for part, data in sample.items():
            if not (part.startswith("pred_") or part == "seg_logits"):
                continue
            items = data.items() if isinstance(data, BaseDataElement) else [("", data)]
            for key, value in items:
                tensor = _as_tensor(value)
                if tensor is not None:
                    found[f"{part}.{key}" if key else part] = tensor
        out.append(found)
    return out


def run_model(model: torch.nn.Module, state: dict[str, Any], ext: ModuleType, batch: dict[str, Any]) -> Run:
    """Predict and one training step with ``ext`` as mmcv's extension, from ``state``."""
    run = Run()
    # copied in place rather than load_state_dict: MMPose's DEKR head renames rescore_net's keys
    # on load (for its old checkpoints), so its own state dict does not load back
    with torch.no_grad():
        for name, tensor in model.state_dict(keep_vars=True).items():
            tensor.copy_(state[name])
    predict = PREDICT_MODE.get(model_toolbox(model), "predict")
    with swap_ext(ext):
        model.eval()
        seed_everything(2)
        with torch.no_grad():
            data = model.data_preprocessor(copy.deepcopy(batch), False)
            run.predictions = _prediction_tensors(model(**data, mode=predict))
        model.train()
        seed_everything(3)
        model.zero_grad(set_to_none=True)
        data = model.data_preprocessor(copy.deepcopy(batch), True)
        losses = model(**data, mode="loss")
        total = 0
        for key, value in losses.items():
            values = value if isinstance(value, (list, tuple)) else [value]
            for i, v in enumerate(values):
                if isinstance(v, torch.Tensor) and "loss" in key:
                    run.losses[f"{key}.{i}"] = v.detach().clone()
                    total = total + v.sum()
        total.backward()
        run.grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return run


def _matched(pa: dict[str, torch.Tensor], pb: dict[str, torch.Tensor], rtol: float, atol: float) -> None:
    """Pairs ``pb``'s detections with ``pa``'s (label, score and box within the tolerances) and puts
    both in ``pa``'s order, so that float rounding between the two runs' ops is no difference where
    it only reorders: detections whose scores tie within rounding come out of a sort in either order
    (seen: RepPoints, two boxes 192 px apart swapped), and where the ``max_per_img`` cut falls among
    such tied scores, either run may keep another of them (seen: RepPoints' 100th detection, one of
    several scored 0.0100686). Those last are left out of the comparison on both sides, and only
    those: unmatched detections scored above the cut are kept and differ. Left as it is when the
    counts differ (the comparison reports that)."""
    scores_a, scores_b = pa.get("pred_instances.scores"), pb.get("pred_instances.scores")
    if scores_a is None or scores_b is None or scores_a.shape != scores_b.shape or scores_a.dim() != 1:
        return
    n = len(scores_a)
    if n == 0:
        return
    free = torch.ones(n, dtype=torch.bool)
    pairs: list[tuple[int, int]] = []
    unmatched: list[int] = []
    for i in range(n):
        close = free & torch.isclose(scores_b.float(), scores_a[i].float(), rtol=rtol, atol=atol)
        for key in ("pred_instances.labels", "pred_instances.bboxes"):
            if key in pa and key in pb:
                x, y = pa[key][i], pb[key]
                same = (y == x) if not x.dtype.is_floating_point else torch.isclose(y, x, rtol=rtol, atol=atol)
                close &= same.reshape(n, -1).all(dim=1)
        found = torch.nonzero(close).flatten()
        if len(found) == 0:
            unmatched.append(i)
            continue
        pairs.append((i, int(found[0])))
        free[pairs[-1][1]] = False
    cut_a, cut_b = scores_a.float().min(), scores_b.float().min()
    at_the_cut = all(torch.isclose(scores_a[i].float(), cut_a, rtol=rtol, atol=atol) for i in unmatched) and all(
        torch.isclose(scores_b[j].float(), cut_b, rtol=rtol, atol=atol) for j in torch.nonzero(free).flatten()
    )
    if unmatched and not at_the_cut:
        pairs += [(i, j) for i, j in zip(unmatched, torch.nonzero(free).flatten().tolist())]  # compared: they differ
        pairs.sort()
    keep_a = torch.tensor([i for i, _ in pairs], dtype=torch.long)
    keep_b = torch.tensor([j for _, j in pairs], dtype=torch.long)
    for side, keep in ((pa, keep_a), (pb, keep_b)):
        for key in [k for k in side if k.startswith("pred_instances.") and side[k].dim() > 0 and len(side[k]) == n]:
            side[key] = side[key][keep]


def differences(a: Run, b: Run, rtol: float = 1e-4, atol: float = 1e-4) -> list[str]:
    """What differs between two runs of the same model (empty: the same predictions, losses, grads)."""
    problems = []
    if len(a.predictions) != len(b.predictions):
        return [f"{len(a.predictions)} vs {len(b.predictions)} predicted samples"]
    for i, (pa, pb) in enumerate(zip(a.predictions, b.predictions)):
        pa, pb = dict(pa), dict(pb)
        _matched(pa, pb, rtol, atol)
        if pa.keys() != pb.keys():
            problems.append(f"sample {i}: prediction fields {sorted(pa)} vs {sorted(pb)}")
            continue
        for key in pa:
            x, y = pa[key], pb[key]
            if x.shape != y.shape:
                problems.append(f"sample {i} {key}: shape {tuple(x.shape)} vs {tuple(y.shape)}")
            elif x.dtype.is_floating_point and not torch.allclose(x, y, rtol=rtol, atol=atol):
                problems.append(f"sample {i} {key}: max difference {(x - y).abs().max().item():.3g}")
            elif not x.dtype.is_floating_point and not torch.equal(x, y):
                problems.append(f"sample {i} {key}: {int((x != y).sum())} elements differ")
    for what, da, db in (("loss", a.losses, b.losses), ("grad", a.grads, b.grads)):
        if da.keys() != db.keys():
            problems.append(f"{what} names differ: {sorted(set(da) ^ set(db))[:5]}")
            continue
        for key in da:
            x, y = da[key], db[key]
            scale = max(y.abs().max().item(), 1.0) if y.numel() else 1.0
            if x.shape != y.shape or not torch.allclose(x, y, rtol=rtol, atol=atol * scale):
                diff = (x - y).abs().max().item() if x.shape == y.shape else float("nan")
                problems.append(f"{what} {key}: max difference {diff:.3g} (scale {scale:.3g})")
    return problems
