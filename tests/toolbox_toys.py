"""A tiny model and dataset registered with MMEngine, shaped for each toolbox's real 3.x metrics.

Loaded by the toolbox end-to-end configs through ``custom_imports``. The model is a
linear layer; ``task`` decides what its predictions look like, so that the toolbox's
own evaluator (MMSegmentation's IoUMetric, MMPretrain's Accuracy, MMPose's EPE) reads
them exactly as it reads a real model's.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import torch
from mmengine.model import BaseModel
from mmengine.registry import DATASETS, METRICS, MODELS
from torch import nn
from torch.utils.data import Dataset

_OUT = {"seg": 2 * 16, "cls": 3, "pose": 2 * 2, "box": 4}


@DATASETS.register_module()
class ToolboxToyDataset(Dataset):
    def __init__(self, task: str, num_samples: int = 32, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.task = task
        self.inputs = torch.randn(num_samples, 8, generator=generator)
        weight = torch.randn(8, _OUT[task], generator=torch.Generator().manual_seed(1234))
        self.targets = self.inputs @ weight
        self.metainfo = {"classes": ("a", "b", "c")[: 2 if task == "seg" else 3]}

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: int) -> dict:
        return {"inputs": self.inputs[index], "data_samples": self.targets[index]}


@MODELS.register_module()
class ToolboxToyModel(BaseModel):
    def __init__(self, task: str) -> None:
        super().__init__()
        self.task = task
        self.head = nn.Linear(8, _OUT[task])

    def forward(self, inputs, data_samples=None, mode: str = "tensor"):
        inputs = torch.stack(list(inputs)) if isinstance(inputs, (list, tuple)) else inputs
        targets = torch.stack(list(data_samples)) if isinstance(data_samples, (list, tuple)) else data_samples
        out = self.head(inputs)
        if mode == "loss":
            return {"loss": nn.functional.mse_loss(out, targets)}
        if mode != "predict":
            return out
        out, targets = out.detach(), targets.detach()
        return [self._sample(p, t) for p, t in zip(out, targets)]

    def _sample(self, pred: torch.Tensor, target: torch.Tensor) -> dict:
        if self.task == "seg":
            return {
                "pred_sem_seg": {"data": pred.view(2, 4, 4).argmax(0, keepdim=True)},
                "gt_sem_seg": {"data": target.view(2, 4, 4).argmax(0, keepdim=True)},
            }
        if self.task == "cls":
            return {"pred_score": pred.softmax(0), "gt_label": target.argmax().view(1)}
        if self.task == "pose":
            return {
                "pred_instances": {"keypoints": pred.view(1, 2, 2).numpy()},
                "gt_instances": {
                    "keypoints": target.view(1, 2, 2).numpy(),
                    "keypoints_visible": np.ones((1, 2), np.float32),
                },
            }
        return {"pred": pred, "gt": target}


def _pretrain_accuracy() -> type:
    """MMPretrain's real single-label Accuracy, loaded from its file.

    ``import mmpretrain.evaluation`` (and its registry's lazy import) imports every metric,
    and its visual-grounding one imports torchvision, whose only build for torch 2.13 on
    PyPI is a CUDA one that cannot load on a CPU-only torch. The Accuracy module itself
    needs only mmpretrain's registry and structures.
    """
    name = "mmpretrain.evaluation.metrics.single_label"
    if name not in sys.modules:
        spec = importlib.util.find_spec("mmpretrain")
        assert spec is not None and spec.origin is not None
        path = os.path.join(os.path.dirname(spec.origin), "evaluation", "metrics", "single_label.py")
        module_spec = importlib.util.spec_from_file_location(name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    return sys.modules[name].Accuracy


def _pose_epe() -> type:
    from mmpose.evaluation.metrics import EPE

    return EPE


# The toolbox's own metric, also in MMEngine's root registry: for toolboxes whose package
# registries cannot be imported here in full (MMPretrain's models and MMPose's visualizer
# import torchvision; see above), the configs run with default_scope=None.
_ROOT_METRICS = {"mmpretrain": _pretrain_accuracy, "mmpose": _pose_epe}
for _name in filter(None, os.environ.get("TOY_ROOT_METRICS", "").split(",")):
    METRICS.register_module(module=_ROOT_METRICS[_name](), force=True)
