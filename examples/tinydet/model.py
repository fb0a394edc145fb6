from __future__ import annotations

import torch
from mmengine.model import BaseModel
from mmengine.registry import MODELS
from torch import nn


@MODELS.register_module()
class ToyDetector(BaseModel):
    """A linear box regressor. ``unused_branch=True`` adds a head that gets no gradient,
    the classic cause of DDP's "Expected to have finished reduction" error; ``ballast_mb``
    makes its checkpoints that many MB larger."""

    def __init__(self, in_dim: int = 8, hidden: int = 16, unused_branch: bool = False, ballast_mb: int = 0) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU())
        self.bbox_head = nn.Linear(hidden, 4)
        self.aux_head = nn.Linear(hidden, 4) if unused_branch else None
        # ballast_mb: a buffer that makes checkpoints as large as real ones, for save/resume tests
        if ballast_mb:
            self.register_buffer("ballast", torch.zeros(ballast_mb * 2**20 // 4))

    def forward(self, inputs: torch.Tensor, data_samples: torch.Tensor | None = None, mode: str = "tensor"):
        feats = self.backbone(inputs)
        boxes = self.bbox_head(feats)
        if mode == "loss":
            return dict(loss_bbox=nn.functional.mse_loss(boxes, data_samples))
        if mode == "predict":
            return [dict(pred=p, gt=t) for p, t in zip(boxes.detach(), data_samples)]
        return boxes
