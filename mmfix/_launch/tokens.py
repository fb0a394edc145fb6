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
        self.usage = ""  # the parser's usage line, where the shell knows it


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_LOCAL_RANK_ALIASES = {"--local-rank": "--local_rank", "--local_rank": "--local-rank"}


def is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def consume(argv: Sequence[str], i: int, nargs: object, eq: str) -> int:
    """How many of the tokens after ``argv[i]`` an option with ``nargs`` takes."""
    if eq or nargs == 0:
        return 0
    rest = argv[i + 1 :]
    if nargs is None:
        nargs = 1
    if isinstance(nargs, int):
        count = 0
        while count < min(nargs, len(rest)) and not is_option(rest[count]):
            count += 1  # as argparse: an option-like token is never a value
        return count
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

    def __init__(
        self,
        argv: Sequence[str],
        parser: ParserInfo,
        legacy: Mapping[str, object],
        examples: Mapping[str, str] | None = None,
    ) -> None:
        self.kept: list[str] = []
        self.legacy: list[tuple[str, list[str]]] = []
        self.renamed: list[tuple[str, str]] = []
        self.user_cfg_options: list[str] = []
        self.launcher: str | None = None
        self.positionals: list[str] = []
        self.unknown: list[str] = []  # option tokens neither the parser nor the tables accept
        self.malformed: list[str] = []  # known options the real parser would refuse, in argparse's words
        i, n = 0, len(argv)
        while i < n:
            token = argv[i]
            if token == "--":
                self.kept.extend(argv[i:])
                self.positionals.extend(argv[i + 1 :])
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
                values = [inline] if eq else list(argv[i + 1 : i + 1 + consumed])
                self._check_known(full, parser.options.get(full), values, eq)
                if full == "--cfg-options":
                    self.user_cfg_options.extend(values)
                if full == "--launcher" and values:
                    self.launcher = values[0]
                self.kept.extend(argv[i : i + 1 + consumed])
                i += 1 + consumed
                continue
            alias = _LOCAL_RANK_ALIASES.get(flag)
            if alias is not None and alias in parser.options:
                # torch >= 2.0's launch passes --local-rank; 2.x scripts know only --local_rank.
                self.renamed.append((flag, alias))
                consumed = 0 if eq else consume(argv, i, 1, eq)
                self.kept.append(alias + eq + inline)
                self.kept.extend(argv[i + 1 : i + 1 + consumed])
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
                    values = list(argv[i + 1 : i + 1 + consumed])
                    if nargs not in (0, "?", "*") and not values:
                        example = (examples or {}).get(flag, flag + " X")
                        raise LegacyUsageError(f"{flag} needs a value (e.g. {example}).")
                    i += 1 + consumed
                self.legacy.append((flag, values))
                continue
            self.kept.append(token)
            self.unknown.append(token)
            i += 1

    def _check_known(self, option: str, nargs: object, values: list[str], eq: str) -> None:
        if nargs == 0:
            if eq:
                self.malformed.append(f"argument {option}: ignored explicit argument {values[0]!r}")
            return
        wanted = 1 if nargs in (None, "+") else nargs
        if isinstance(wanted, int) and len(values) < wanted:
            words = {1: "one argument", "+": "at least one argument"}
            self.malformed.append(
                f"argument {option}: expected {words.get(nargs if nargs == '+' else wanted, f'{wanted} arguments')}"
            )
            return
        if option == "--cfg-options":
            bad = [v for v in values if "=" not in v]
            if bad:
                self.malformed.append(f"argument --cfg-options: expected key=value pairs, got {bad[0]!r}")
