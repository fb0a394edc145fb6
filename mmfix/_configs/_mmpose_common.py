"""What MMPose 0.x's two rule modules share (mmfix/_configs/_mmpose.py: top-down;
_mmpose_lifting.py: 3D lifting): the error for what is not converted yet, the dataloaders from 0.x's
``data`` section, and the best-checkpoint rule 0.x's EvalHook inferred from a metric's name."""

from __future__ import annotations

import copy
from typing import Any

from .._errors import ConfigConversionError
from . import _engine
from ._report import Report


def not_yet(key: str, value: Any, what: str) -> ConfigConversionError:
    return ConfigConversionError(
        key,
        value,
        f"mmfix converts MMPose 0.x's top-down and 3D lifting configs so far; {what} is not converted yet. "
        "Write the 1.x equivalent (MMPose's docs/en/migration.md) or run it with MMPose 0.x.",
    )


#: MMPose 0.x's EvalHook's keys (mmpose/core/evaluation/eval_hooks.py): a save_best metric whose
#: name holds one of these is better greater / less (greater checked first, as mmcv's _init_rule).
GREATER_KEYS = ("acc", "ap", "ar", "pck", "auc", "3dpck", "p-3dpck", "3dauc", "p-3dauc", "pcp")
LESS_KEYS = ("loss", "epe", "nme", "mpjpe", "p-mpjpe", "n-mpjpe")


def best_rule(save_best: str) -> str | None:
    """The rule MMPose 0.x's EvalHook inferred for ``save_best`` (None: it inferred none either)."""
    name = save_best.lower()
    if any(key in name for key in GREATER_KEYS):
        return "greater"
    if any(key in name for key in LESS_KEYS):
        return "less"
    return None


def best(evaluation: dict[str, Any], keys: dict[str, str], prefix: str) -> None:
    """``save_best``'s 0.x result key as 1.x names it (``prefix``: the metric's, ``keys``: renamed
    keys), with the rule 0.x's EvalHook inferred from the 0.x name (1.x's infers none for most)."""
    save_best = evaluation.get("save_best")
    if save_best is None:
        return
    if "rule" not in evaluation:
        rule = best_rule(save_best)
        if rule is not None:
            evaluation["rule"] = rule
    if "/" not in save_best:
        evaluation["save_best"] = prefix + keys.get(save_best, save_best)


def data_section(src: dict[str, Any]) -> tuple[dict[str, Any], int, int, dict[str, dict[str, Any]]]:
    """0.x's ``data``: (its splits and other keys, samples_per_gpu, workers_per_gpu, each split's
    ``{split}_dataloader`` overrides)."""
    data = dict(src.pop("data", None) or {})
    batch = data.pop("samples_per_gpu", 1)
    workers = data.pop("workers_per_gpu", 1)
    overrides = {name: dict(data.pop(f"{name}_dataloader", {}) or {}) for name in ("train", "val", "test")}
    return data, batch, workers, overrides


def dataloaders(
    datasets: dict[str, dict[str, Any]],
    rest: dict[str, Any],
    batch: int,
    workers: int,
    overrides: dict[str, dict[str, Any]],
    out: dict[str, Any],
    report: Report,
) -> None:
    """A 1.x dataloader for each converted split (``rest``: the data section's other keys)."""
    for name, dataset in datasets.items():
        over = overrides[name]
        size = over.pop("samples_per_gpu", batch if name == "train" else 1)  # 0.x evaluated one per GPU
        loader = _engine.dataloader(size, over.pop("workers_per_gpu", workers), name == "train", dataset)
        _engine.loader_options(loader, over, f"data.{name}_dataloader", report)
        out[f"{name}_dataloader"] = loader
    for key in rest:
        report.drop(f"data.{key}", "no 1.x dataloader equivalent")
    if "val_dataloader" in out and "test_dataloader" not in out:
        out["test_dataloader"] = copy.deepcopy(out["val_dataloader"])


#: 0.x EvalHook arguments that 1.x has no place for, and why
EVALUATION_DROPPED = {
    "gpu_collect": "1.x collects results on the CPU by default",
    "tmpdir": "1.x collects results on the CPU",
}


def schedule_evaluation(
    evaluation: dict[str, Any], out: dict[str, Any], report: Report, keys: dict[str, str], prefix: str
) -> None:
    """0.x's ``evaluation`` (less its metrics): ``save_best`` with its rule (``best``), the interval."""
    best(evaluation, keys, prefix)
    _engine.evaluation_schedule(
        evaluation, out, report, EVALUATION_DROPPED, "MMPose 1.x takes interval, save_best and rule"
    )
