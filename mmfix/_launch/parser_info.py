"""Read what an argparse parser accepts into a ParserInfo (the translator's view of it)."""

from __future__ import annotations

import argparse

from .plan import ParserInfo


def parser_info(parser: argparse.ArgumentParser) -> ParserInfo:
    options: dict[str, object] = {}
    positionals: list[str] = []
    for action in parser._actions:  # argparse has no public accessor for its actions
        if action.option_strings:
            for option in action.option_strings:
                options[option] = action.nargs
        elif not isinstance(action, argparse._SubParsersAction):
            positionals.append(action.dest)
    return ParserInfo(
        options=options,
        positionals=tuple(positionals),
        allow_abbrev=getattr(parser, "allow_abbrev", True),
        usage=parser.format_usage(),
    )
