"""What a translation shows: the one log line of a launch, and ``mmfix translate``'s output."""

from __future__ import annotations

import os
import sys
from typing import Any

from .. import _log
from .plan import Plan

TRANSLATION_MARKER = "MMFIX-TRANSLATION "


def translated_command(plan: Plan) -> list[str]:
    from . import execute

    if plan.launch is not None:
        return execute.torchrun_argv(plan, execute.script_command())
    prefix = list(getattr(sys, "orig_argv", [sys.executable, sys.argv[0]]))
    prefix = prefix[: len(prefix) - (len(sys.argv) - 1)]
    return prefix + list(plan.argv)


def announce(original: list[str], command: list[str], plan: Plan) -> None:
    """The one log line (rank 0) showing what ran instead of what was typed, and the warnings."""
    from .execute import describe

    env_note = " ".join(f"{k}={v} " for k, v in plan.env.items())
    _log.info(
        f"command line translated: {describe(original)}  ->  {env_note}{describe(command)}  ({'; '.join(plan.notes)})",
        key="translated",
    )
    for warning in plan.warnings:
        _log.warning(warning, key=f"translate:{warning}")


def translation_data(
    original: list[str], plan: Plan | None, reason: str | None, command: list[str] | None
) -> dict[str, Any]:
    """What `mmfix translate` shows: the original, the translated command, its environment and notes."""
    data: dict[str, Any] = {"original": original, "rules": plan.rules if plan is not None else ""}
    if plan is None or not plan.changed:
        data.update(
            changed=False,
            reason=reason,
            command=original,
            env={},
            notes=[],
            warnings=[] if plan is None else list(plan.warnings),
        )
    else:
        data.update(
            changed=True,
            command=command,
            env=dict(plan.env),
            notes=list(plan.notes),
            warnings=list(plan.warnings),
            launch=None if plan.launch is None else vars(plan.launch),
        )
    return data


def print_translation(original: list[str], plan: Plan | None, reason: str | None) -> None:
    import json

    command = translated_command(plan) if plan is not None and plan.changed else None
    sys.stdout.write(TRANSLATION_MARKER + json.dumps(translation_data(original, plan, reason, command)) + "\n")
    sys.stdout.flush()
    os._exit(0)  # print, never run: nothing of the script may execute past this point
