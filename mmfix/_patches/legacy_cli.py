"""Legacy 2.x command lines, translated the moment the script parses its command line.

The hook sits on ``ArgumentParser.parse_known_args`` (``parse_args`` calls it)
and acts once per process, only for the parse of the real command line made by
the ``__main__`` script: libraries parsing their own lists, and every program
whose parser is not shaped like an OpenMMLab tool, are left alone.
"""

from __future__ import annotations

import os
import sys

from .. import _settings, _wrapping

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable


# The translator, its plan types and the executor are imported inside the functions
# that use them: this module is imported with argparse, in every Python program.

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
    from .._launch.static_parser import parses_strictly, script_imports

    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read(4 << 20)
    except (OSError, UnicodeDecodeError):
        return frozenset(), True
    return script_imports(source), parses_strictly(source)


def _parse_known_args(wrapped: Callable[..., Any], parser: Any, args: tuple, kwargs: dict) -> Any:
    from .._launch import execute
    from .._launch.checks import run_checks, usable_cpus, visible_gpus
    from .._launch.parser_info import parser_info
    from .._launch.report import announce, print_translation, translated_command
    from .._launch.translate import LegacyUsageError, UnknownArgumentsError, translate

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
            print_translation(
                original,
                None,
                "not an OpenMMLab-shaped tool (no `config` positional and `--launcher` option): left unchanged",
            )
        return wrapped(*args, **kwargs)
    strict = _strict_parse()
    imports, _ = _script_facts(sys.argv[0])
    try:
        plan = translate(
            sys.argv[1:],
            os.environ,
            info,
            visible_gpus=visible_gpus(),
            any_parser=settings.legacy_any_parser,
            program=sys.argv[0],
            usable_cpus=usable_cpus(),
            allow_cpu_oversubscribe=settings.allow_cpu_oversubscribe,
            imports=imports,
            strict=strict,
        )
        plan = run_checks(plan, check_files=not settings.translate_only)
    except UnknownArgumentsError as exc:
        parser.error(exc.message)  # the parser's own usage line, then the one error; exit status 2
    except LegacyUsageError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc.message}\n")
    if settings.translate_only:
        print_translation(original, plan, None)
    if not plan.changed:
        return wrapped(*args, **kwargs)
    command = translated_command(plan)
    announce(original, command, plan)
    if plan.launch is not None or plan.env:
        if settings.launched:
            # Never loop: a process mmfix launched must not launch again.
            parser.exit(
                2,
                f"{parser.prog}: error: mmfix would start this command again from a process it "
                "launched itself; refusing (MMFIX_LAUNCHED is set). Please report this command line.\n",
            )
        if plan.launch is not None:
            execute.launch(plan)
        execute.reexec(command, plan)
    sys.argv[1:] = list(plan.argv)
    args, kwargs = _wrapping.with_argument(args, kwargs, 0, "args", list(plan.argv))
    return wrapped(*args, **kwargs)
