"""What a translated command is checked against before anything starts, and the machine facts
the translator is given (GPUs, CPU cores).

The translator is pure; these are the impure parts of a launch: files exist and parse, the
port is free, the config's evaluators compute what the legacy flags ask for. Each problem is a
``LegacyUsageError``: one paragraph, exit status 2, nothing started.
"""

from __future__ import annotations

import os
import sys

from .. import _settings
from .plan import Plan


def visible_gpus() -> int | None:
    try:
        import torch  # the tools import it anyway (through MMEngine); a no-op where it already is
    except ImportError:
        return None
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else None
    except Exception:
        return None


def gpus_without_cuda() -> int | None:
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
    from .translate import LegacyUsageError

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


_LEGACY_CONFIG_WORDS = (
    b"samples_per_gpu",
    b"workers_per_gpu",
    b"imgs_per_gpu",
    b"lr_config",
    b"optimizer_config",
    b"checkpoint_config",
    b"log_config",
    b"img_norm_cfg",
    b"evaluation",
    b"runner",
)


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
    if (
        not config
        or not config.endswith(".py")
        or not os.path.isfile(config)
        or "legacy_config" in _settings.current().disabled_patches
        or not _mentions_2x_keys(config)
    ):
        return None
    try:
        from .._configs import Loader
        from .._configs._files import load

        # the script (sys.argv[0] where a launch starts) tells the toolbox of a config its types do not
        load(config, Loader(script=sys.argv[0] if sys.argv else None))
    except SystemExit as exc:  # ConfigConversionError
        return getattr(exc, "message", None)
    except Exception:
        return None  # not loadable here: the workers report it in their own words
    return None


def run_checks(plan: Plan, check_files: bool = True) -> Plan:
    import dataclasses

    from .._ports import port_free
    from .translate import LegacyUsageError

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
            raise LegacyUsageError(
                f"{problem}. Nothing was started; fix the path or the file and run the command again."
            )
        if kind == "checkpoint_file" and check_files and not os.path.isfile(value):
            what = "is not a file" if os.path.exists(value) else "does not exist"
            raise LegacyUsageError(
                f"the checkpoint {value!r} {what} (relative to {os.getcwd()}). Nothing was "
                "started; give the path of an existing .pth file."
            )
        if kind == "evaluators" and check_files:
            _check_evaluators(value, next((a for a in argv if not a.startswith("-")), None))
        if kind == "collect_dir":
            config = next((a for a in argv if not a.startswith("-")), None)
            if config and not _metric_accepts_collect_dir(config):
                pair = f"test_evaluator.collect_dir={value}"
                argv.remove(pair)
                if argv[-1] == "--cfg-options":
                    argv.pop()
                notes.append(
                    f"--tmpdir {value} dropped: this config's metric collects results through its own "
                    "temporary directory in 3.x and takes no collect_dir"
                )
    return dataclasses.replace(plan, argv=tuple(argv), notes=tuple(notes))
