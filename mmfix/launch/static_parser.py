"""A script's argparse parser, read from its source without running it.

Used only to start a legacy ``--gpus N`` launch at interpreter start-up, before
the script spends seconds importing torch and MMEngine only to be replaced by
torchrun. It answers only when the answer is certain: the source must build one
parser shaped like an OpenMMLab tool, every add_argument call must be plain
literals, and any doubt means "ask the real parser later" (None).
"""
from __future__ import annotations

import ast

from .plan import ParserInfo

_FLAG_ACTIONS = {"store_true", "store_false", "store_const", "count", "append_const", "help", "version"}


def parser_info_from_source(source: str) -> ParserInfo | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    options: dict[str, object] = {}
    positionals: list[str] = []
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
        for kw in node.keywords:
            if kw.arg == "nargs":
                if not isinstance(kw.value, ast.Constant):
                    return None
                nargs = kw.value.value
            elif kw.arg == "action":
                if isinstance(kw.value, ast.Constant) and kw.value.value in _FLAG_ACTIONS:
                    nargs = 0
                elif not isinstance(kw.value, ast.Constant):
                    # a custom Action class (MMEngine's DictAction): its nargs is given separately
                    pass
        if names[0].startswith("-"):
            for name in names:
                options[name] = nargs
        else:
            positionals.append(names[0])
    if parsers != 1:
        return None
    info = ParserInfo(options=options, positionals=tuple(positionals))
    return info if info.openmmlab_shaped else None
