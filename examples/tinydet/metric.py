from __future__ import annotations

from typing import Sequence

import torch
from mmengine.evaluator import BaseMetric
from mmengine.registry import METRICS


@METRICS.register_module()
class ToyBoxMetric(BaseMetric):
    """Mean squared error and "accuracy" (share of boxes within ``tol``) of the predictions.

    ``metric`` selects what is reported, like CocoMetric's ``metric=['bbox', 'segm']``.
    """

    default_prefix = "toy"

    def __init__(
        self,
        metric: str | Sequence[str] = ("mse", "acc"),
        tol: float = 1.0,
        format_only: bool = False,
        outfile_prefix: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.metrics = [metric] if isinstance(metric, str) else list(metric)
        unknown = set(self.metrics) - {"mse", "acc"}
        if unknown:
            raise KeyError(f"ToyBoxMetric supports metrics mse and acc, not {sorted(unknown)}")
        self.tol = tol
        self.format_only = format_only
        self.outfile_prefix = outfile_prefix

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            err = (sample["pred"] - sample["gt"]).pow(2).mean().item()
            self.results.append(err)

    def compute_metrics(self, results: list) -> dict:
        if self.format_only:
            assert self.outfile_prefix, "format_only needs outfile_prefix"
            torch.save(torch.tensor(results), f"{self.outfile_prefix}.results.pth")
            return {}
        errors = torch.tensor(results)
        out = {}
        # acc first: CheckpointHook(save_best="auto") ranks by the first key.
        if "acc" in self.metrics:
            out["acc"] = float((errors < self.tol).float().mean())
        if "mse" in self.metrics:
            out["mse"] = float(errors.mean())
        return out
