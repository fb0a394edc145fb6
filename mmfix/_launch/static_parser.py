"""A script's argparse parser, read from its source without running it.

Used only to start a legacy ``--gpus N`` launch at interpreter start-up, before
the script spends seconds importing torch and MMEngine only to be replaced by
torchrun. It answers only when the answer is certain: the source must build one
parser shaped like an OpenMMLab tool, every add_argument call must be plain
literals, and any doubt means "ask the real parser later" (None).
"""

from __future__ import annotations

import argparse
import ast
import os

from .plan import ParserInfo

_FLAG_ACTIONS = {"store_true", "store_false", "store_const", "count", "append_const", "help", "version"}


def script_imports(source: str) -> frozenset[str]:
    """The top-level packages a script imports (``from mmseg.registry import X`` -> mmseg)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return frozenset(names)


def parses_strictly(source: str) -> bool:
    """Whether the script parses with parse_args (unknown arguments are an error) only."""
    return "parse_args(" in source and "parse_known_args(" not in source


def _usage(calls: list[tuple[list[str], dict[str, object]]], prog: str) -> str | None:
    """The usage line argparse prints for these add_argument calls (help and types left out)."""
    try:
        parser = argparse.ArgumentParser(prog=prog)
        for names, kwargs in calls:
            parser.add_argument(*names, **kwargs)  # type: ignore[arg-type]
        return parser.format_usage()
    except (argparse.ArgumentError, TypeError, ValueError):  # a combination argparse refuses: no usage line
        return None


def parser_info_from_source(source: str, prog: str = "train.py") -> ParserInfo | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    options: dict[str, object] = {}
    positionals: list[str] = []
    calls: list[tuple[list[str], dict[str, object]]] = []
    parsers = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "ArgumentParser":
            parsers += 1
        if node.func.attr != "add_argument":
            continue
        names = []
        for arg in node.args:
            if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
                return None  # computed option names: cannot be sure
            names.append(arg.value)
        if not names:
            return None
        nargs: object = None
        usage_kwargs: dict[str, object] = {}
        for kw in node.keywords:
            if kw.arg in ("choices", "metavar", "dest"):
                try:
                    usage_kwargs[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    pass
            if kw.arg == "nargs":
                if not isinstance(kw.value, ast.Constant):
                    return None
                nargs = kw.value.value
                usage_kwargs["nargs"] = nargs
            elif kw.arg == "action":
                if isinstance(kw.value, ast.Constant) and kw.value.value in _FLAG_ACTIONS:
                    nargs = 0
                    usage_kwargs["action"] = kw.value.value
                elif not isinstance(kw.value, ast.Constant):
                    # a custom Action class (MMEngine's DictAction): its nargs is given separately
                    pass
        if names != ["-h", "--help"] and names != ["--help", "-h"]:
            calls.append((names, usage_kwargs))
        if names[0].startswith("-"):
            for name in names:
                options[name] = nargs
        else:
            positionals.append(names[0])
    if parsers != 1:
        return None
    info = ParserInfo(options=options, positionals=tuple(positionals), usage=_usage(calls, os.path.basename(prog)))
    return info if info.openmmlab_shaped else None
