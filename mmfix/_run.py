"""``mmfix-run CMD ARGS…``: run a command with mmfix active in it and its Python children.

Like ``ddtrace-run``: our bootstrap ``sitecustomize`` goes first on PYTHONPATH
(it chains to any other sitecustomize), and the command *replaces* this process
through ``exec``. Exit status, signals and the process id are therefore the
command's own, with nothing in between to forward or lose them.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import NoReturn

from ._errors import MmfixUsageError

BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bootstrap")


def environment_for(env: dict[str, str]) -> dict[str, str]:
    """The environment a command gets: bootstrap first on PYTHONPATH, door recorded."""
    env = dict(env)
    entries = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if BOOTSTRAP_DIR not in entries:
        entries.insert(0, BOOTSTRAP_DIR)
    env["PYTHONPATH"] = os.pathsep.join(entries)
    env["MMFIX_FRONT_DOOR"] = "mmfix-run"
    return env


def run(argv: list[str]) -> NoReturn:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise MmfixUsageError(
            "mmfix-run: no command given. Usage: mmfix-run COMMAND [ARGS...], e.g. "
            "`mmfix-run python tools/train.py configs/my_config.py`."
        )
    env = environment_for(dict(os.environ))
    program = argv[0]
    if os.sep not in program and shutil.which(program, path=env.get("PATH")) is None:
        raise MmfixUsageError(
            f"mmfix-run: command not found: {program!r}. Check the spelling, or give its full path.",
            code=127,
        )
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(program, argv, env)
    except OSError as exc:
        raise MmfixUsageError(f"mmfix-run: cannot run {program!r}: {exc.strerror}.", code=126) from None
