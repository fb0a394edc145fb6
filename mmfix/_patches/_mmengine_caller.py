"""Whether a torch.load is made on MMEngine's behalf, whatever code sits between.

MMEngine's URL and model-zoo loaders reach ``torch.load`` through
``torch.hub.load_state_dict_from_url``, which passes ``weights_only=False`` itself: the
direct caller torch.load sees is torch.hub. So the decision looks at the whole call stack
for MMEngine's checkpoint-loading code, matched on the running code (so aliases, the
scheme registry's own references and loaders registered by users count too), not only
at the direct caller.
"""

from __future__ import annotations

import sys
from typing import Any

# MMEngine's checkpoint-loading code: a load with any of these on the call stack is made on
# MMEngine's behalf, whatever sits between (torch.hub.load_state_dict_from_url for every URL and
# model-zoo checkpoint, a scheme loader registered with CheckpointLoader, a wrapper of the user's).
# module -> the functions of it that load (None: all of them). Matched on the running code, so
# aliases and the scheme registry's own references count too.
_MMENGINE_LOADERS: dict[str, frozenset[str] | None] = {
    "mmengine.runner.checkpoint": None,
    "mmengine.utils.dl_utils.hub": None,
    "mmengine.runner.runner": frozenset(("resume", "load_checkpoint", "load_or_resume")),
    "mmengine.model.weight_init": None,
}


def on_behalf_of_mmengine(caller: str) -> str | None:
    """The MMEngine module a load is made for (its direct caller, or a loader anywhere on the
    stack), or None when no MMEngine code asked for it."""
    if caller == "mmengine" or caller.startswith("mmengine."):
        return caller
    frame: Any = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if module in _MMENGINE_LOADERS:
            functions = _MMENGINE_LOADERS[module]
            if functions is None or frame.f_code.co_name in functions:
                return f"{module}.{frame.f_code.co_name}"
        frame = frame.f_back
    return None
