"""MMSegmentation 0.x components for converted 0.x configs, registered in MMSegmentation 1.x's registry.

``DiceLoss0x``: MMSegmentation 0.30's ``DiceLoss`` (softmax, one-hot target, each class's dice with
``smooth`` and ``exponent`` over each image's valid pixels, averaged over the batch, then over the
classes; ``class_weight`` per class). 1.x's ``DiceLoss`` was rewritten (sigmoid by default, one dice
over all classes' pixels, ``eps`` instead of ``smooth``, no valid mask), so a 0.x config's
``DiceLoss`` would train on another loss. The arithmetic below is 0.30's, step for step (its two
``weighted_loss`` reductions included); tests/integration/test_family_0x_mmseg.py compares values
and gradients with 0.30's own class.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import nn

__all__ = ["DiceLoss0x"]


class DiceLoss0x(nn.Module):
    def __init__(
        self,
        smooth: float = 1,
        exponent: float = 2,
        reduction: str = "mean",
        class_weight: list[float] | tuple[float, ...] | None = None,
        loss_weight: float = 1.0,
        ignore_index: int = 255,
        loss_name: str = "loss_dice",
        **kwargs: Any,  # 0.x accepted (and ignored) any other keyword
    ) -> None:
        super().__init__()
        if class_weight is not None and not isinstance(class_weight, (list, tuple)):
            raise TypeError(
                f"DiceLoss0x: class_weight {class_weight!r} must be a list of per-class weights (0.x also read "
                "them from a file; write the numbers into the config)"
            )
        self.smooth = smooth
        self.exponent = exponent
        self.reduction = reduction
        self.class_weight = list(class_weight) if class_weight is not None else None
        self.loss_weight = loss_weight
        self.ignore_index = ignore_index
        self._loss_name = loss_name

    def forward(
        self,
        pred: torch.Tensor,
        target: torch.Tensor,
        avg_factor: float | None = None,
        reduction_override: str | None = None,
        **kwargs: Any,  # weight, ignore_index: passed by the decode head, unused by 0.x's DiceLoss
    ) -> torch.Tensor:
        assert reduction_override in (None, "none", "mean", "sum")
        reduction = reduction_override if reduction_override else self.reduction
        pred = F.softmax(pred, dim=1)
        num_classes = pred.shape[1]
        one_hot = F.one_hot(torch.clamp(target.long(), 0, num_classes - 1), num_classes=num_classes)
        valid = (target != self.ignore_index).long()
        batch = pred.shape[0]
        total: torch.Tensor | float = 0
        for i in range(num_classes):
            if i == self.ignore_index:
                continue
            p = pred[:, i].reshape(batch, -1)
            t = one_hot[..., i].reshape(batch, -1)
            v = valid.reshape(batch, -1)
            num = torch.sum(torch.mul(p, t) * v, dim=1) * 2 + self.smooth
            den = torch.sum(p.pow(self.exponent) + t.pow(self.exponent), dim=1) + self.smooth
            loss = (1 - num / den).mean()  # 0.x's binary_dice_loss: weighted_loss' default reduction
            if self.class_weight is not None:
                loss = loss * pred.new_tensor(self.class_weight)[i]
            total = total + loss
        loss = torch.as_tensor(total, dtype=pred.dtype, device=pred.device) / num_classes
        # 0.x's dice_loss is itself a weighted_loss: no weight; its reduction of one number changes
        # nothing, except 'mean' with an avg_factor (sum / avg_factor)
        if avg_factor is not None and reduction == "mean":
            loss = loss.sum() / (avg_factor + torch.finfo(torch.float32).eps)  # 0.x's weight_reduce_loss
        elif avg_factor is not None and reduction != "none":
            raise ValueError('avg_factor can not be used with reduction="sum"')
        return self.loss_weight * loss

    @property
    def loss_name(self) -> str:
        return self._loss_name


MODELS.register_module(name="DiceLoss0x", module=DiceLoss0x, force=True)
