"""Every ``MMFIX_*`` environment variable, parsed in one place.

This module is imported by ``import mmfix`` (and so by the ``.pth`` hook at every
interpreter start), so it only touches ``os`` and ``sys``: no ``typing``,
``dataclasses`` or ``logging``, each of which costs milliseconds at start-up.

A bad value never raises here: raising inside a ``.pth`` line or a
``sitecustomize`` would break every Python process of the environment. Instead
the problem is written to stderr, naming the variable and the accepted values,
and the documented default is used. It is written once per job, not once per
process: only rank 0 (or a process with no rank) reports, and a process that
reported marks its environment (MMFIX_SETTINGS_REPORTED) so that the processes
it starts (torchrun, its workers, a launched job) do not repeat it.
"""

from __future__ import annotations

import os
import sys

from . import _message
from ._patches import PATCHES

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Mapping

#: Patch names users can switch off with MMFIX_DISABLED_PATCHES, so a misspelt name is
#: reported instead of silently ignored. patches/__init__ is plain data: cheap to import.
PATCH_NAMES = tuple(PATCHES)

_TRUE = frozenset(("1", "true", "yes", "on"))
_FALSE = frozenset(("0", "false", "no", "off"))
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_HOLD_MODES = ("mmengine", "all", "off")
_MMAP_MODES = ("auto", "on", "off")

#: name -> (default, meaning) — the README table is checked against this by a test.
DOCUMENTED = {
    "MMFIX_DISABLE": ("0", "1 turns mmfix off entirely: `import mmfix` and every front door change nothing."),
    "MMFIX_DISABLED_PATCHES": ("", "Comma-separated patch names to leave off, or `*` for all."),
    "MMFIX_LOG_LEVEL": ("INFO", "DEBUG, INFO, WARNING or ERROR."),
    "MMFIX_CPU_MAP": ("1", "0 restores stock map_location (storages go back to the device they were saved on)."),
    "MMFIX_TRUSTED_GLOBALS": ("", "Comma-separated `module.Name` globals you trust checkpoints to use."),
    "MMFIX_HOLD_WEIGHTS_ONLY": (
        "mmengine",
        "Which explicit `weights_only=False` callers are held to the safe loader: mmengine, all, off.",
    ),
    "MMFIX_MMAP": ("auto", "auto: a node's ranks share one sealed copy; 1: map the file itself; 0: plain reads."),
    "MMFIX_SHARED_LOAD_WAIT": (
        "300",
        "Seconds a rank waits for the node's reading rank, which offers its copy as long.",
    ),
    "MMFIX_FIND_UNUSED_PARAMETERS": (
        "0",
        "1 turns DDP's find_unused_parameters on automatically (with a notice of its cost).",
    ),
    "MMFIX_PARTIAL_LOAD": (
        "0",
        "1 keeps MMEngine's warning when a 2.x run's checkpoint leaves model keys missing or unexpected "
        "(default: one error naming them).",
    ),
    "MMFIX_MEMORY_REPORT": ("0", "1 prints every rank's peak memory at the end of a run, flagging outliers."),
    "MMFIX_LEGACY_ANY_PARSER": (
        "0",
        "1 translates 2.x flags for scripts whose parser is not shaped like an OpenMMLab tool too.",
    ),
    "MMFIX_ALLOW_CPU_OVERSUBSCRIBE": (
        "0",
        "1 lets `--gpus N` on a host without CUDA start more CPU workers than this process has cores.",
    ),
    "MMFIX_OPS_TORCHVISION": (
        "1",
        "0 keeps mmfix's mmcv ops off torchvision's kernels (pure PyTorch everywhere; same values).",
    ),
    "MMFIX_LAUNCHED": ("", "Set by mmfix in the processes it launched (a loop guard); not for users."),
    "MMFIX_TRANSLATE_ONLY": (
        "",
        "Set by `mmfix translate` to print the translation instead of running; not for users.",
    ),
    "MMFIX_FRONT_DOOR": ("", "Set by `mmfix-run` for its children; not for users."),
    "MMFIX_SETTINGS_REPORTED": (
        "",
        "Set by mmfix once it has reported a bad MMFIX_* value, so child processes do not repeat it; not for users.",
    ),
}


_RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_problems: list[str] = []  # collected while one Settings is parsed, reported after it


def _warn(message: str) -> None:
    _problems.append(message)


def _report(env: Mapping[str, str]) -> None:
    problems = list(_problems)
    _problems.clear()
    if not problems or env.get("MMFIX_SETTINGS_REPORTED"):
        return
    rank = next((env[name] for name in _RANK_VARIABLES if env.get(name, "").strip()), "0")
    if rank.strip() != "0":
        return
    # logging is not imported yet (and may never be); stderr is the one channel
    # that always reaches the user at interpreter start.
    sys.stderr.write("".join(_message.line("WARNING", p) for p in problems))
    if env is os.environ:
        os.environ["MMFIX_SETTINGS_REPORTED"] = "1"


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    _warn(
        f"{name}={env[name]!r} is not a yes/no value; use 1/0, true/false, yes/no or "
        f"on/off. Using the default ({'1' if default else '0'})."
    )
    return default


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    for choice in choices:
        if raw.lower() == choice.lower():
            return choice
    _warn(f"{name}={raw!r} is not one of {', '.join(choices)}. Using the default ({default}).")
    return default


def _mmap_mode(env: Mapping[str, str]) -> str:
    """MMFIX_MMAP: auto (share between the ranks of a node), on (map the file), off."""
    raw = env.get("MMFIX_MMAP", "").strip().lower()
    if raw in _TRUE:
        return "on"
    if raw in _FALSE:
        return "off"
    if raw and raw != "auto":
        _warn(f"MMFIX_MMAP={env['MMFIX_MMAP']!r} is not auto, 1 or 0. Using the default (auto).")
    return "auto"


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        _warn(f"{name}={raw!r} is not a positive number of seconds. Using the default ({default:g}).")
        return default
    return value


def _names(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    raw = env.get(name, "")
    return tuple(part.strip() for part in raw.split(",") if part.strip())


class Settings:
    """The parsed switches; immutable so no code path can drift from the environment."""

    __slots__ = (
        "disabled",
        "disabled_patches",
        "log_level",
        "cpu_map",
        "trusted_globals",
        "hold_weights_only",
        "mmap",
        "shared_load_wait",
        "find_unused_parameters",
        "memory_report",
        "partial_load",
        "legacy_any_parser",
        "allow_cpu_oversubscribe",
        "ops_torchvision",
        "launched",
        "translate_only",
        "front_door",
    )

    disabled: bool
    disabled_patches: frozenset[str]
    log_level: str
    cpu_map: bool
    trusted_globals: tuple[str, ...]
    hold_weights_only: str
    mmap: str
    shared_load_wait: float
    find_unused_parameters: bool
    memory_report: bool
    partial_load: bool
    legacy_any_parser: bool
    allow_cpu_oversubscribe: bool
    ops_torchvision: bool
    launched: bool
    translate_only: bool
    front_door: str

    def __init__(self, env: Mapping[str, str]) -> None:
        values = {
            "disabled": _bool(env, "MMFIX_DISABLE", False),
            "disabled_patches": self._parse_disabled_patches(env),
            "log_level": _choice(env, "MMFIX_LOG_LEVEL", _LOG_LEVELS, "INFO"),
            "cpu_map": _bool(env, "MMFIX_CPU_MAP", True),
            "trusted_globals": _names(env, "MMFIX_TRUSTED_GLOBALS"),
            "hold_weights_only": _choice(env, "MMFIX_HOLD_WEIGHTS_ONLY", _HOLD_MODES, "mmengine"),
            "mmap": _mmap_mode(env),
            "shared_load_wait": _seconds(env, "MMFIX_SHARED_LOAD_WAIT", 300.0),
            "find_unused_parameters": _bool(env, "MMFIX_FIND_UNUSED_PARAMETERS", False),
            "memory_report": _bool(env, "MMFIX_MEMORY_REPORT", False),
            "partial_load": _bool(env, "MMFIX_PARTIAL_LOAD", False),
            "legacy_any_parser": _bool(env, "MMFIX_LEGACY_ANY_PARSER", False),
            "allow_cpu_oversubscribe": _bool(env, "MMFIX_ALLOW_CPU_OVERSUBSCRIBE", False),
            "ops_torchvision": _bool(env, "MMFIX_OPS_TORCHVISION", True),
            "launched": _bool(env, "MMFIX_LAUNCHED", False),
            "translate_only": _bool(env, "MMFIX_TRANSLATE_ONLY", False),
            "front_door": env.get("MMFIX_FRONT_DOOR", "").strip(),
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)
        _report(env)

    @staticmethod
    def _parse_disabled_patches(env: Mapping[str, str]) -> frozenset[str]:
        names = _names(env, "MMFIX_DISABLED_PATCHES")
        if "*" in names:
            return frozenset(PATCH_NAMES)
        unknown = [n for n in names if n not in PATCH_NAMES]
        if unknown:
            _warn(
                f"MMFIX_DISABLED_PATCHES names unknown patch(es) {', '.join(unknown)}; "
                f"known patches are {', '.join(PATCH_NAMES)} (or * for all). "
                "The unknown names are ignored."
            )
        return frozenset(n for n in names if n in PATCH_NAMES)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("mmfix settings are read-only; set MMFIX_* variables instead")

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"Settings({fields})"


def set_variables(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The MMFIX_* variables present (for reports such as `mmfix doctor`)."""
    env = os.environ if env is None else env
    return {k: v for k, v in env.items() if k.startswith("MMFIX_")}


_current: Settings | None = None


def current() -> Settings:
    """The settings parsed from ``os.environ`` the first time they were needed."""
    global _current
    if _current is None:
        _current = Settings(os.environ)
    return _current


def refresh() -> Settings:
    """Parse ``os.environ`` again (``mmfix.enable()`` does, so a changed variable counts)."""
    global _current
    _current = Settings(os.environ)
    return _current
