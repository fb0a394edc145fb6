"""PSANet's attention masks. Compiled mmcv's CPU kernel writes element by element through tensor
indexing (about a microsecond each), so the compared sizes are small; PSANet's own ADE20K size
(64×64 features, 66×66 mask, batch 2) is timed for mmfix alone."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Iterator

import torch


def _make(psa_type: int, batch: int, feature: int, mask: int) -> Callable[[ModuleType], Callable[[], Any]]:
    def make(ext: ModuleType) -> Callable[[], Any]:
        if not getattr(ext, "__mmfix__", False) and feature > 32:
            raise RuntimeError("not timed for compiled mmcv: its CPU kernel takes minutes at this size")
        geometry = dict(
            num_=batch,
            h_feature=feature,
            w_feature=feature,
            h_mask=mask,
            w_mask=mask,
            half_h_mask=(mask - 1) // 2,
            half_w_mask=(mask - 1) // 2,
        )
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(batch, mask * mask, feature, feature, generator=generator)
        output = torch.zeros(batch, feature * feature, feature, feature)
        grad_input = torch.zeros_like(x)

        def run() -> None:
            ext.psamask_forward(x, output, psa_type=psa_type, **geometry)
            ext.psamask_backward(output, grad_input, psa_type=psa_type, **geometry)

        return run

    return make


def cases() -> Iterator[tuple[str, Callable[[ModuleType], Callable[[], Any]]]]:
    yield "collect fwd+bwd, 2 × 16×16, mask 17×17", _make(0, 2, 16, 17)
    yield "distribute fwd+bwd, 2 × 16×16, mask 17×17", _make(1, 2, 16, 17)
    yield "collect fwd+bwd, 2 × 64×64, mask 66×66 (ADE20K; compiled: not timed)", _make(0, 2, 64, 66)
