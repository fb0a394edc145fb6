"""What MMPose 0.x's two rule modules share (mmfix/_configs/_mmpose.py: top-down;
_mmpose_lifting.py: 3D lifting): the error for what is not converted yet, and the best-checkpoint
rule 0.x's EvalHook inferred from a metric's name."""

from __future__ import annotations

from typing import Any

from .._errors import ConfigConversionError


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
