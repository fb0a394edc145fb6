"""The tokenizer: argv split into what the script's parser knows, legacy flags and unknowns.

Pure and table-free: which flags are legacy (and how many values each takes) is
passed in, so the same tokenizer serves every toolbox's rules.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

from .._errors import MmfixUsageError
from .plan import ParserInfo


class LegacyUsageError(MmfixUsageError):
    """A legacy command line mmfix can name the mistake in."""


class UnknownArgumentsError(LegacyUsageError):
    """Arguments neither the script's parser nor the translator accepts (shown with the usage line)."""

    def __init__(self, message: str, arguments: Sequence[str]) -> None:
        super().__init__(message)
        self.arguments = tuple(arguments)


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_LOCAL_RANK_ALIASES = {"--local-rank": "--local_rank", "--local_rank": "--local-rank"}


def is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def consume(argv: Sequence[str], i: int, nargs: object, eq: str) -> int:
    """How many of the tokens after ``argv[i]`` an option with ``nargs`` takes."""
    if eq or nargs == 0:
        return 0
    rest = argv[i + 1:]
    if nargs is None:
        return 1 if rest else 0
    if isinstance(nargs, int):
        return min(nargs, len(rest))
    if nargs == "?":
        return 1 if rest and not is_option(rest[0]) else 0
    if nargs == "...":
        return len(rest)
    count = 0
    for token in rest:  # "*" and "+"
        if is_option(token):
            break
        count += 1
    return count


def expand(parser: ParserInfo, flag: str) -> str:
    """The option an abbreviation stands for (argparse's allow_abbrev)."""
    matches = [o for o in parser.options if o.startswith(flag)]
    return matches[0] if len(matches) == 1 else flag


class Scan:
    """argv split into kept tokens, legacy flags (with their values) and unknowns, in order."""

    def __init__(self, argv: Sequence[str], parser: ParserInfo, legacy: Mapping[str, object],
                 examples: Mapping[str, str] | None = None) -> None:
        self.kept: list[str] = []
        self.legacy: list[tuple[str, list[str]]] = []
        self.renamed: list[tuple[str, str]] = []
        self.user_cfg_options: list[str] = []
        self.launcher: str | None = None
        self.positionals: list[str] = []
        self.unknown: list[str] = []  # option tokens neither the parser nor the tables accept
        i, n = 0, len(argv)
        while i < n:
            token = argv[i]
            if token == "--":
                self.kept.extend(argv[i:])
                self.positionals.extend(argv[i + 1:])
                break
            if not is_option(token):
                self.kept.append(token)
                self.positionals.append(token)
                i += 1
                continue
            flag, eq, inline = token.partition("=")
            if parser.knows(flag):
                full = flag if flag in parser.options else expand(parser, flag)
                consumed = consume(argv, i, parser.options.get(full), eq)
                values = [inline] if eq else list(argv[i + 1:i + 1 + consumed])
                if full == "--cfg-options":
                    self.user_cfg_options.extend(values)
                if full == "--launcher" and values:
                    self.launcher = values[0]
                self.kept.extend(argv[i:i + 1 + consumed])
                i += 1 + consumed
                continue
            alias = _LOCAL_RANK_ALIASES.get(flag)
            if alias is not None and alias in parser.options:
                # torch >= 2.0's launch passes --local-rank; 2.x scripts know only --local_rank.
                self.renamed.append((flag, alias))
                consumed = 0 if eq else consume(argv, i, 1, eq)
                self.kept.append(alias + eq + inline)
                self.kept.extend(argv[i + 1:i + 1 + consumed])
                i += 1 + consumed
                continue
            if flag in legacy:
                nargs = legacy[flag]
                if eq:
                    if nargs == 0:
                        raise LegacyUsageError(f"{flag} takes no value, got {token!r}.")
                    values = [inline]
                    i += 1
                else:
                    consumed = consume(argv, i, nargs, eq)
                    values = list(argv[i + 1:i + 1 + consumed])
                    if nargs not in (0, "?", "*") and not values:
                        example = (examples or {}).get(flag, flag + " X")
                        raise LegacyUsageError(f"{flag} needs a value (e.g. {example}).")
                    i += 1 + consumed
                self.legacy.append((flag, values))
                continue
            self.kept.append(token)
            self.unknown.append(token)
            i += 1
