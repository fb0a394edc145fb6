"""2.x-era OpenMMLab configs to their 3.x (MMEngine) form: pure functions on plain dicts.

``convert(cfg)`` takes a merged 2.x config (``_base_`` already applied, as
``Config.fromfile`` returns it) and returns the 3.x dict and a ``Report``;
``apply_legacy_keys(cfg, own_keys)`` applies the 2.x keys found in a 3.x config
to their 3.x equivalents. Neither imports MMEngine or MMDetection.
``_engine`` and ``_transforms`` hold the toolbox-independent rules, ``_mmdet`` MMDetection's,
``_mmseg`` MMSegmentation 0.x's, ``_mmpretrain`` MMClassification 0.x's (``CONVERTERS`` maps each toolbox to its rules);
``_toolbox`` tells which toolbox a config belongs to, and ``check_toolbox`` stops an
old-format config of a toolbox without rules before any other toolbox's rules touch it.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterable

from .._errors import ConfigConversionError
from . import _engine, _mmdet, _mmpose, _mmpretrain, _mmseg, _toolbox
from ._report import Report
from ._toolbox import Detection, Loader

__all__ = [
    "CONVERTERS",
    "LEGACY_KEYS",
    "ConfigConversionError",
    "Detection",
    "Loader",
    "Report",
    "apply_legacy_keys",
    "check_toolbox",
    "classify",
    "convert",
    "legacy_markers",
    "rules_for",
]

#: Top-level keys of 2.x configs that 3.x ignores without a word.
LEGACY_KEYS = frozenset(_engine.LEGACY_SCHEDULE_RUNTIME_KEYS + _mmdet.LEGACY_DATA_KEYS)
_3X_KEYS = (
    "train_dataloader",
    "val_dataloader",
    "test_dataloader",
    "optim_wrapper",
    "param_scheduler",
    "default_hooks",
    "val_evaluator",
    "test_evaluator",
)
# Keys whose presence alone makes a config 2.x-era (data and the MMCV 1.x runner's keys).
_2X_MARKERS = (
    "data",
    "optimizer",
    "optimizer_config",
    "lr_config",
    "runner",
    "evaluation",
    "checkpoint_config",
    "log_config",
    "total_epochs",
    "workflow",
)


def _is_loop(value: Any) -> bool:
    return isinstance(value, dict) and (
        "Loop" in str(value.get("type", "")) or "max_epochs" in value or "max_iters" in value
    )


_2X_DATA_KEYS = (
    "samples_per_gpu",
    "imgs_per_gpu",
    "workers_per_gpu",
    "train",
    "val",
    "test",
    "train_dataloader",
    "val_dataloader",
    "test_dataloader",
    "persistent_workers",
)


def legacy_markers(cfg: dict[str, Any]) -> list[str]:
    """The top-level keys that make ``cfg`` 2.x-era, in ``_2X_MARKERS``' order."""
    found = []
    for key in _2X_MARKERS:
        if key in cfg:
            # A 3.x config may name a helper variable `data`; 2.x's has these keys.
            data = cfg[key]
            if key != "data" or (isinstance(data, dict) and any(k in data for k in _2X_DATA_KEYS)):
                found.append(key)
    return found


def _legacy_marker(cfg: dict[str, Any]) -> bool:
    return bool(legacy_markers(cfg))


def classify(cfg: dict[str, Any]) -> str:
    """'2.x', 'mixed' (a 3.x config with 2.x keys added) or '3.x' -- a few key lookups, no copying."""
    if not _legacy_marker(cfg):
        return "3.x"
    model = cfg.get("model")
    has_3x = (
        any(k in cfg for k in _3X_KEYS)
        or _is_loop(cfg.get("train_cfg"))
        or (isinstance(model, dict) and "data_preprocessor" in model)
    )
    return "mixed" if has_3x else "2.x"


def check_toolbox(
    cfg: dict[str, Any], kind: str, filename: str, paths: Iterable[str] = (), loader: Loader | None = None
) -> Detection:
    """Which toolbox the 2.x-era (``kind`` '2.x' or 'mixed') config ``cfg`` belongs to.

    A config of a toolbox with rules in ``CONVERTERS``, or of no toolbox anything tells (read
    as MMDetection's: mmfix's historical reading), goes on to its conversion. An old-format
    ('2.x') config of a toolbox without rules raises ``ConfigConversionError`` naming that
    toolbox; another toolbox's current-format config ('mixed': 1.x configs keep helper variables
    such as ``optimizer``) is the caller's to leave as stock.
    """
    from .._version import __version__

    found = _toolbox.detect(cfg, paths, loader)
    if found.toolbox is None or found.toolbox in CONVERTERS or kind != "2.x":
        return found
    keys = legacy_markers(cfg)
    raise ConfigConversionError(
        ", ".join(keys),
        found.toolbox,
        "",
        message=_toolbox.not_available(found, keys, filename, __version__),
    )


def rules_for(found: Detection) -> str | None:
    """Whose rules convert a legacy config ``check_toolbox`` let through: its toolbox's, MMDetection's
    where nothing tells (mmfix's historical reading), None for another toolbox without rules (its
    current-format config stays as stock)."""
    if found.toolbox is None:
        return "mmdet"
    return found.toolbox if found.toolbox in CONVERTERS else None


def _plain(value: Any) -> Any:
    """ConfigDict -> dict, recursively (the converters build plain dicts)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _rename_mmcls(node: Any, report: Report) -> Any:
    if isinstance(node, dict):
        for key, value in list(node.items()):
            if key == "type" and isinstance(value, str) and value.startswith("mmcls."):
                node[key] = "mmpretrain." + value[len("mmcls.") :]
                report.moved(f"type {value}", node[key])
            else:
                node[key] = _rename_mmcls(value, report)
    elif isinstance(node, list):
        return [_rename_mmcls(v, report) for v in node]
    return node


def _mmdet_rules(src: dict[str, Any], out: dict[str, Any], report: Report) -> None:
    """MMDetection 2.x's sections (everything but the shared prelude) from ``src`` into ``out``."""
    loop = _engine.convert_runner(src, out, report)
    base_lr = (src.get("optimizer") or {}).get("lr")
    _engine.convert_optimizer(src, out, report)
    _engine.convert_lr_config(src, out, report, loop, base_lr)
    state = _mmdet.convert_data(src, out, report, loop)
    for name in ("train_pipeline", "test_pipeline", "val_pipeline"):
        if isinstance(src.get(name), list):
            out[name] = _mmdet.convert_pipeline(
                src.pop(name), Report(), _mmdet._State(), test=name != "train_pipeline", where=name
            )
    if src.pop("img_norm_cfg", None) is not None:
        report.drop("img_norm_cfg", "now model.data_preprocessor's mean/std/bgr_to_rgb")
    _mmdet.convert_model(src, out, report, state)
    _engine.convert_runtime(src, out, report, loop, "DetLocalVisualizer", "DetVisualizationHook")
    _engine.convert_custom_hooks(src, out, report, _mmdet.CUSTOM_HOOKS)


#: toolbox -> its rules: ``rules(src, out, report)`` moves the legacy sections of ``src`` (a plain,
#: private copy) into ``out``. One row per toolbox whose legacy configs mmfix converts; the others
#: stop at ``check_toolbox`` with a paragraph naming them.
CONVERTERS: dict[str, Callable[[dict[str, Any], dict[str, Any], Report], None]] = {
    "mmdet": _mmdet_rules,
    "mmseg": _mmseg.rules,
    "mmpretrain": _mmpretrain.rules,
    "mmpose": _mmpose.rules,
}


def convert(cfg: dict[str, Any], toolbox: str = "mmdet") -> tuple[dict[str, Any], Report]:
    """A merged legacy config dict of ``toolbox`` -> (the equivalent current dict, what was done).

    Raises ``ConfigConversionError`` (one paragraph: key, value, what the current toolbox
    offers) for anything without a current equivalent.
    """
    rules = CONVERTERS.get(toolbox)
    if rules is None:
        raise ValueError(f"no config rules for toolbox {toolbox!r} (mmfix has: {', '.join(CONVERTERS)})")
    src = copy.deepcopy(_plain(cfg))
    report = Report(toolbox)
    out: dict[str, Any] = {"default_scope": src.pop("default_scope", toolbox)}
    if "default_scope" not in cfg:
        report.note(f"default_scope={toolbox!r} added (the legacy tools found their registries without one)")
    custom = src.pop("custom_imports", None)
    if custom is not None:
        given = custom.get("imports", [])
        names = [given] if isinstance(given, str) else list(given)  # one module may be a plain string
        imports = [("mmpretrain" + m[len("mmcls") :]) if m == "mmcls" or m.startswith("mmcls.") else m for m in names]
        if imports != names:
            report.moved("custom_imports mmcls", "mmpretrain (MMClassification's 1.x successor)")
        out["custom_imports"] = {**custom, "imports": imports[0] if isinstance(given, str) else imports}
    try:
        rules(src, out, report)
    except ConfigConversionError as exc:
        if toolbox == "mmdet" or exc.key is None:
            raise
        # the shared MMEngine-level rules word their errors for MMDetection: name this toolbox
        raise ConfigConversionError(exc.key, exc.value, exc.offers, releases=_toolbox.TOOLBOXES[toolbox][:2]) from None
    _rename_mmcls(out.get("model"), report)
    if "train_cfg" in src and not _is_loop(src["train_cfg"]):
        src.pop("train_cfg")
    # Whatever no rule owned (the user's own variables: dataset_type, data_root, ...) stays.
    result = {**src, **out}
    return result, report


# ----------------------------------------------------------------------------- mixed configs
def _conflict(legacy_key: str, legacy_value: Any, new_key: str, new_value: Any) -> ConfigConversionError:
    return ConfigConversionError(
        legacy_key,
        legacy_value,
        f"The same config also sets the 3.x key `{new_key}` = {new_value!r}, and the two disagree; 3.x reads "
        f"only `{new_key}`. Keep one of them (remove `{legacy_key.split('.')[0]}` to keep the 3.x value).",
    )


def apply_legacy_keys(cfg: dict[str, Any], own_keys: Iterable[str] = ()) -> tuple[dict[str, Any], Report]:
    """A 3.x config that also holds 2.x keys: move those to their 3.x places.

    ``own_keys`` are the dotted 3.x keys the user's own file (or command line) sets: a
    2.x key that disagrees with one of those is an error; inherited 3.x values (from
    ``_base_`` files) are overridden.
    """
    own = set(own_keys)
    out = copy.deepcopy(_plain(cfg))
    report = Report()

    def set_path(path: str, value: Any, legacy: str, own_top: str) -> None:
        parts = path.split(".")
        node = out
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        current = node.get(parts[-1], _MISSING)
        # Set by the user (the key itself, or the whole value without a _base_ to merge into).
        if path in own and current is not _MISSING and current != value:
            raise _conflict(legacy, value, path, current)
        node[parts[-1]] = value
        report.moved(legacy, path)

    data = out.pop("data", None)
    if data is not None:
        for key, value in data.items():
            if key == "samples_per_gpu":
                set_path("train_dataloader.batch_size", value, "data.samples_per_gpu", "train_dataloader")
            elif key == "workers_per_gpu":
                for name in ("train", "val", "test"):
                    if isinstance(out.get(f"{name}_dataloader"), dict):
                        set_path(f"{name}_dataloader.num_workers", value, "data.workers_per_gpu", f"{name}_dataloader")
                        if value == 0:
                            out[f"{name}_dataloader"]["persistent_workers"] = False
            else:
                raise ConfigConversionError(
                    f"data.{key}",
                    value,
                    "in a 3.x config only data.samples_per_gpu and "
                    "data.workers_per_gpu are applied; write datasets as "
                    "train_dataloader.dataset / val_dataloader.dataset / test_dataloader.dataset.",
                )
    scratch: dict[str, Any] = {}
    legacy = {k: out.pop(k) for k in list(out) if k in _engine.LEGACY_SCHEDULE_RUNTIME_KEYS}
    if "optimizer" in legacy or "optimizer_config" in legacy or "fp16" in legacy:
        _engine.convert_optimizer(legacy, scratch, Report())
        wrapper = scratch["optim_wrapper"]
        for key, value in wrapper.items():
            if key == "type" and value == "OptimWrapper":
                continue
            set_path(
                f"optim_wrapper.{key}",
                value,
                "optimizer"
                if key in ("optimizer", "paramwise_cfg", "constructor")
                else "optimizer_config"
                if key in ("clip_grad", "accumulative_counts")
                else "fp16 / optimizer_config",
                "optim_wrapper",
            )
    train_cfg = out.get("train_cfg") or {}
    if "runner" in legacy or "total_epochs" in legacy:
        loop = _engine.convert_runner(legacy, scratch, Report())
        new = scratch["train_cfg"]
        for key in ("type", "max_epochs", "max_iters"):
            if key in new:
                set_path(f"train_cfg.{key}", new[key], "runner", "train_cfg")
        if loop.by_epoch:
            out["train_cfg"].pop("max_iters", None)
        else:
            out["train_cfg"].pop("max_epochs", None)
    else:
        by_epoch = "Iter" not in str(train_cfg.get("type", "EpochBased"))
        loop = _engine.Loop(by_epoch, int(train_cfg.get("max_epochs", train_cfg.get("max_iters", 12))))
    if legacy.pop("workflow", None) is not None:
        report.drop("workflow", "3.x trains by train_cfg")
    if "lr_config" in legacy or "momentum_config" in legacy:
        base_lr = ((out.get("optim_wrapper") or {}).get("optimizer") or {}).get("lr")
        _engine.convert_lr_config(legacy, scratch, Report(), loop, base_lr)
        set_path("param_scheduler", scratch["param_scheduler"], "lr_config", "param_scheduler")
    evaluation = legacy.pop("evaluation", None)
    if evaluation is not None:
        for key, value in evaluation.items():
            if key == "interval":
                set_path("train_cfg.val_interval", value, "evaluation.interval", "train_cfg")
            elif key == "metric":
                for name in ("val_evaluator", "test_evaluator"):
                    if isinstance(out.get(name), dict):
                        set_path(f"{name}.metric", value, "evaluation.metric", name)
            elif key == "save_best":
                set_path("default_hooks.checkpoint.save_best", value, "evaluation.save_best", "default_hooks")
            elif key in ("classwise", "proposal_nums", "iou_thrs", "metric_items"):
                for name in ("val_evaluator", "test_evaluator"):
                    if isinstance(out.get(name), dict):
                        set_path(f"{name}.{key}", value, f"evaluation.{key}", name)
            else:
                raise ConfigConversionError(
                    f"evaluation.{key}",
                    value,
                    "in a 3.x config, evaluation.interval, metric, "
                    "save_best, classwise, proposal_nums, iou_thrs and metric_items are "
                    "applied; set others on val_evaluator / train_cfg.",
                )
    checkpoint = legacy.pop("checkpoint_config", None)
    if checkpoint is not None:
        for key, value in checkpoint.items():
            if key != "type":
                set_path(f"default_hooks.checkpoint.{key}", value, f"checkpoint_config.{key}", "default_hooks")
    log = legacy.pop("log_config", None)
    if log is not None:
        if "interval" in log:
            set_path("default_hooks.logger.interval", log["interval"], "log_config.interval", "default_hooks")
        if any(h.get("type") != "TextLoggerHook" for h in log.get("hooks", [])):
            raise ConfigConversionError(
                "log_config.hooks",
                log["hooks"],
                "in a 3.x config, loggers are visualizer "
                "backends: set visualizer.vis_backends (e.g. TensorboardVisBackend).",
            )
    if legacy:
        runtime: dict[str, Any] = {}
        _engine.convert_runtime(dict(legacy), runtime, Report(), loop, "DetLocalVisualizer", None)
        for key in legacy:
            if key in ("resume_from", "auto_resume"):
                set_path("resume", True, key, "resume")
                if key == "resume_from":
                    set_path("load_from", legacy[key], key, "load_from")
            elif key == "dist_params":
                set_path("env_cfg.dist_cfg", dict(legacy[key]), key, "env_cfg")
            elif key == "cudnn_benchmark":
                set_path("env_cfg.cudnn_benchmark", legacy[key], key, "env_cfg")
            elif key in ("mp_start_method", "opencv_num_threads"):
                set_path(f"env_cfg.mp_cfg.{key}", legacy[key], key, "env_cfg")
            elif key == "gpu_ids":
                report.drop("gpu_ids", "3.x takes devices from the launcher / CUDA_VISIBLE_DEVICES")
    return out, report


_MISSING = object()
