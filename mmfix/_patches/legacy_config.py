"""MMDetection 2.x config files load as their 3.x equivalent; 2.x keys in 3.x configs are applied.

``Config.fromfile`` of a 2.x config returns the converted config (the merged 2.x
dict is converted, so ``_base_`` files, ``{{_base_.x}}`` and ``_delete_`` have
already done their work). ``merge_from_dict`` -- what ``--cfg-options`` calls --
merges 2.x keys into the 2.x config and converts again, so
``data.samples_per_gpu=1`` means what it meant in 2.x. A 3.x config costs a few
key lookups.
"""

from __future__ import annotations

import copy
import sys
from typing import Any, Callable

from .. import _log, _wrapping
from .._configs._files import own_keys as _own_keys

_swaps = _wrapping.SwapSet()
_original_merge: Callable[..., Any] | None = None
_STATE = "_mmfix_legacy_config"  # attribute on a converted Config: what a re-conversion needs


class _Legacy:
    __slots__ = ("source", "converted", "filename", "toolbox")

    def __init__(self, source: dict[str, Any], converted: dict[str, Any], filename: str, toolbox: str) -> None:
        self.source = source  # the merged 2.x dict
        self.converted = converted  # what convert() returned for it, to see later edits
        self.filename = filename
        self.toolbox = toolbox  # whose rules converted it (options are converted by the same)


def apply() -> str | None:
    from mmengine.config import Config

    global _original_merge
    _swaps.wrap(Config, "fromfile", _fromfile)
    # a 2.x option is merged into the 2.x source config by the original method
    _original_merge = _swaps.wrap(Config, "merge_from_dict", _merge_from_dict).original
    return None


def remove() -> None:
    _swaps.undo_all()


def _fail(exc: BaseException) -> None:
    # A SystemExit carrying a message: printed here because the interpreter prints
    # nothing for SystemExit(2), and the tools call fromfile outside any handler of ours.
    sys.stderr.write(f"{exc}\n")
    sys.stderr.flush()


def _fromfile(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from .._configs import classify, rules_for

    # custom_imports are imported after conversion: a 2.x `mmcls.models` must become mmpretrain first.
    # Config.fromfile(filename, use_predefined_variables=True, import_custom_modules=True, ...)
    want_imports = _wrapping.argument(args, kwargs, 2, "import_custom_modules", True)
    args, kwargs = _wrapping.with_argument(args, kwargs, 2, "import_custom_modules", False)
    cfg = wrapped(*args, **kwargs)
    filename = str(_wrapping.argument(args, kwargs, 0, "filename"))
    kind = classify(cfg._cfg_dict)
    try:
        found = _toolbox(cfg, kind, filename) if kind != "3.x" else None
        toolbox = rules_for(found) if found is not None else None
        if kind == "2.x" and toolbox is not None:
            cfg = _convert_2x(cfg, filename, toolbox, found is not None and found.toolbox is not None)
        elif kind == "mixed" and toolbox == "mmdet":  # another toolbox's current-format config: stock
            cfg = _apply_mixed(cfg, filename, _own_keys(filename), "the file")
    except SystemExit:
        raise  # ConfigConversionError: already explained
    except Exception as exc:  # a bug of ours must not stop a config from loading
        _log.error(
            f"could not convert {filename} ({type(exc).__name__}: {exc}); it is loaded unchanged. "
            "Please report this with the config.",
            key=f"convert-bug:{filename}",
        )
    if want_imports and cfg.get("custom_imports") and not _lazy(args, kwargs, filename):
        _import_custom_modules(cfg["custom_imports"])
    return cfg


def loader() -> Any:
    """What is loading a config now: the toolbox module calling ``Config.fromfile`` (the first
    frame outside mmfix, MMEngine and wrapt), the script run, MMEngine's current default scope."""
    from .._configs import Loader

    caller = script = None
    frame = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name.split(".")[0] not in ("mmfix", "mmengine", "wrapt", "importlib", "runpy"):
            if name == "__main__":
                script = frame.f_globals.get("__file__")
            else:
                caller = name
            break
        frame = frame.f_back  # type: ignore[assignment]
    scope = None
    try:
        from mmengine.registry import DefaultScope

        current = DefaultScope.get_current_instance()
        scope = current.scope_name if current is not None else None
    except Exception:  # a diagnostic input: without it the config's own contents decide
        pass
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else None
    return Loader(caller, script or argv0, scope)


def _toolbox(cfg: Any, kind: str, filename: str) -> Any:
    """The toolbox of a 2.x-era config (a ``Detection``); another toolbox's old-format config
    raises ConfigConversionError (its conversion does not exist yet)."""
    from .._configs import ConfigConversionError, check_toolbox
    from .._configs._files import config_files

    try:
        found = check_toolbox(cfg._cfg_dict, kind, filename, config_files(filename), loader())
    except ConfigConversionError as exc:
        _fail(exc)
        raise
    if found.toolbox not in (None, "mmdet") and kind != "2.x":
        _log.debug(f"{filename}: {found.toolbox}'s current-format config ({found.evidence}): left as stock")
    return found


def _lazy(args: tuple[Any, ...], kwargs: dict[str, Any], filename: str) -> bool:
    """Whether MMEngine loaded the file as a lazy-import (pure Python) config: its fromfile never
    imports custom_imports for those, so neither do we."""
    from mmengine.config import Config

    lazy = _wrapping.argument(args, kwargs, 4, "lazy_import", None)
    if lazy is None:
        is_lazy = getattr(Config, "_is_lazy_import", None)
        return bool(is_lazy(filename)) if is_lazy is not None else False
    return bool(lazy)


def _import_custom_modules(custom_imports: Any) -> None:
    """MMEngine's own step of Config.fromfile, moved after conversion: the same call, and on failure
    the same error (ImportError, MMEngine's text, the original as its cause) that stock raises."""
    from mmengine.utils import import_modules_from_strings

    try:
        import_modules_from_strings(**custom_imports)
    except ImportError as e:
        # Word for word mmengine.config.Config.fromfile's (0.10): users and tools match on it.
        err_msg = f"Failed to import custom modules from {custom_imports}, the current sys.path is: "
        for p in sys.path:
            err_msg += f"\n    {p}"
        err_msg += (
            "\nYou should set `PYTHONPATH` to make `sys.path` include the directory which contains your custom module"
        )
        raise ImportError(err_msg) from e


def _convert_2x(cfg: Any, filename: str, toolbox: str = "mmdet", known: bool = True) -> Any:
    from mmengine.config import Config

    from .._configs import ConfigConversionError, convert
    from .._configs._toolbox import TOOLBOXES

    source = cfg.to_dict()
    try:
        converted, report = convert(source, toolbox)
    except ConfigConversionError as exc:
        _fail(exc)
        raise
    new = Config(
        copy.deepcopy(converted),
        cfg_text=cfg.text,
        filename=filename,
        env_variables=getattr(cfg, "env_variables", None),
    )
    object.__setattr__(new, _STATE, _Legacy(source, new.to_dict(), filename, toolbox))
    old, current, _ = TOOLBOXES[toolbox]
    if isinstance(converted.get("model"), dict):
        from .legacy_checkpoint import note_model_from_2x

        note_model_from_2x(converted["model"].get("type"), f"an {old} config")
    what = (
        f"an {old} config"
        if known
        else "a 2.x-era config whose toolbox no model or dataset type tells (read as MMDetection 2.x's)"
    )
    _log.info(
        f"{filename} is {what}: converted to {current} in memory ({report.summary()}). "
        f"`mmfix convert-config {filename} -o NEW.py` writes the result out; add --diff to see each key.",
        key=f"legacy-config:{filename}",
    )
    for text in report.differences:
        _log.warning(f"{filename}: {text}.", key=f"legacy-config-differs:{text}")
    _say_missing_meta_files(converted, filename)
    return new


def _say_missing_meta_files(converted: dict[str, Any], filename: str) -> None:
    # 2.x needed no such file for training, so a 2.x user has none: say so before the dataset fails on it.
    try:
        from .._configs._image_metas import missing_meta_files

        missing = missing_meta_files(converted)
    except Exception as exc:  # a diagnostic must never cost the user the conversion that succeeded
        _log.debug(f"checking Open Images meta files failed: {exc!r}", key=f"legacy-config-metas-failed:{filename}")
        return
    if missing:
        _log.warning(
            f"{filename}: 3.x's OpenImages datasets read image sizes from meta_file, and "
            + "; ".join(
                f"{where} names none" if path is None else f"{where}.meta_file {path} does not exist"
                for where, path in missing
            )
            + f". Make the missing file(s) once with `mmfix image-metas {filename}` (2.x read the sizes from "
            "the images).",
            key=f"legacy-config-metas:{filename}",
        )


def _apply_mixed(cfg: Any, filename: str, own: set[str], where: str) -> Any:
    from .._configs import ConfigConversionError, apply_legacy_keys

    try:
        out, report = apply_legacy_keys(cfg.to_dict(), own)
    except ConfigConversionError as exc:
        _fail(exc)
        raise
    from mmengine.config import ConfigDict

    object.__setattr__(cfg, "_cfg_dict", ConfigDict(out))
    moved = "; ".join(f"{old} -> {new}" for old, new in report.converted)
    dropped = "; ".join(f"{key} dropped ({why})" for key, why in report.dropped)
    _log.warning(
        f"{filename}: 2.x keys in a 3.x config (ignored by 3.x itself), applied from {where}: "
        f"{moved}{'; ' + dropped if dropped else ''}",
        key=f"mixed-config:{filename}:{moved}",
    )
    return cfg


def _merge_from_dict(wrapped: Callable[..., Any], cfg: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from .._configs import LEGACY_KEYS, ConfigConversionError, convert, rules_for

    options = _wrapping.argument(args, kwargs, 0, "options", {})
    state: _Legacy | None = cfg.__dict__.get(_STATE)
    if state is None:
        result = wrapped(*args, **kwargs)
        tops = {str(k).split(".")[0] for k in options}
        if tops & LEGACY_KEYS and rules_for(_toolbox(cfg, "mixed", cfg.filename or "config")) == "mmdet":
            _apply_mixed(cfg, cfg.filename or "config", {str(k) for k in options}, "--cfg-options")
        return result
    from mmengine.config import Config, ConfigDict

    # 2.x keys (and every key the 2.x file has) go into the 2.x config, which is converted again.
    before = {
        k: v for k, v in options.items() if str(k).split(".")[0] in state.source or str(k).split(".")[0] in LEGACY_KEYS
    }
    after = {k: v for k, v in options.items() if k not in before}
    if before:
        source = Config(copy.deepcopy(state.source))
        assert _original_merge is not None
        _original_merge(source, before, *args[1:], **{k: v for k, v in kwargs.items() if k != "options"})
        try:
            converted, report = convert(source.to_dict(), state.toolbox)
        except ConfigConversionError as exc:
            _fail(exc)
            raise
        # Keep what the program set on the converted config since (train.py sets launcher, work_dir;
        # a script sets model.test_cfg.score_thr), key by key: the options win where both set one.
        merged = reapply_edits(state.converted, cfg.to_dict(), converted)
        object.__setattr__(cfg, "_cfg_dict", ConfigDict(merged))
        object.__setattr__(
            cfg, _STATE, _Legacy(source.to_dict(), Config(converted).to_dict(), state.filename, state.toolbox)
        )
        _log.info(
            f"2.x options {', '.join(before)} merged into the 2.x config before conversion ({report.summary()})",
            key=f"legacy-options:{sorted(before)}",
        )
    if after or not before:
        args, kwargs = _wrapping.with_argument(args, kwargs, 0, "options", after)
        return wrapped(*args, **kwargs)
    return None


_MISSING = object()


def reapply_edits(old: dict[str, Any], current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new`` (the 2.x config converted again, with the options) plus the edits a program made to
    ``old`` (the earlier conversion) to get ``current``, found key by key through nested dicts:
    a value it set, a key it added or deleted. Where the options changed the same key, they win
    (they came later)."""
    out = copy.deepcopy(new)

    def walk(o: dict[str, Any], c: dict[str, Any], n: dict[str, Any], target: dict[str, Any]) -> None:
        for key in list(c) + [k for k in o if k not in c]:
            ov, cv, nv = o.get(key, _MISSING), c.get(key, _MISSING), n.get(key, _MISSING)
            if cv is _MISSING:  # the program deleted it
                if nv is not _MISSING and nv == ov:
                    del target[key]
            elif ov is _MISSING:  # the program added it
                if nv is _MISSING:
                    target[key] = copy.deepcopy(cv)
            elif cv != ov:  # the program changed it
                if isinstance(cv, dict) and isinstance(ov, dict) and isinstance(nv, dict):
                    walk(ov, cv, nv, target[key])
                elif nv is _MISSING or nv == ov:
                    target[key] = copy.deepcopy(cv)

    walk(old, current, new, out)
    return out
