"""The one place that replaces the process to start torchrun.

``os.execve`` rather than a child process: torchrun then *is* the command the
user started, so Ctrl-C, SIGTERM from a scheduler, and the exit status reach it
and its workers directly, with no parent in between to forward or lose them,
and nothing left behind when it ends.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Mapping, NoReturn, Sequence

from .._run import environment_for
from .plan import Plan


def script_command() -> list[str]:
    """How the running script was started, as torchrun's program arguments."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None) and spec.name != "__main__":
        return ["-m", spec.name.removesuffix(".__main__")]
    return [os.path.abspath(sys.argv[0])]


def torchrun_argv(plan: Plan, program: Sequence[str], python: str | None = None) -> list[str]:
    assert plan.launch is not None
    return [python or sys.executable, "-m", "torch.distributed.run", *plan.launch.torchrun_args(), *program, *plan.argv]


def worker_environment(plan: Plan, env: Mapping[str, str]) -> dict[str, str]:
    """The launch's environment: mmfix active in every worker, the plan's variables, a loop guard."""
    out = environment_for(dict(env))
    out.update(plan.env)
    out["MMFIX_LAUNCHED"] = "1"
    return out


def describe(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def launch(plan: Plan) -> NoReturn:
    """Become torchrun running the translated command."""
    reexec(torchrun_argv(plan, script_command()), plan)


def reexec(command: Sequence[str], plan: Plan) -> NoReturn:
    """Become ``command`` (always run by this interpreter), with the plan's environment."""
    env = worker_environment(plan, os.environ)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, list(command), env)
