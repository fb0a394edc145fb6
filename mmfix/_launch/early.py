"""Legacy commands handled at interpreter start, before the script runs: a ``--gpus N`` launch
from the script's source, torchrun inside an srun step stopped in torchrun's own process, and
``mmfix translate``'s static translation. The parse-time hook (``_patches.legacy_cli``) handles
everything the source cannot say for certain.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .. import _settings
from .checks import gpus_without_cuda, run_checks, usable_cpus
from .report import announce, translated_command, translation_data

_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _is_torchrun(argv: list[str]) -> bool:
    if len(argv) > 1 and os.path.basename(argv[1]) == "torchrun":
        return True
    return any(a == "-m" and b in _TORCHRUN_MODULES for a, b in zip(argv, argv[1:]))


def stop_torchrun_in_srun() -> None:
    """torchrun started by each task of a multi-task srun step: stop before it spawns workers.

    Caught in torchrun's own process, the mistake is reported once (by task 0; the
    others exit quietly), instead of by every worker of every task and then again
    by torchrun's ChildFailedError summary.
    """
    from .._ranks import in_srun_step, srun_tasks

    argv = list(getattr(sys, "orig_argv", sys.argv))
    if not in_srun_step() or "TORCHELASTIC_RUN_ID" in os.environ or srun_tasks() < 2 or not _is_torchrun(argv):
        return
    from .translate import torchrun_in_srun_message

    if os.environ.get("SLURM_PROCID") == "0":
        script = next((a for a in argv[2:] if a.endswith(".py")), "tools/train.py")
        sys.stderr.write(f"mmfix: error: {torchrun_in_srun_message(srun_tasks(), script)}\n")
        sys.stderr.flush()
    os._exit(2)  # at start-up: nothing has run yet


def torchrun_script(argv: list[str]) -> tuple[str, list[str]] | None:
    """The script torchrun / torch.distributed.launch was asked to start, and its arguments
    (None when this is not such a launcher process, or it starts a module, not a file)."""
    if not _is_torchrun(argv):
        return None
    start = 2 if os.path.basename(argv[1]) == "torchrun" else argv.index("-m") + 2
    for index in range(start, len(argv)):
        if argv[index].endswith(".py") and os.path.isfile(argv[index]):
            return argv[index], argv[index + 1 :]
    return None


def refuse_unknown_in_launcher() -> None:
    """torchrun / torch.distributed.launch starting an OpenMMLab tool (``dist_train.sh``): an
    argument that neither the tool's parser nor the translator accepts is refused here, once,
    before any worker starts, instead of by every worker and then by torchrun's summary.

    Only the arguments are judged here (as a worker of the job would see them); everything else
    is left to the workers, which translate the command line as usual.
    """
    if "LOCAL_RANK" in os.environ or "TORCHELASTIC_RUN_ID" in os.environ:
        return  # a worker, not the launcher
    found = torchrun_script(list(getattr(sys, "orig_argv", sys.argv)))
    if found is None:
        return
    script, args = found
    try:
        with open(script, encoding="utf-8") as fh:
            source = fh.read()
    except (OSError, UnicodeDecodeError):
        return
    from .static_parser import parser_info_from_source, parses_strictly, script_imports
    from .translate import UnknownArgumentsError, translate

    info = parser_info_from_source(source, script)
    if info is None or not parses_strictly(source):
        return  # the parser is not known for certain, or the script keeps unknown arguments itself
    worker = {**os.environ, "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "mmfix-check"}
    try:
        translate(
            args,
            worker,
            info,
            visible_gpus=gpus_without_cuda(),
            program=script,
            imports=script_imports(source),
            strict=True,
        )
    except UnknownArgumentsError as exc:
        sys.stderr.write(f"{info.usage or ''}{os.path.basename(script)}: error: {exc.message}\n")
        sys.stderr.flush()
        os._exit(2)  # in the launcher, before it started any worker
    except Exception:
        return  # anything else is the workers' to report, in their own words


def launch_early(launch_flags: tuple[str, ...]) -> None:
    """Start a legacy `--gpus N` launch at interpreter start, before the script's imports.

    Only when the script's parser can be read from its source with certainty;
    otherwise the parse-time hook decides, exactly as it would have anyway.
    ``launch_flags``: the 2.x flags that start a launch (one of them is in sys.argv).
    """
    argv = sys.argv
    if not argv[0].endswith(".py"):
        return
    settings = _settings.current()
    if settings.launched or settings.translate_only or "LOCAL_RANK" in os.environ or "SLURM_STEP_ID" in os.environ:
        return
    try:
        with open(argv[0], encoding="utf-8") as fh:
            source = fh.read()
    except OSError:
        return
    if any(f"'{flag}'" in source or f'"{flag}"' in source for flag in launch_flags):
        return  # the script handles these flags itself (a 2.x train.py): never ours to translate
    from . import execute
    from .static_parser import parser_info_from_source, parses_strictly, script_imports
    from .translate import LegacyUsageError, UnknownArgumentsError, translate

    info = parser_info_from_source(source, argv[0])
    if info is None:
        return
    try:
        plan = run_checks(
            translate(
                argv[1:],
                os.environ,
                info,
                visible_gpus=gpus_without_cuda(),
                program=argv[0],
                usable_cpus=usable_cpus(),
                allow_cpu_oversubscribe=settings.allow_cpu_oversubscribe,
                imports=script_imports(source),
                strict=parses_strictly(source),
            )
        )
    except LegacyUsageError as exc:
        prog = os.path.basename(argv[0])
        usage = info.usage if isinstance(exc, UnknownArgumentsError) and info.usage else ""
        sys.stderr.write(f"{usage}{prog}: error: {exc.message}\n")
        sys.stdout.flush()
        os._exit(2)  # at start-up: nothing of the script has run, nothing to clean up
    if plan.launch is None:
        return  # in-place translations happen at parse time, against the real parser
    announce(list(getattr(sys, "orig_argv", argv)), translated_command(plan), plan)
    execute.launch(plan)


def translate_statically(python: str, script: str, args: list[str]) -> dict[str, Any] | None:
    """`mmfix translate` without running anything: the script's parser read from its source.

    None when the source does not say for certain what the parser accepts; then only
    running the script up to its parse can tell (``--run-to-parse``). Raises
    LegacyUsageError for a command line the launch would refuse. Files (config,
    checkpoints) are not checked: the translation is shown either way.
    """
    from . import execute
    from .static_parser import parser_info_from_source, parses_strictly, script_imports
    from .translate import UnknownArgumentsError, translate

    with open(script, encoding="utf-8") as fh:
        source = fh.read()
    info = parser_info_from_source(source, script)
    if info is None:
        return None
    settings = _settings.current()
    try:
        plan = run_checks(
            translate(
                args,
                os.environ,
                info,
                visible_gpus=gpus_without_cuda(),
                program=script,
                usable_cpus=usable_cpus(),
                allow_cpu_oversubscribe=settings.allow_cpu_oversubscribe,
                imports=script_imports(source),
                strict=parses_strictly(source),
            ),
            check_files=False,
        )
    except UnknownArgumentsError as exc:
        exc.usage = info.usage or ""
        raise
    if plan.launch is not None:
        command = execute.torchrun_argv(plan, [os.path.abspath(script)], python)
    else:
        command = [python, script, *plan.argv]
    return translation_data([python, script, *args], plan, None, command)
