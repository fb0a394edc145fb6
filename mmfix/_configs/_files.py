"""Reading a config file for conversion, and writing the converted one out (``mmfix convert-config``)."""

from __future__ import annotations

import ast
import os
from typing import Any

from . import Loader, apply_legacy_keys, check_toolbox, classify, convert, rules_for
from ._report import Report

_MAX_BASES = 64  # _base_ files read to find a config's folders: a bound, not a limit any zoo reaches


def load(path: str, loader: Loader | None = None) -> tuple[str, dict[str, Any], dict[str, Any], Report]:
    """(kind, merged source dict, converted dict, report) for a config file, with MMEngine's own loader.

    A legacy config is converted by its toolbox's rules; one of a toolbox without rules raises
    ``ConfigConversionError``; a current-format config of a toolbox other than MMDetection is
    returned as it is (kind '3.x')."""
    from mmengine.config import Config

    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)  # mmfix's patch may be active
    cfg = fromfile(path, import_custom_modules=False)
    source = cfg.to_dict()
    kind = classify(source)
    toolbox = rules_for(check_toolbox(source, kind, path, config_files(path), loader)) if kind != "3.x" else None
    if kind == "2.x" and toolbox is not None:
        converted, report = convert(source, toolbox)
    elif kind == "mixed" and toolbox == "mmdet":
        converted, report = apply_legacy_keys(source, own_keys(path))
    else:
        kind = "3.x" if kind == "mixed" else kind  # another toolbox's 1.x config with helper variables: stock
        converted, report = source, Report()
    # The same normal form the automatic path hands to the tools.
    return kind, source, Config(converted).to_dict(), report


def _bases(filename: str) -> list[str]:
    """The ``_base_`` files ``filename`` names (plain paths, relative to its folder), read with ast."""
    try:
        with open(filename, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_base_" for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            names += [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    folder = os.path.dirname(os.path.abspath(filename))
    # "pkg::path" names a package's config; {{fileDirname}}-style names are left out
    return [os.path.normpath(os.path.join(folder, n)) for n in names if "::" not in n and "{{" not in n]


def config_files(filename: str) -> list[str]:
    """``filename`` (absolute) and its ``_base_`` files, transitively: where the config's parts live."""
    out = [os.path.abspath(filename)]
    i = 0
    while i < len(out) and len(out) < _MAX_BASES:
        for base in _bases(out[i]):
            if base not in out:
                out.append(base)
        i += 1
    return out[:_MAX_BASES]


def own_keys(filename: str) -> set[str]:
    """Dotted keys the file itself sets (not its _base_ files): ``train_dataloader``,
    ``train_dataloader.batch_size``, ... as far as ``dict(...)`` / ``{...}`` literals go."""
    try:
        with open(filename, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return set()
    keys: set[str] = set()

    def walk(node: ast.AST, prefix: str) -> None:
        items: list[tuple[str, ast.AST]] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            items = [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
        elif isinstance(node, ast.Dict):
            items = [
                (k.value, v)
                for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
        for key, value in items:
            keys.add(f"{prefix}.{key}")
            walk(value, f"{prefix}.{key}")

    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, (ast.AnnAssign, ast.AugAssign))
            else []
        )
        for target in targets:
            if isinstance(target, ast.Name):
                keys.add(target.id)
                value = getattr(node, "value", None)  # an annotation without a value has none
                if value is not None:
                    walk(value, target.id)
    return keys


def render(path: str, converted: dict[str, Any], report: Report) -> str:
    """A self-contained 3.x config: a header saying what was done, then every key."""
    from mmengine.config import Config

    from ._toolbox import TOOLBOXES

    old, new, _ = TOOLBOXES[report.toolbox]
    header = [
        f"# {new} config converted by mmfix from the {old} config {os.path.basename(path)}",
        "# (its _base_ files are merged in: this file stands alone).",
        "#",
    ]
    header += [f"# {line}" for line in report.lines()]
    body = Config(converted).pretty_text
    return "\n".join(header) + "\n\n" + body


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, sub in value.items():
            flat.update(_flatten(sub, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def diff_lines(source: dict[str, Any], converted: dict[str, Any], report: Report) -> list[str]:
    """The conversion key by key: the report, then each flattened key removed, added or changed."""
    lines = report.lines()
    old, new = _flatten(source), _flatten(converted)
    for key in sorted(set(old) | set(new)):
        if key not in new:
            lines.append(f"- {key} = {old[key]!r}")
        elif key not in old:
            lines.append(f"+ {key} = {new[key]!r}")
        elif old[key] != new[key]:
            lines.append(f"~ {key}: {old[key]!r} -> {new[key]!r}")
    return lines
