"""Legacy 2.x command lines, translated the moment the script parses its command line.

The hook sits on ``ArgumentParser.parse_known_args`` (``parse_args`` calls it)
and acts once per process, only for the parse of the real command line made by
the ``__main__`` script: libraries parsing their own lists, and every program
whose parser is not shaped like an OpenMMLab tool, are left alone.
"""
from __future__ import annotations

import os
import sys

from .. import _log, _settings, _wrapping

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable

    from ..launch.plan import Plan

# The translator, its plan types and the executor are imported inside the functions
# that use them: this module is imported with argparse, in every Python program.

TRANSLATION_MARKER = "MMFIX-TRANSLATION "
_swaps = _wrapping.SwapSet()
_done = False


def apply() -> str | None:
    # argparse is imported by nearly every Python program (pip included, once the .pth
    # hook is installed): stay out of all of them unless the running script could be
    # an OpenMMLab tool, which costs one read of the script and nothing else.
    settings = _settings.current()
    if not (settings.legacy_any_parser or settings.translate_only) and not _script_mentions_launcher():
        return "the running program is not an OpenMMLab-shaped tool (its script never mentions --launcher)"
    import argparse

    _swaps.wrap(argparse.ArgumentParser, "parse_known_args", _parse_known_args)
    return None


def _script_mentions_launcher() -> bool:
    path = sys.argv[0] if sys.argv else ""
    if not path or path in ("-c", "-m") or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as fh:
            return b"--launcher" in fh.read(4 << 20)
    except OSError:
        return False


def remove() -> None:
    global _done
    _swaps.undo_all()
    _done = False


def _called_from_main() -> bool:
    # parse_args() calls parse_known_args(): argparse's own frames are not the caller
    return _wrapping.calling_module(also_skip=("argparse",)) == "__main__"


def _strict_parse() -> bool:
    """Whether the script called parse_args (unknown arguments are an error), not parse_known_args."""
    frame = sys._getframe(1)
    while True:
        name = frame.f_globals.get("__name__", "")
        if name == "argparse" and frame.f_code.co_name in ("parse_args", "parse_intermixed_args"):
            return True
        if name != "argparse" and not name.startswith(("mmfix.", "wrapt")):
            return False
        if frame.f_back is None:
            return False
        frame = frame.f_back


def _script_facts(path: str) -> tuple[frozenset[str], bool]:
    """The packages the script imports, and whether it parses strictly (read from its source)."""
    from ..launch.static_parser import parses_strictly, script_imports

    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read(4 << 20)
    except (OSError, UnicodeDecodeError):
        return frozenset(), True
    return script_imports(source), parses_strictly(source)


def _visible_gpus() -> int | None:
    try:
        import torch  # the tools import it anyway (through MMEngine); a no-op where it already is
    except ImportError:
        return None
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else None
    except Exception:
        return None


def _metric_accepts_collect_dir(config_path: str) -> bool:
    import inspect

    try:
        from mmengine.config import Config
        from mmengine.registry import METRICS

        cfg = Config.fromfile(config_path)
        evaluator = cfg.get("test_evaluator")
        metrics = evaluator if isinstance(evaluator, list) else [evaluator]
        for metric in metrics:
            cls = METRICS.get(metric["type"]) if isinstance(metric.get("type"), str) else metric.get("type")
            params = inspect.signature(cls.__init__).parameters
            if "collect_dir" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                return False
    except Exception:
        return True  # cannot tell: pass it on and let MMEngine report a real problem
    return True


def _evaluator_types(config_path: str) -> list[str] | None:
    """The metric types of the config's test_evaluator (None: cannot tell without running more)."""
    try:
        from mmengine.config import Config

        evaluator = Config.fromfile(config_path).get("test_evaluator")
        metrics = evaluator if isinstance(evaluator, list) else [evaluator]
        types = []
        for metric in metrics:
            kind = metric.get("type")
            types.append(kind.rpartition(".")[2] if isinstance(kind, str) else getattr(kind, "__name__", str(kind)))
        return types
    except Exception:
        return None


def _check_evaluators(value: str, config: str | None) -> None:
    """--eval/--metrics of a toolbox whose 3.x metrics come from the config: does the config compute them?"""
    from ..launch.translate import LegacyUsageError

    flag, _, wanted = value.partition(" ")
    types = _evaluator_types(config) if config else None
    if types is None:
        return  # not loadable here: the run reports the config's own problem
    for item in wanted.split(","):
        metric, _, alternatives = item.partition("=")
        choices = alternatives.split("|")
        if not set(choices) & set(types):
            raise LegacyUsageError(
                f"{flag} {metric} asks for a metric this config's test_evaluator ({', '.join(types) or 'none'}) "
                f"does not compute: in 3.x the metrics come from the config, and {metric} is computed by "
                f"{' or '.join(choices)}. Set test_evaluator in the config (e.g. test_evaluator = "
                f"dict(type='{choices[0]}')) and run the command again."
            )


def usable_cpus() -> int | None:
    """CPU cores this process may run on (its affinity mask: taskset, cgroups cpusets, SLURM)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _config_problem(path: str) -> str | None:
    """Why ``path`` cannot be the config file, or None: read and (for .py) parsed, never run."""
    if not os.path.exists(path):
        return f"the config file {path!r} does not exist (relative to {os.getcwd()})"
    if not os.path.isfile(path):
        return f"the config {path!r} is not a file"
    try:
        with open(path, "rb") as fh:
            source = fh.read()
    except OSError as exc:
        return f"the config file {path!r} cannot be read ({exc.strerror})"
    if path.endswith(".py"):
        import ast

        try:
            ast.parse(source, filename=path)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)  # ValueError (a NUL byte) has none
            where = f" (line {line})" if line else ""
            return f"the config file {path!r} is not valid Python{where}: {getattr(exc, 'msg', exc)}"
    return None


_LEGACY_CONFIG_WORDS = (b"samples_per_gpu", b"workers_per_gpu", b"imgs_per_gpu", b"lr_config", b"optimizer_config",
                        b"checkpoint_config", b"log_config", b"img_norm_cfg", b"evaluation", b"runner")


def _mentions_2x_keys(path: str, depth: int = 4) -> bool:
    """Whether the config or a file it inherits from spells a 2.x key: a text search, so that
    3.x configs do not pay for importing MMEngine in the launcher."""
    import re

    try:
        with open(path, "rb") as fh:
            text = fh.read(1 << 20)
    except OSError:
        return False
    if any(word in text for word in _LEGACY_CONFIG_WORDS):
        return True
    if depth and b"_base_" in text:
        folder = os.path.dirname(path)
        for name in re.findall(rb"""['"]([^'"]+\.py)['"]""", text):
            base = os.path.join(folder, os.fsdecode(name))
            if os.path.isfile(base) and _mentions_2x_keys(base, depth - 1):
                return True
    return False


def _config_converts(config: str | None) -> str | None:
    """The conversion error of a 2.x config, checked before N workers start (None: fine or not ours)."""
    if not config or not config.endswith(".py") or not os.path.isfile(config) or \
            "legacy_config" in _settings.current().disabled_patches or not _mentions_2x_keys(config):
        return None
    try:
        from ..configs._files import load

        load(config)
    except SystemExit as exc:  # ConfigConversionError
        return getattr(exc, "message", None)
    except Exception:
        return None  # not loadable here: the workers report it in their own words
    return None


def _run_checks(plan: Plan, check_files: bool = True) -> Plan:
    import dataclasses

    from .._ports import port_free
    from ..launch.translate import LegacyUsageError

    argv = list(plan.argv)
    notes = list(plan.notes)
    if plan.launch is not None and check_files:
        problem = _config_converts(next((a for a in argv if not a.startswith("-")), None))
        if problem:
            raise LegacyUsageError(problem)
    for kind, value in plan.checks:
        if kind == "port_free" and not port_free(int(value)):
            raise LegacyUsageError(
                f"port {value} (from PORT/MASTER_PORT) is already in use on this machine, probably by another "
                "training job. Choose a free one (e.g. PORT=29501), or on a single node leave PORT and "
                "MASTER_PORT unset: the launch then picks a free port by itself."
            )
        if kind == "config_file" and check_files and (problem := _config_problem(value)):
            raise LegacyUsageError(f"{problem}. Nothing was started; fix the path or the file and run the "
                                   "command again.")
        if kind == "checkpoint_file" and check_files and not os.path.isfile(value):
            what = "is not a file" if os.path.exists(value) else "does not exist"
            raise LegacyUsageError(f"the checkpoint {value!r} {what} (relative to {os.getcwd()}). Nothing was "
                                   "started; give the path of an existing .pth file.")
        if kind == "evaluators" and check_files:
            _check_evaluators(value, next((a for a in argv if not a.startswith("-")), None))
        if kind == "collect_dir":
            config = next((a for a in argv if not a.startswith("-")), None)
            if config and not _metric_accepts_collect_dir(config):
                pair = f"test_evaluator.collect_dir={value}"
                argv.remove(pair)
                if argv[-1] == "--cfg-options":
                    argv.pop()
                notes.append(f"--tmpdir {value} dropped: this config's metric collects results through its own "
                             "temporary directory in 3.x and takes no collect_dir")
    return dataclasses.replace(plan, argv=tuple(argv), notes=tuple(notes))


def _translated_command(plan: Plan) -> list[str]:
    from ..launch import execute

    if plan.launch is not None:
        return execute.torchrun_argv(plan, execute.script_command())
    prefix = list(getattr(sys, "orig_argv", [sys.executable, sys.argv[0]]))
    prefix = prefix[: len(prefix) - (len(sys.argv) - 1)]
    return prefix + list(plan.argv)


def _parse_known_args(wrapped: Callable[..., Any], parser: Any, args: tuple, kwargs: dict) -> Any:
    from ..launch import execute
    from ..launch.parser_info import parser_info
    from ..launch.translate import LegacyUsageError, UnknownArgumentsError, translate

    global _done
    cli = _wrapping.argument(args, kwargs, 0, "args")
    if _done or (cli is not None and list(cli) != sys.argv[1:]) or not _called_from_main():
        return wrapped(*args, **kwargs)
    _done = True
    settings = _settings.current()
    info = parser_info(parser)
    original = list(getattr(sys, "orig_argv", sys.argv))
    if not info.openmmlab_shaped and not settings.legacy_any_parser:
        if settings.translate_only:
            _print_translation(original, None, "not an OpenMMLab-shaped tool (no `config` positional and "
                                               "`--launcher` option): left unchanged")
        return wrapped(*args, **kwargs)
    strict = _strict_parse()
    imports, _ = _script_facts(sys.argv[0])
    try:
        plan = translate(sys.argv[1:], os.environ, info, visible_gpus=_visible_gpus(),
                         any_parser=settings.legacy_any_parser, program=sys.argv[0], usable_cpus=usable_cpus(),
                         allow_cpu_oversubscribe=settings.allow_cpu_oversubscribe, imports=imports, strict=strict)
        plan = _run_checks(plan, check_files=not settings.translate_only)
    except UnknownArgumentsError as exc:
        parser.error(exc.message)  # the parser's own usage line, then the one error; exit status 2
    except LegacyUsageError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc.message}\n")
    if settings.translate_only:
        _print_translation(original, plan, None)
    if not plan.changed:
        return wrapped(*args, **kwargs)
    command = _translated_command(plan)
    _announce(original, command, plan)
    if plan.launch is not None or plan.env:
        if settings.launched:
            # Never loop: a process mmfix launched must not launch again.
            parser.exit(2, f"{parser.prog}: error: mmfix would start this command again from a process it "
                           "launched itself; refusing (MMFIX_LAUNCHED is set). Please report this command line.\n")
        if plan.launch is not None:
            execute.launch(plan)
        execute.reexec(command, plan)
    sys.argv[1:] = list(plan.argv)
    args, kwargs = _wrapping.with_argument(args, kwargs, 0, "args", list(plan.argv))
    return wrapped(*args, **kwargs)


def _gpus_without_cuda() -> int | None:
    """Visible GPUs without importing torch or touching CUDA (start-up must stay cheap).

    The driver's device nodes say how many GPUs the node has; CUDA_VISIBLE_DEVICES
    narrows them. A wrong guess costs little: the workers' own checks still apply.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        nodes = [n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit()]
    except OSError:
        nodes = []
    if not nodes:
        return None
    if visible is None:
        return len(nodes)
    entries = [e for e in visible.split(",") if e.strip()]
    return len(entries) or None


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
    from ..launch.translate import torchrun_in_srun_message

    if os.environ.get("SLURM_PROCID") == "0":
        script = next((a for a in argv[2:] if a.endswith(".py")), "tools/train.py")
        sys.stderr.write(f"mmfix: error: {torchrun_in_srun_message(srun_tasks(), script)}\n")
        sys.stderr.flush()
    os._exit(2)  # at start-up: nothing has run yet


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
    from ..launch import execute
    from ..launch.static_parser import parser_info_from_source, parses_strictly, script_imports
    from ..launch.translate import LegacyUsageError, UnknownArgumentsError, translate

    info = parser_info_from_source(source, argv[0])
    if info is None:
        return
    try:
        plan = _run_checks(translate(argv[1:], os.environ, info, visible_gpus=_gpus_without_cuda(),
                                     program=argv[0], usable_cpus=usable_cpus(),
                                     allow_cpu_oversubscribe=settings.allow_cpu_oversubscribe,
                                     imports=script_imports(source), strict=parses_strictly(source)))
    except LegacyUsageError as exc:
        prog = os.path.basename(argv[0])
        usage = info.usage if isinstance(exc, UnknownArgumentsError) and info.usage else ""
        sys.stderr.write(f"{usage}{prog}: error: {exc.message}\n")
        sys.stdout.flush()
        os._exit(2)  # at start-up: nothing of the script has run, nothing to clean up
    if plan.launch is None:
        return  # in-place translations happen at parse time, against the real parser
    global _done
    _done = True
    _announce(list(getattr(sys, "orig_argv", argv)), _translated_command(plan), plan)
    execute.launch(plan)


def _announce(original: list[str], command: list[str], plan: Plan) -> None:
    """The one log line (rank 0) showing what ran instead of what was typed, and the warnings."""
    from ..launch.execute import describe

    env_note = " ".join(f"{k}={v} " for k, v in plan.env.items())
    _log.info(f"command line translated: {describe(original)}  ->  {env_note}{describe(command)}  "
              f"({'; '.join(plan.notes)})", key="translated")
    for warning in plan.warnings:
        _log.warning(warning, key=f"translate:{warning}")


def translation_data(original: list[str], plan: Plan | None, reason: str | None,
                     command: list[str] | None) -> dict[str, Any]:
    """What `mmfix translate` shows: the original, the translated command, its environment and notes."""
    data: dict[str, Any] = {"original": original, "rules": plan.rules if plan is not None else ""}
    if plan is None or not plan.changed:
        data.update(changed=False, reason=reason, command=original, env={}, notes=[],
                    warnings=[] if plan is None else list(plan.warnings))
    else:
        data.update(changed=True, command=command, env=dict(plan.env), notes=list(plan.notes),
                    warnings=list(plan.warnings), launch=None if plan.launch is None else vars(plan.launch))
    return data


def _print_translation(original: list[str], plan: Plan | None, reason: str | None) -> None:
    import json

    command = _translated_command(plan) if plan is not None and plan.changed else None
    sys.stdout.write(TRANSLATION_MARKER + json.dumps(translation_data(original, plan, reason, command)) + "\n")
    sys.stdout.flush()
    os._exit(0)  # print, never run: nothing of the script may execute past this point


def translate_statically(python: str, script: str, args: list[str]) -> dict[str, Any] | None:
    """`mmfix translate` without running anything: the script's parser read from its source.

    None when the source does not say for certain what the parser accepts; then only
    running the script up to its parse can tell (``--run-to-parse``). Raises
    LegacyUsageError for a command line the launch would refuse. Files (config,
    checkpoints) are not checked: the translation is shown either way.
    """
    from ..launch import execute
    from ..launch.static_parser import parser_info_from_source, parses_strictly, script_imports
    from ..launch.translate import UnknownArgumentsError, translate

    with open(script, encoding="utf-8") as fh:
        source = fh.read()
    info = parser_info_from_source(source, script)
    if info is None:
        return None
    settings = _settings.current()
    try:
        plan = _run_checks(translate(args, os.environ, info, visible_gpus=_gpus_without_cuda(), program=script,
                                     usable_cpus=usable_cpus(), allow_cpu_oversubscribe=settings.allow_cpu_oversubscribe,
                                     imports=script_imports(source), strict=parses_strictly(source)),
                           check_files=False)
    except UnknownArgumentsError as exc:
        exc.usage = info.usage or ""
        raise
    if plan.launch is not None:
        command = execute.torchrun_argv(plan, [os.path.abspath(script)], python)
    else:
        command = [python, script, *plan.argv]
    return translation_data([python, script, *args], plan, None, command)
