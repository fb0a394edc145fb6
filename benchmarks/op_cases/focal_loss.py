"""Focal losses at RetinaNet's size: ~100k anchors × 80 classes (one 1333×800 image, 5 levels, 9 anchors)."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Iterator

import torch

ANCHORS, CLASSES = 100_000, 80


def _sigmoid(ext: ModuleType) -> Callable[[], Any]:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(ANCHORS, CLASSES, generator=generator) * 3
    target = torch.randint(0, CLASSES + 1, (ANCHORS,), generator=generator)  # CLASSES: background
    empty = logits.new_empty(0)
    output, grad = torch.zeros_like(logits), torch.zeros_like(logits)

    def run() -> None:
        ext.sigmoid_focal_loss_forward(logits, target, empty, output, gamma=2.0, alpha=0.25)
        ext.sigmoid_focal_loss_backward(logits, target, empty, grad, gamma=2.0, alpha=0.25)

    return run


def _softmax(ext: ModuleType) -> Callable[[], Any]:
    generator = torch.Generator().manual_seed(1)
    probabilities = torch.randn(ANCHORS, CLASSES + 1, generator=generator).softmax(1)
    target = torch.randint(0, CLASSES + 1, (ANCHORS,), generator=generator)
    empty = probabilities.new_empty(0)
    output, buff, grad = torch.zeros(ANCHORS), torch.zeros(ANCHORS), torch.zeros_like(probabilities)

    def run() -> None:
        ext.softmax_focal_loss_forward(probabilities, target, empty, output, gamma=2.0, alpha=0.25)
        ext.softmax_focal_loss_backward(probabilities, target, empty, buff, grad, gamma=2.0, alpha=0.25)

    return run


def cases() -> Iterator[tuple[str, Callable[[ModuleType], Callable[[], Any]]]]:
    yield f"sigmoid fwd+bwd, {ANCHORS // 1000}k anchors × {CLASSES} classes", _sigmoid
    yield f"softmax fwd+bwd, {ANCHORS // 1000}k × {CLASSES + 1}", _softmax
