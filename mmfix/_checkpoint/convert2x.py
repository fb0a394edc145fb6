"""``mmfix convert-checkpoint``: a 2.x checkpoint written out in the 3.x layout of its family.

The load path renames in memory (``_patches/legacy_checkpoint.py``); this writes the same
renaming to a file, for tools that load without mmfix. The file is read as every load is
(weights_only, through mmfix's checks), the state dict renamed by ``_configs._layouts2x``
(towards a model's own keys when a config is given), and written atomically. The rest of the
checkpoint (meta, optimizer state, which refers to parameters by position) is kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .._configs._layouts2x import collision_message, describe, mismatch_message, upgrade
from .._errors import CheckpointCorruptError, CheckpointMismatchError


@dataclass
class Conversion:
    written: bool
    summary: str  # one line: what was renamed, or why nothing was


def _state_dict_of(checkpoint: Any, path: str) -> tuple[dict[str, Any], bool]:
    """(the state dict, whether it sits under checkpoint["state_dict"])."""
    import torch

    if isinstance(checkpoint, dict) and isinstance(checkpoint.get("state_dict"), dict):
        return checkpoint["state_dict"], True
    if isinstance(checkpoint, dict) and checkpoint and all(isinstance(v, torch.Tensor) for v in checkpoint.values()):
        return checkpoint, False
    raise CheckpointCorruptError(
        f"{path} holds no state dict: neither a 'state_dict' entry nor a mapping of names to tensors "
        f"(top-level keys: {', '.join(map(str, list(checkpoint)[:8])) if isinstance(checkpoint, dict) else type(checkpoint).__name__}).",
        path=path,
    )


def model_keys(config: str) -> list[str]:
    """The parameter and buffer names of ``config``'s model, built (random weights) on this MMDetection."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    cfg = Config.fromfile(config)  # a 2.x config is converted here (mmfix is active in the command)
    init_default_scope(cfg.get("default_scope", "mmdet"))
    from mmengine.registry import MODELS

    model = MODELS.build(cfg.model)
    return list(model.state_dict().keys())


def convert_checkpoint(old: str, new: str, config: str | None = None) -> Conversion:
    import torch

    target_keys = model_keys(config) if config else None

    checkpoint = torch.load(old, map_location="cpu", weights_only=True)
    state_dict, nested = _state_dict_of(checkpoint, old)
    done = upgrade(state_dict, target_keys)
    if done.collisions:
        # A written file is read later without mmfix: keeping both tensors (one under a 2.x name)
        # would write a half-converted file, and dropping one would be a silent choice.
        raise CheckpointMismatchError("mmfix: " + collision_message(done.collisions, "Nothing was written."), path=old)
    if target_keys is not None:
        # as MMEngine's load_state_dict counts them: BN's num_batches_tracked may be absent
        missing = [k for k in target_keys if k not in done.state_dict and "num_batches_tracked" not in k]
        wanted = set(target_keys)
        unexpected = [k for k in done.state_dict if k not in wanted]
        if missing or unexpected:
            raise CheckpointMismatchError(
                mismatch_message(f"the model of {config}", missing, unexpected, "Nothing was written."), path=old
            )
    if not done.changed:
        return Conversion(False, f"{old} has no MMDetection 2.x layout that 3.x changed: it loads into 3.x as it is")
    if nested:
        checkpoint = dict(checkpoint)
        checkpoint["state_dict"] = done.state_dict
        meta = dict(checkpoint.get("meta") or {})
        meta["mmfix_converted_layouts"] = [layout.name for layout, _ in done.applied]
        checkpoint["meta"] = meta
    else:
        checkpoint = done.state_dict
    from .atomic import save_torch

    save_torch(checkpoint, os.fspath(new))
    return Conversion(True, describe(done.applied))
