"""Run a real MMDetection 3.3.0 zoo model on one mmcv extension or the other, and compare.

Used by tests/integration/test_zoo_ops.py and benchmarks/zoo_ops.py. A config is loaded as
MMEngine loads it, its model built with MMDetection's registry (pretrained downloads cut off:
weights are seeded random), and run on a synthetic batch built directly as data samples —
images, boxes, labels, masks and a semantic map, so detection, instance and panoptic heads
all find their targets — through the model's own data preprocessor:

* predict: ``model(**data, mode='predict')`` in eval mode, no grad;
* train step: ``model(**data, mode='loss')`` in train mode, the summed loss backpropagated.

Each run starts from the same state dict and the same RNG seeds, so the only difference
between two runs is the extension ``mmcv.ops`` calls (``ops_support.swap_ext``).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from ops_support import swap_ext

#: Image size of the synthetic batch (height, width): small enough for CPU, large enough for FPN levels.
IMAGE_HW = (256, 320)


def mmdet_configs() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("mmdet")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / ".mim" / "configs"


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


def build_model(config: Path, seed: int = 0) -> torch.nn.Module:
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config

    register_all_modules()
    cfg = Config.fromfile(str(config))
    model_cfg = cfg.model
    _cut_downloads(model_cfg)
    _keep_every_prediction(model_cfg)
    seed_everything(seed)
    model = MODELS.build(model_cfg)
    if hasattr(model, "init_weights"):
        model.init_weights()
    return model


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def synthetic_batch(batch: int = 2, seed: int = 1) -> dict[str, Any]:
    """Raw inputs and data samples as a dataloader would give them (before the preprocessor)."""
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData, PixelData

    g = torch.Generator().manual_seed(seed)
    h, w = IMAGE_HW
    inputs, samples = [], []
    for _ in range(batch):
        image = torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8)
        n = 3
        xy = torch.rand(n, 2, generator=g) * torch.tensor([w * 0.6, h * 0.6])
        wh = 24 + torch.rand(n, 2, generator=g) * torch.tensor([w * 0.35, h * 0.35])
        boxes = torch.cat([xy, xy + wh], 1)
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


@dataclass
class Run:
    predictions: list[dict[str, torch.Tensor]] = field(default_factory=list)
    losses: dict[str, torch.Tensor] = field(default_factory=dict)
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    error: str | None = None


def _prediction_tensors(results: Any) -> list[dict[str, torch.Tensor]]:
    out = []
    for sample in results:
        found = {}
        for part in ("pred_instances", "pred_panoptic_seg", "pred_sem_seg"):
            data = getattr(sample, part, None)
            if data is None:
                continue
            for key, value in data.items():
                if isinstance(value, torch.Tensor):
                    found[f"{part}.{key}"] = value.detach().clone()
                elif hasattr(value, "masks"):  # BitmapMasks
                    found[f"{part}.{key}"] = torch.as_tensor(np.asarray(value.masks))
        out.append(found)
    return out


def run_model(model: torch.nn.Module, state: dict[str, Any], ext: ModuleType, batch: dict[str, Any]) -> Run:
    """Predict and one training step with ``ext`` as mmcv's extension, from ``state``."""
    run = Run()
    model.load_state_dict(state)
    with swap_ext(ext):
        model.eval()
        seed_everything(2)
        with torch.no_grad():
            data = model.data_preprocessor(copy.deepcopy(batch), False)
            run.predictions = _prediction_tensors(model(**data, mode="predict"))
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


def differences(a: Run, b: Run, rtol: float = 1e-4, atol: float = 1e-4) -> list[str]:
    """What differs between two runs of the same model (empty: the same predictions, losses, grads)."""
    problems = []
    if len(a.predictions) != len(b.predictions):
        return [f"{len(a.predictions)} vs {len(b.predictions)} predicted samples"]
    for i, (pa, pb) in enumerate(zip(a.predictions, b.predictions)):
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
