"""The pure translator: a 2.x-era command line, the environment and the script's parser -> a Plan.

No I/O and no global state: everything the decision depends on is an argument,
so every row of the tables (``rules.py``) is unit-tested, and property-tested over
random argv. The only exception it raises is ``LegacyUsageError`` (a clean exit 2).

Rules, in order of precedence:
1. A flag the script's own parser knows is never rewritten (a real 2.x train.py
   keeps its ``--gpus``).
2. Only parsers shaped like OpenMMLab tools (a ``config`` positional and a
   ``--launcher`` option) are translated, unless the caller opts in.
3. Inside a launched worker nothing is ever launched again.
4. An argument neither the parser nor the toolbox's table accepts is refused here,
   once, before anything starts (``strict``; off for parse_known_args callers).
"""

from __future__ import annotations

import difflib
from typing import Iterable, Mapping, Sequence

from .plan import ParserInfo, Plan
from .rules import RENAMED_3X, Flag, RuleSet, rules_for
from .tokens import LegacyUsageError, Scan, UnknownArgumentsError
from .topology import in_worker, plan_topology, plural, torchrun_in_srun_message

__all__ = ["LegacyUsageError", "UnknownArgumentsError", "plural", "torchrun_in_srun_message", "translate"]

_EXAMPLES = {
    "--gpus": "--gpus 2",
    "--seed": "--seed 0",
    "--gpu-id": "--gpu-id 0",
    "--gpu-ids": "--gpu-ids 0 1",
    "--resume-from": "--resume-from work_dirs/x/epoch_3.pth",
    "--options": "--options a.b=1",
    "--load-from": "--load-from checkpoints/pretrained.pth",
    "--eval": "--eval bbox",
    "--eval-options": "--eval-options classwise=True",
    "--show-score-thr": "--show-score-thr 0.3",
    "--tmpdir": "--tmpdir /tmp/eval",
    "--metrics": "--metrics accuracy",
    "--device": "--device cpu",
    "--metric-options": "--metric-options topk=1,5",
    "--opacity": "--opacity 0.5",
    "--out-items": "--out-items all",
    "--ipu-replicas": "--ipu-replicas 2",
}
_DEFAULT_PREFIX = "./work_dirs/format_only/results"


def _pairs(flag: str, values: list[str]) -> list[tuple[str, str]]:
    out = []
    for value in values:
        key, eq, val = value.partition("=")
        if not eq or not key:
            raise LegacyUsageError(f"{flag} expects key=value pairs, got {value!r}.")
        out.append((key, val))
    return out


def _checked(row: Flag, spelled: str, value: str) -> str:
    if row.kind == "int":
        try:
            return str(int(value))
        except ValueError:
            raise LegacyUsageError(f"{spelled} expects a whole number, got {value!r}.") from None
    if row.kind == "float":
        try:
            float(value)
        except ValueError:
            raise LegacyUsageError(f"{spelled} expects a number, got {value!r}.") from None
    return value


def suggestion(flag: str, parser: ParserInfo) -> str | None:
    """The 3.x spelling of an argument this parser refuses, where one exists."""
    renamed = RENAMED_3X.get(flag)
    if renamed is not None and (
        (renamed.startswith("--cfg-options") and "--cfg-options" in parser.options) or renamed in parser.options
    ):
        return renamed
    for variant in (flag.replace("_", "-"), "--" + flag.lstrip("-").replace("_", "-"), flag.replace("-", "_")):
        if variant != flag and variant in parser.options:
            return variant
    close = difflib.get_close_matches(flag, [o for o in parser.options if o.startswith("--")], n=1, cutoff=0.8)
    return close[0] if close else None


def _refuse_unknown(
    scan: Scan, argv: Sequence[str], parser: ParserInfo, rules: RuleSet, tool: str, program: str
) -> None:
    if scan.malformed:
        raise UnknownArgumentsError(f"{scan.malformed[0]}. Nothing was started.", [])
    extra_positionals = scan.positionals[len(parser.positionals) :] if "--" not in argv else []
    if not scan.unknown and not extra_positionals:
        return
    bad = [a for a in argv if a in scan.unknown or a in extra_positionals]
    hints = []
    for token in scan.unknown:
        flag = token.partition("=")[0]
        better = suggestion(flag, parser)
        if better is not None:
            hints.append(f"{flag} is spelled {better} on this tool")
    script = program.rsplit("/", 1)[-1] or f"{tool}.py"
    message = (
        f"unrecognized arguments: {' '.join(bad)}. Neither this {script} nor the {rules.label} legacy "
        f"flags mmfix translates accept {'it' if len(bad) == 1 else 'them'}"
        + (f" ({'; '.join(hints)})" if hints else "")
        + ". Nothing was started."
    )
    raise UnknownArgumentsError(message, bad)


def translate(
    argv: Sequence[str],
    env: Mapping[str, str],
    parser: ParserInfo,
    *,
    visible_gpus: int | None,
    any_parser: bool = False,
    program: str = "tools/train.py",
    usable_cpus: int | None = None,
    allow_cpu_oversubscribe: bool = False,
    rules: RuleSet | None = None,
    imports: Iterable[str] = (),
    strict: bool = True,
) -> Plan:
    """Translate ``argv`` (the script's arguments, without the program) into a Plan.

    ``visible_gpus`` is None on a host without a usable CUDA device; there, one
    worker per GPU becomes one CPU worker per "GPU", and more of them than the
    ``usable_cpus`` this process may run on is refused unless
    ``allow_cpu_oversubscribe``. ``any_parser`` translates for parsers that are not
    shaped like OpenMMLab tools too. ``rules`` (else chosen from ``program``, the
    toolbox packages the script ``imports`` and the parser) is the toolbox's table.
    ``strict``: the script parses with parse_args, so unknown arguments are refused here.
    """
    argv = [str(a) for a in argv]
    tool = parser.tool or ("train" if any_parser else None)
    if tool is None:
        return Plan(argv=tuple(argv))
    why = "given"
    if rules is None:
        rules, why = rules_for(program, parser, imports)
    rules_line = f"{rules.label} ({why})"
    lookup = rules.lookup(tool)
    # A flag whose meaning changed while keeping its name (MMSegmentation's --out): refused only on
    # the 3.x-era tool, i.e. when the parser knows none of the table's other 2.x flags.
    era_2x = any(parser.knows(s) for s, row in lookup.items() if row.action not in ("out_pkl", "topology"))
    for row in rules.flags(tool):
        if row.action == "out_pkl" and not era_2x:
            _refuse_pkl_out(argv, row)
    scan = Scan(argv, parser, {s: row.nargs for s, row in lookup.items() if not parser.knows(s)}, _EXAMPLES)
    if strict:
        _refuse_unknown(scan, argv, parser, rules, tool, program)
    notes: list[str] = [f"{old} -> {new} (this script's parser knows only {new})" for old, new in scan.renamed]
    flags: dict[str, list[str]] = {}
    for flag, values in scan.legacy:
        name = lookup[flag].name
        if lookup[flag].action == "pairs" and name in flags:
            flags[name] = flags[name] + values  # 2.x DictAction merged repeats
        else:
            flags[name] = values
    rows = [row for row in rules.flags(tool) if row.name in flags]
    spelled = {row.name: next((f for f, _ in scan.legacy if lookup[f] is row), row.name) for row in rows}

    for row in rows:
        if row.action == "error":
            raise LegacyUsageError(f"{spelled[row.name]} has no 3.x equivalent: {row.note}.")

    device_env: dict[str, str] = {}
    gpus = visible_gpus
    device_row = next((row for row in rows if row.action == "device"), None)
    if device_row is not None:
        device_env, device_note = _device(flags[device_row.name][0])
        notes.append(device_note)
        if device_env:
            gpus = None
    topo = plan_topology(
        {row.name: flags[row.name] for row in rows if row.action == "topology"},
        env,
        parser,
        scan.launcher,
        argv=argv,
        visible_gpus=gpus,
        program=program,
        usable_cpus=usable_cpus,
        allow_cpu_oversubscribe=allow_cpu_oversubscribe,
    )
    notes += topo.notes
    new_env = {**device_env, **topo.env}
    checks = list(topo.checks)
    cfg: list[tuple[str, str]] = []
    extra: list[str] = []
    tail: list[str] = []  # a bare nargs='?' --resume goes last: it would swallow a following positional

    # Pairs first: a format-only row reads its output prefix from them.
    pairs_of: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        if row.action != "pairs":
            continue
        name = spelled[row.name]
        if row.old_name_of and (
            row.old_name_of in flags or (row.old_name_of == "--cfg-options" and scan.user_cfg_options)
        ):
            raise LegacyUsageError(
                f"{name} and {row.old_name_of} were both given; in the 2.x-era {tool}.py {name} was the old name "
                f"of {row.old_name_of} and using both was an error. Move the {name} pairs into {row.old_name_of}."
            )
        renames = dict(row.table)
        pairs_of[row.name] = []
        for key, val in _pairs(name, flags[row.name]):
            target = renames.get(key, key)
            if target.startswith(":"):
                notes.append(f"{name} {key} dropped: {target[1:]}")
                continue
            pairs_of[row.name].append((row.target + target, val))
    all_pairs = [kv for kvs in pairs_of.values() for kv in kvs]

    for row in rows:
        name = spelled[row.name]
        values = flags[row.name]
        action = row.action
        if action == "resume":
            shape = parser.options.get("--resume", "missing")
            if shape == "missing":
                raise LegacyUsageError(f"{name} has no equivalent in this {tool}.py: its parser has no --resume.")
            if shape == 0:
                extra.append("--resume")
                cfg.append(("load_from", values[0]))
                notes.append(
                    f"{name} {values[0]} -> --resume --cfg-options load_from={values[0]} (this tool's "
                    "--resume is a flag that resumes from load_from)"
                )
            else:
                extra += ["--resume", values[0]]
                notes.append(f"{name} {values[0]} -> --resume {values[0]}")
            if "--load-from" in flags:
                notes.append("--load-from dropped: --resume-from takes precedence, as in 2.x")
            if "--auto-resume" in flags:
                notes.append("--auto-resume dropped: --resume-from takes precedence, as in 2.x")
        elif action == "auto":
            if "--resume-from" in flags:
                continue
            shape = parser.options.get("--resume", "missing")
            if shape == "missing":
                raise LegacyUsageError(f"{name} has no equivalent in this {tool}.py: its parser has no --resume.")
            (extra if shape == 0 else tail).append("--resume")
            notes.append(f"{name} -> --resume (latest checkpoint in the work dir)")
        elif action == "cfg":
            if row.name == "--load-from" and "--resume-from" in flags:
                continue
            if row.nargs == 0:
                value = row.value
            elif row.nargs == "+":
                allowed = [k for k, _ in row.table]
                for v in values:
                    if allowed and v not in allowed:
                        raise LegacyUsageError(
                            f"{name} {v} has no 3.x meaning here: {row.target} takes {', '.join(allowed)}; {row.note}."
                        )
                value = "[" + ",".join(values) + "]"
            else:
                value = _checked(row, name, values[0])
            cfg.append((row.target, value))
            notes.append(f"{name} -> --cfg-options {row.target}" + (f"={row.value}" if row.nargs == 0 else ""))
        elif action == "pairs":
            cfg += pairs_of[row.name]
            notes.append(
                f"{name} -> --cfg-options "
                + (
                    f"{row.target}* ({row.note})"
                    if row.target and row.note
                    else f"{row.target}*"
                    if row.target
                    else "(its old name)"
                )
            )
        elif action == "option":
            if row.target not in parser.options:
                raise LegacyUsageError(
                    f"{name} has no equivalent in this {tool}.py: its parser has no {row.target}"
                    + (f" ({row.note})" if row.note else "")
                    + "."
                )
            extra += [row.target, *([] if row.nargs == 0 else values)]
            notes.append(f"{name} -> {row.target}" + (f" ({row.note})" if row.note else ""))
        elif action == "no_validate":
            cfg += [("val_cfg", "None"), ("val_dataloader", "None"), ("val_evaluator", "None")]
            notes.append(f"{name} -> --cfg-options val_cfg/val_dataloader/val_evaluator=None")
        elif action == "format":
            key = "test_evaluator." + row.target
            given = [kv for kv in all_pairs if kv[0] == key]
            cfg.append(("test_evaluator.format_only", "True"))
            if not given:
                cfg.append((key, _DEFAULT_PREFIX))
                notes.append(
                    f"{name} writes its files under {_DEFAULT_PREFIX} (set it with --eval-options "
                    f"{'jsonfile_prefix' if row.target == 'outfile_prefix' else row.target}=DIR)"
                )
            notes.append(f"{name} -> --cfg-options test_evaluator.format_only=True")
        elif action == "collect":
            cfg.append((row.target, values[0]))
            checks.append(("collect_dir", values[0]))
            notes.append(f"{name} -> --cfg-options {row.target}")
        elif action == "evaluators":
            table = dict(row.table)
            wanted = []
            for metric in values:
                if metric not in table:
                    raise LegacyUsageError(
                        f"{name} {metric} is not a metric the 2.x-era tool knew; use one of {', '.join(table)}."
                    )
                wanted.append(f"{metric}={table[metric]}")
            checks.append(("evaluators", f"{name} " + ",".join(wanted)))
            notes.append(
                f"{name} {' '.join(values)} dropped: in 3.x the metrics come from the config's "
                f"test_evaluator (checked before running that it computes them)"
            )
        elif action == "out_items":
            if row.target not in parser.options:
                raise LegacyUsageError(f"{name} has no equivalent in this {tool}.py: its parser has no {row.target}.")
            item = "metrics" if values == ["none"] else "pred"
            extra += [row.target, item]
            notes.append(
                f"{name} {' '.join(values)} -> {row.target} {item} (1.x writes every prediction field "
                "or only the metrics)"
            )

    user_keys = {kv.partition("=")[0] for kv in scan.user_cfg_options}
    keys = [k for k, _ in cfg]
    clash = [k for k in keys if k in user_keys] or [k for i, k in enumerate(keys) if k in keys[:i]]
    if clash:
        raise LegacyUsageError(
            f"{clash[0]} is set twice: by a 2.x flag and by --cfg-options (or another 2.x flag). Keep one of them."
        )
    if cfg:
        extra += ["--cfg-options", *[f"{k}={v}" for k, v in cfg]]
    extra += tail
    if topo.add_launcher:
        extra += ["--launcher", topo.add_launcher]
    if topo.launch is not None:
        # Checked before torchrun starts: otherwise each of N workers fails on it, after
        # seconds of imports, with its own traceback.
        if scan.positionals:
            checks.append(("config_file", scan.positionals[0]))
        if tool == "test" and len(scan.positionals) > 1:
            checks.append(("checkpoint_file", scan.positionals[1]))
        for flag in ("--resume-from", "--load-from"):
            if flag in flags:
                checks.append(("checkpoint_file", flags[flag][0]))
    if in_worker(env):
        new_env = {k: v for k, v in new_env.items() if k != "CUDA_VISIBLE_DEVICES"}
    return Plan(
        argv=tuple(scan.kept + extra),
        env=new_env,
        launch=topo.launch,
        notes=tuple(notes),
        warnings=tuple(topo.warnings),
        checks=tuple(checks),
        rules=rules_line,
    )


def _refuse_pkl_out(argv: Sequence[str], row: Flag) -> None:
    for i, token in enumerate(argv):
        flag, eq, inline = token.partition("=")
        if flag in row.spellings:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if value.endswith((".pkl", ".pickle")):
                raise LegacyUsageError(f"{flag} {value}: {row.note}.")


def _device(value: str) -> tuple[dict[str, str], str]:
    device = value.lower()
    if device == "cpu":
        return {"CUDA_VISIBLE_DEVICES": ""}, (
            "--device cpu -> CUDA_VISIBLE_DEVICES= (MMEngine uses the CPU when no GPU is visible)"
        )
    if device in ("cuda", "gpu") or device.startswith("cuda:"):
        return {}, f"--device {value} dropped: MMEngine uses CUDA whenever it is available"
    if device in ("mlu", "npu", "mps", "musa"):
        return {}, f"--device {value} dropped: MMEngine detects {device} devices itself"
    if device == "ipu":
        raise LegacyUsageError(
            "--device ipu has no 3.x equivalent: the MMEngine-era tools have no IPU support; train on GPUs or the CPU."
        )
    raise LegacyUsageError(f"--device {value!r} is not a device the 2.x-era tool knew (cpu, cuda, mlu, npu, ipu).")
