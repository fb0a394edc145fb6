"""2.x checkpoints load into 3.x models: renamed where 3.x moved a family's layers, strictly for 2.x runs.

MMEngine loads a state dict with ``strict=False`` by default and only logs the keys that did not
match, so a 2.x checkpoint of a family 3.x rebuilt (YOLACT, DETR, MaskFormer …) would train or
test with those layers at random. Two wrappers fix that:

* ``mmengine.runner.checkpoint.load_state_dict`` -- which ``load_checkpoint``, ``Runner.load_checkpoint``,
  ``Runner.resume``, ``init_cfg=Pretrained``, the inferencers (MMDetection's ``DetInferencer``
  included) and ``tools/test.py`` all reach
  through ``_load_checkpoint_to_model`` -- renames a state dict that carries a 2.x layout of
  ``_configs._layouts2x`` to the 3.x names the model has, in memory;
* where the load belongs to a 2.x run (the checkpoint's ``meta`` says MMDetection 2.x, or the
  model is of a type mmfix built from a converted 2.x config in this process), keys still
  missing or unexpected afterwards are one clear error instead of a warning.
  ``MMFIX_PARTIAL_LOAD=1`` keeps MMEngine's warning for users who mean a partial load.

Size mismatches stay MMEngine's warning: fine-tuning on another number of classes is a 2.x
habit (``load_from`` a COCO model), and its head's shapes differ by design.
"""

from __future__ import annotations

import contextvars
from typing import Any, Callable

from .. import _log, _wrapping
from .._errors import CheckpointMismatchError

_swaps = _wrapping.SwapSet()

#: The model types (class names) of the legacy configs converted in this process -> what they were
#: ("an MMDetection 2.x config").
_models_from_2x: dict[str, str] = {}
#: Set around a load whose checkpoint's meta says a legacy release ("MMDetection 2.28.2").
_checkpoint_2x: contextvars.ContextVar[str | None] = contextvars.ContextVar("mmfix_checkpoint_2x", default=None)
#: (meta key, the legacy line's version prefix, the toolbox): checkpoints the legacy tools saved,
#: whose every load is strict. Not MMSegmentation 0.x's: its 1.x zoo serves 0.x-saved checkpoints
#: to 1.x configs (some of which drop a 0.x weight, as ViT's patch bias), so there only a model
#: built from a converted 0.x config makes a load strict.
LEGACY_META = (("mmdet_version", "2.", "MMDetection"),)


#: Buffers the current model computes from its config that a legacy release kept out of its state
#: dicts (non-persistent there, persistent now). Absent from a legacy checkpoint, they keep the
#: values the model was built with, which are the legacy model's too, so their absence is no
#: mismatch. MMClassification 0.x's Swin-V2 window attention: its relative-position tables.
DERIVED_BUFFERS = frozenset(("relative_coords_table", "relative_position_index"))


#: MMCV 1.x's EMAHook registered one buffer per parameter on the model, ``ema_`` + its name with
#: "." as "_" (MMDetection 2.x's EMA hooks one per state-dict entry, unless skip_buffers), and
#: checkpoints kept them. Which held the average depends on the run (MMCV's hook swapped the
#: averages into the parameters at each epoch's end, before the checkpoint hook saved; an
#: iteration-based run never swapped); the legacy test tools loaded the parameters and left the
#: buffers out (their non-strict load's warning), as mmfix does.
EMA_PREFIX = "ema_"


def _ema_backups(unexpected: list[str], target: Any) -> set[str]:
    """Of the unexpected keys, a legacy EMA hook's backups: exactly one for each parameter (or each
    state-dict entry) of ``target``; nothing if they are not exactly that set."""
    ema = {k for k in unexpected if k.startswith(EMA_PREFIX) and "." not in k}
    if not ema:
        return set()
    for names in ((name for name, _ in target.named_parameters()), target.state_dict().keys()):
        if ema == {EMA_PREFIX + name.replace(".", "_") for name in names}:
            return ema
    return set()


def note_model_from_2x(model_type: Any, what: str = "an MMDetection 2.x config") -> None:
    """Called by the legacy_config patch for every legacy config it converts."""
    if isinstance(model_type, str):
        _models_from_2x[model_type.rsplit(".", 1)[-1]] = what


def apply() -> str | None:
    from mmengine.runner import checkpoint

    _swaps.wrap(checkpoint, "load_state_dict", _load_state_dict)
    # MMDetection's and MMEngine's callers import it by name: wrap it under each of them.
    aliases: list[tuple[Any, str]] = []
    for module_name in ("mmengine.runner.runner", "mmengine.infer.infer"):
        module = _imported(module_name)
        if module is not None and hasattr(module, "_load_checkpoint_to_model"):
            aliases.append((module, "_load_checkpoint_to_model"))
    swap = _swaps.wrap(checkpoint, "_load_checkpoint_to_model", _load_checkpoint_to_model, aliases=tuple(aliases))

    # MMDetection's DetInferencer imports it by name too; importing mmdet.apis here would import
    # all of MMDetection, so its name is swapped when (if) the program imports it.
    def alias_in(owner: Any) -> None:
        if getattr(owner, "_load_checkpoint_to_model", None) is swap.original:
            _swaps.alias(swap, owner, "_load_checkpoint_to_model")

    _swaps.when_imported("mmdet.apis.det_inferencer", alias_in)
    return None


def remove() -> None:
    _swaps.undo_all()


def _imported(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except Exception:  # an optional caller that does not import here: nothing to alias
        return None


def _legacy_saver(checkpoint: Any) -> str | None:
    """The legacy release whose tools saved ``checkpoint`` ("MMSegmentation 0.30.0+3f2a1b"), by its meta."""
    meta = checkpoint.get("meta") if isinstance(checkpoint, dict) else None
    if not isinstance(meta, dict):
        return None
    for key, prefix, toolbox in LEGACY_META:
        version = meta.get(key)
        if isinstance(version, str) and version.startswith(prefix):
            return f"{toolbox} {version}"
    return None


def _load_checkpoint_to_model(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    # _load_checkpoint_to_model(model, checkpoint, strict=False, logger=None, revise_keys=...)
    token = _checkpoint_2x.set(_legacy_saver(_wrapping.argument(args, kwargs, 1, "checkpoint")))
    try:
        return wrapped(*args, **kwargs)
    finally:
        _checkpoint_2x.reset(token)


def _unwrapped(module: Any) -> Any:
    # MMEngine's load_state_dict loads into the model inside a DDP or TTA wrapper: its keys are the ones to match.
    from mmengine.model import BaseTTAModel, is_model_wrapper

    while is_model_wrapper(module) or isinstance(module, BaseTTAModel):
        module = module.module
    return module


def _load_state_dict(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # load_state_dict(module, state_dict, strict=False, logger=None)
    module = _wrapping.argument(args, kwargs, 0, "module")
    state_dict = _wrapping.argument(args, kwargs, 1, "state_dict")
    strict = bool(_wrapping.argument(args, kwargs, 2, "strict", False))
    try:
        target = _unwrapped(module)
        renamed = _renamed(state_dict, target)
        if renamed is not None:
            args, kwargs = _wrapping.with_argument(args, kwargs, 1, "state_dict", renamed)
        why_strict = None if strict else _why_strict(target)
    except Exception as exc:  # a bug of ours must not stop a load: MMEngine's own behaviour
        _log.error(f"could not check the state dict's layout ({type(exc).__name__}: {exc}); loading it as is.")
        return wrapped(*args, **kwargs)
    if why_strict is None or not hasattr(target, "register_load_state_dict_post_hook"):
        return wrapped(*args, **kwargs)
    found: dict[str, list[str]] = {}

    def record(_module: Any, incompatible: Any) -> None:
        missing = [k for k in incompatible.missing_keys if "num_batches_tracked" not in k]
        if any(k.rsplit(".", 1)[-1] in DERIVED_BUFFERS for k in missing):
            buffers = {name for name, _ in target.named_buffers()}
            missing = [k for k in missing if not (k.rsplit(".", 1)[-1] in DERIVED_BUFFERS and k in buffers)]
        found["missing"] = missing
        unexpected = list(incompatible.unexpected_keys)
        backups = _ema_backups(unexpected, target)
        if backups:
            _log.info(
                f"the checkpoint holds a legacy EMA hook's {len(backups)} ema_* buffers beside the weights; "
                "the weights load (what the legacy test tools loaded: after an epoch-based run the averaged "
                "ones, which MMCV's EMAHook swapped in before saving) and the ema_* buffers are left out, as "
                "those tools left them.",
                key="legacy-checkpoint-ema-buffers",
            )
            unexpected = [k for k in unexpected if k not in backups]
        found["unexpected"] = unexpected

    # MMEngine runs the root's load_state_dict post-hooks last, with every module's keys collected.
    handle = target.register_load_state_dict_post_hook(record)
    try:
        result = wrapped(*args, **kwargs)
    finally:
        handle.remove()
    if found.get("missing") or found.get("unexpected"):
        raise CheckpointMismatchError(_mismatch(type(target).__name__, why_strict, found))
    return result


def _renamed(state_dict: Any, target: Any) -> Any:
    from .._configs._layouts2x import LAYOUTS, collision_message, describe, upgrade

    matching = [layout for layout in LAYOUTS if hasattr(state_dict, "keys") and layout.matches(state_dict.keys())]
    if not matching:
        return None  # the common case: one regex search per key and layout, no model keys computed
    done = upgrade(state_dict, target.state_dict().keys(), matching)
    if done.collisions:
        # Never a silent choice between two tensors: the 3.x-named one loads (stock MMEngine's
        # choice), the 2.x key stays an unexpected key -- MMEngine's warning, or for a 2.x run
        # the strict error below -- and this names the pair.
        _log.warning(
            collision_message(
                done.collisions,
                "Loaded the tensor under the 3.x name, as MMEngine does; the 2.x key(s) are left unexpected.",
            ),
            key="legacy-checkpoint-collision:" + ",".join(c.target for c in done.collisions[:4]),
        )
    if not done.changed:
        return None
    _log.info(
        f"the checkpoint has the MMDetection 2.x layout of {describe(done.applied)} in memory "
        "(3.x moved these layers). `mmfix convert-checkpoint OLD.pth NEW.pth` writes a 3.x checkpoint.",
        key="legacy-checkpoint-renamed:" + ",".join(layout.name for layout, _ in done.applied),
    )
    for layout, _ in done.applied:
        if layout.note:
            _log.warning(layout.note, key=f"legacy-checkpoint-note:{layout.name}")
    return done.state_dict


def _why_strict(target: Any) -> str | None:
    from .. import _settings

    if _settings.current().partial_load:
        return None
    saver = _checkpoint_2x.get()
    if saver is not None:
        return f"the checkpoint was saved by {saver}"
    name = type(target).__name__
    if name in _models_from_2x:
        return f"the {name} model was built from {_models_from_2x[name]}"
    return None


def _mismatch(model: str, why: str, found: dict[str, list[str]]) -> str:
    from .._configs._layouts2x import mismatch_message

    return mismatch_message(
        f"the {model} model",
        found.get("missing", []),
        found.get("unexpected", []),
        f"Stopped because {why}: MMEngine would have continued with those layers at their random initial "
        "values. If you mean to load only part of it (another head, a backbone alone), MMFIX_PARTIAL_LOAD=1 "
        "keeps MMEngine's warning instead.",
    )
