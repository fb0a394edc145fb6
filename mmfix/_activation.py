"""The single, idempotent entry that turns patches on and off and records why.

Every front door (``import mmfix``, sitecustomize, ``.pth``/``.start``,
``mmfix-run``, PYTHONSTARTUP) ends here, so activating twice, or through several
doors at once, patches once.
"""

from __future__ import annotations

import _thread
import os
import sys

from . import _excepthook, _importhooks, _log, _settings
from ._patches import PATCHES

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType
    from typing import Any, Iterable

_lock = _thread.RLock()

# A patch's state, as mmfix.status() reports it.
OFF = "off"  # never activated
PENDING = "pending"  # armed: waiting for its trigger module to be imported
ACTIVE = "active"  # applied
SKIPPED = "skipped"  # apply() declined, with a reason
FAILED = "failed"  # apply() raised: rolled back, originals in place
DISABLED = "disabled"  # switched off by MMFIX_DISABLE / MMFIX_DISABLED_PATCHES
REMOVED = "removed"  # mmfix.disable() undid it


class _PatchState:
    __slots__ = ("name", "state", "reason", "hook", "module")

    def __init__(self, name: str) -> None:
        self.name = name
        self.state = OFF
        self.reason = "not activated"
        self.hook: Any = None
        self.module: Any = None


_patches: dict[str, _PatchState] = {name: _PatchState(name) for name in PATCHES}
_front_doors: list[str] = []
_implicit_import = False


def note_front_door(door: str) -> None:
    with _lock:
        if door not in _front_doors:
            _front_doors.append(door)


def _make_hook(state: _PatchState) -> Any:
    module_name = PATCHES[state.name].module

    def hook(_target: ModuleType) -> None:
        with _lock:
            if state.hook is not hook:  # disabled (or re-enabled) since registration
                return
            state.hook = None
            unsupported = _unsupported_torch()
            if unsupported is not None:
                state.state, state.reason = SKIPPED, unsupported
                return
            try:
                __import__(module_name)
                patch = sys.modules[module_name]
                state.module = patch
                skip = patch.apply()
            except Exception as exc:
                # An exception escaping here would make `import torch` fail.
                # Roll back whatever the patch managed to swap, keep the originals.
                _rollback(state)
                state.state, state.reason = FAILED, f"{type(exc).__name__}: {exc}"
                _log.error(
                    f"patch {state.name!r} could not be applied and was left off ({state.reason}); "
                    f"the original functions stay in place. Set MMFIX_DISABLED_PATCHES={state.name} "
                    "to silence this, and please report it.",
                    key=f"failed:{state.name}",
                )
                return
            if skip:
                state.state, state.reason = SKIPPED, str(skip)
                _log.debug(f"patch {state.name!r} skipped: {skip}")
            else:
                state.state, state.reason = ACTIVE, "applied"
                _log.debug(f"patch {state.name!r} applied")

    return hook


#: The oldest torch mmfix holds its promises on (pyproject.toml says the same): weights_only=True
#: became torch.load's default in 2.6 (before it, a plain torch.load runs a file's code whatever
#: mmfix allows), add_safe_globals takes (object, name) pairs from 2.5, and the check that a
#: mapped load reads what a plain load reads needs torch.utils.serialization (2.7).
OLDEST_TORCH = (2, 7)


_torch_checked: list[str | None] = []


def _unsupported_torch() -> str | None:
    """Why the installed torch is too old for mmfix (said once, as an error), or None. Read from
    the imported module, or from the installed package's ``version.py``: this never imports torch."""
    if not _torch_checked:
        problem, known = _torch_problem()
        if not known:
            # Nothing readable before torch is imported: ask again once it is (its own
            # patches are applied only then, with torch.__version__ at hand).
            return None
        _torch_checked.append(problem)
        if problem is not None:
            # Learnt only when torch was imported (no version.py): what was applied before
            # (patches armed at start) is taken back, so that nothing of mmfix stays applied.
            for state in _patches.values():
                if state.state == ACTIVE:
                    _rollback(state)
                    state.state, state.reason = SKIPPED, problem
    return _torch_checked[0]


def _installed_torch_version() -> str | None:
    """``__version__`` from the ``torch/version.py`` that ``import torch`` would load, without
    executing torch. importlib.metadata would say the same but costs ~35 ms of imports (email,
    zipfile, typing ...) at every interpreter start once the .pth hook is installed; this is a
    few stat calls and one small read. Every torch build (wheel, conda, source) generates that file."""
    for entry in sys.path:
        package = os.path.join(entry or os.curdir, "torch")
        if not os.path.isfile(os.path.join(package, "__init__.py")):
            continue
        try:
            with open(os.path.join(package, "version.py"), encoding="utf-8") as fh:
                for line in fh:
                    name, sep, value = line.partition("=")
                    if sep and name.strip() == "__version__":
                        return value.strip().strip("'\"") or None
        except OSError:
            pass
        return None  # the torch that would be imported has no readable version.py
    return None


def _torch_problem() -> tuple[str | None, bool]:
    """(why this torch is unsupported or None, whether its version was known)."""
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", None)
    if version is None:
        version = _installed_torch_version()
        if version is None:
            return None, torch is not None
    try:
        parts = tuple(int(p) for p in str(version).split("+")[0].split(".")[:2])
    except ValueError:
        return None, True
    if parts >= OLDEST_TORCH:
        return None, True
    reason = (
        f"torch {version} is older than {OLDEST_TORCH[0]}.{OLDEST_TORCH[1]}, the oldest mmfix supports "
        "(before 2.6 a plain torch.load runs a checkpoint's code; mmfix's checks need 2.7)"
    )
    _log.error(
        f"mmfix is off: {reason}. Upgrade torch (pip install 'torch>=2.7'), or uninstall mmfix; nothing of "
        "it is applied in this process.",
        key="unsupported-torch",
        all_ranks=True,
    )
    return reason, True


def _rollback(state: _PatchState) -> None:
    patch = state.module
    if patch is None:
        return
    try:
        patch.remove()
    except Exception as exc:  # pragma: no cover - remove() only undoes swaps
        _log.error(f"patch {state.name!r} could not be rolled back: {exc!r}", key=f"rollback:{state.name}")


def activate(door: str | None = None, only: Iterable[str] | None = None) -> None:
    """Arm every enabled patch (or just ``only``); already armed ones are left alone."""
    settings = _settings.current()
    with _lock:
        if door:
            note_front_door(door)
        if settings.disabled:
            for state in _patches.values():
                if state.state in (OFF, REMOVED):
                    state.state, state.reason = DISABLED, "MMFIX_DISABLE is set"
            return
        _excepthook.install()
        selected = set(PATCHES) if only is None else set(only)
        unknown = selected - set(PATCHES)
        if unknown:
            raise ValueError(
                f"unknown mmfix patch name(s): {', '.join(sorted(unknown))}; known patches are {', '.join(PATCHES)}"
            )
        for name, state in _patches.items():
            if name not in selected or state.state in (ACTIVE, PENDING, SKIPPED):
                continue
            if name in settings.disabled_patches:
                state.state, state.reason = DISABLED, "listed in MMFIX_DISABLED_PATCHES"
                continue
            target = PATCHES[name].trigger
            state.state, state.reason = PENDING, f"waiting for `import {target}`"
            state.hook = _make_hook(state)
            _importhooks.when_imported(target, state.hook)


def deactivate(only: Iterable[str] | None = None) -> None:
    """Remove applied patches and forget pending ones."""
    with _lock:
        names = set(PATCHES) if only is None else set(only)
        for name in names:
            state = _patches[name]
            if state.hook is not None:
                _importhooks.cancel(state.hook)
                state.hook = None
            if state.state in (ACTIVE, SKIPPED):  # a skip may come after part of the work
                _rollback(state)
            if state.state in (ACTIVE, PENDING, SKIPPED, FAILED, DISABLED):
                state.state, state.reason = REMOVED, "mmfix.disable() was called"
        if only is None:
            _excepthook.uninstall()


def activate_at_import() -> None:
    """What ``import mmfix`` does; a front door that imported us re-labels itself."""
    global _implicit_import
    _implicit_import = True
    door = _settings.current().front_door or None
    activate(door)
    run_start_steps()


def run_start_steps() -> None:
    """Each armed patch's step at interpreter start (the registry's ``at_start``), after activation."""
    for name, patch in PATCHES.items():
        if patch.at_start is None or _patches[name].state not in (PENDING, ACTIVE):
            continue
        module_name, _, function = patch.at_start.partition(":")
        try:
            __import__(module_name)
            getattr(sys.modules[module_name], function)()
        except Exception as exc:  # a start step is an early convenience; never break start-up
            _log.debug(f"start step of patch {name!r} skipped: {exc!r}")


def snapshot() -> dict[str, Any]:
    with _lock:
        doors = list(_front_doors) or (["import"] if _implicit_import else [])
        return {
            "enabled": not _settings.current().disabled,
            "front_doors": doors,
            "patches": {
                name: {
                    "state": state.state,
                    "reason": state.reason,
                    "target": PATCHES[name].trigger,
                    "description": PATCHES[name].summary,
                }
                for name, state in _patches.items()
            },
        }
