"""The ``mmfix`` command (and ``mmfix-run``): a thin front over the modules below."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from . import __version__
from ._errors import MmfixUsageError


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def _show(report: Any, as_json: bool, formatter: Any) -> int:
    if as_json:
        _print_json(report)
    else:
        print(formatter(report))
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    import mmfix

    data = mmfix.status()
    if args.json:
        _print_json(data)
        return 0
    print(f"mmfix {__version__}: {'enabled' if data['enabled'] else 'disabled (MMFIX_DISABLE)'}")
    print(f"front doors: {', '.join(data['front_doors']) or 'none'}")
    for name, info in data["patches"].items():
        print(f"  {name:<22} {info['state']:<9} {info['reason']}")
    return 0


def _cmd_hook(args: argparse.Namespace) -> int:
    from . import hook

    if args.action == "install":
        for path in hook.install(args.site_dir):
            print(f"installed {path}")
        print("mmfix now activates in every Python process of this environment (MMFIX_DISABLE=1 turns it off).")
    elif args.action == "uninstall":
        removed = hook.uninstall(args.site_dir)
        print("\n".join(f"removed {p}" for p in removed) or "nothing to remove: no mmfix start-up file here")
    else:
        data = hook.status(args.site_dir)
        if args.json:
            _print_json(data)
        else:
            print(f"site-packages: {data['site_dir']}")
            for name, state in data["files"].items():  # type: ignore[union-attr]
                print(f"  {name}: {state}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from ._run import run

    run(list(args.command))


def _cmd_startup_file(args: argparse.Namespace) -> int:
    from . import interactive_startup

    print(os.path.abspath(interactive_startup.__file__))
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ._errors import CheckpointError
    from ._inspect_checkpoint import format_report, inspect_checkpoint

    try:
        report = inspect_checkpoint(args.checkpoint)
    except CheckpointError as exc:
        print(f"mmfix inspect: {exc}", file=sys.stderr)
        return 1
    return _show(report, args.json, format_report)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import collect, format_report

    return _show(collect(), args.json, format_report)


def _cmd_translate(args: argparse.Namespace) -> int:
    import subprocess

    from ._run import environment_for
    from .launch.execute import describe
    from .patches.legacy_cli import TRANSLATION_MARKER

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise MmfixUsageError("mmfix translate: no command given. Usage: mmfix translate python tools/train.py "
                              "CONFIG --gpus 2 --seed 0")
    if command[0].endswith(".py"):
        command = [sys.executable, *command]
    elif not os.path.basename(command[0]).startswith("python"):
        raise MmfixUsageError(f"mmfix translate: {command[0]!r} is not a Python command; give the training "
                              "command as `python tools/train.py ...`.")
    env = environment_for(dict(os.environ))
    env["MMFIX_TRANSLATE_ONLY"] = "1"
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(TRANSLATION_MARKER)]
    if not lines:
        sys.stderr.write(proc.stderr[-4000:])
        if proc.returncode == 2 and "error:" in proc.stderr:
            return 2  # the translator's (or argparse's) usage error, already printed
        print(f"mmfix translate: the command did not parse its command line with argparse "
              f"(exit status {proc.returncode}), so there is nothing to translate.", file=sys.stderr)
        return proc.returncode or 1
    data = json.loads(lines[-1][len(TRANSLATION_MARKER):])
    if args.json:
        _print_json(data)
        return 0
    print(f"original:    {describe(data['original'])}")
    if not data["changed"]:
        print("translated:  unchanged" + (f" ({data['reason']})" if data.get("reason") else ""))
        return 0
    print(f"translated:  {describe(data['command'])}")
    print("environment: " + (" ".join(f"{k}={v}" for k, v in data["env"].items()) or "unchanged"))
    for note in data["notes"]:
        print(f"  - {note}")
    for warning in data["warnings"]:
        print(f"  ! {warning}")
    return 0


def _cmd_convert_config(args: argparse.Namespace) -> int:
    from ._errors import ConfigConversionError
    from .configs._files import diff_lines, load, render

    if not os.path.isfile(args.config):
        raise MmfixUsageError(f"mmfix convert-config: {args.config!r} is not a file.")
    try:
        kind, source, converted, report = load(args.config)
    except ConfigConversionError as exc:
        print(exc.message, file=sys.stderr)
        return exc.code
    if kind == "3.x":
        print(f"mmfix convert-config: {args.config} is already a 3.x config (no 2.x keys); nothing to convert.",
              file=sys.stderr)
    if args.diff:
        print("\n".join(diff_lines(source, converted, report)))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(render(args.config, converted, report))
        print(f"wrote {args.output}: {report.summary()}", file=sys.stderr)
    elif not args.diff:
        print(render(args.config, converted, report))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mmfix",
        description="Makes OpenMMLab training behave on multi-GPU machines, clusters and modern PyTorch.",
    )
    parser.add_argument("--version", action="version", version=f"mmfix {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("status", help="which patches are active in this interpreter, and why")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_status)

    p = sub.add_parser("hook", help="install/uninstall the start-up hook in site-packages")
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument("--site-dir", default=None, help="site-packages folder (default: this environment's)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_hook)

    p = sub.add_parser("run", help="run a command with mmfix active (same as mmfix-run)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("startup-file", help="print the path of the PYTHONSTARTUP file (interactive only)")
    p.set_defaults(func=_cmd_startup_file)

    p = sub.add_parser("translate", help="print how a legacy 2.x command is translated, without running it")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("command", nargs=argparse.REMAINDER, help="python tools/train.py CONFIG --gpus 2 ...")
    p.set_defaults(func=_cmd_translate)

    p = sub.add_parser("doctor", help="versions, devices, launch variables and mmfix state, for a bug report")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser("convert-config", help="write an MMDetection 2.x config as a self-contained 3.x config")
    p.add_argument("config", help="the 2.x config file (its _base_ files are merged in)")
    p.add_argument("-o", "--output", help="the 3.x config to write (default: print it)")
    p.add_argument("--diff", action="store_true", help="show the conversion key by key")
    p.set_defaults(func=_cmd_convert_config)

    p = sub.add_parser("inspect", help="describe a checkpoint without executing its pickle")
    p.add_argument("checkpoint")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_inspect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except MmfixUsageError as exc:
        print(f"mmfix: {exc.message}" if not exc.message.startswith("mmfix") else exc.message, file=sys.stderr)
        return exc.code


def run_main() -> int:
    """Entry point of ``mmfix-run``."""
    try:
        from ._run import run

        run(sys.argv[1:])
    except MmfixUsageError as exc:
        print(exc.message, file=sys.stderr)
        return exc.code
    return 0  # pragma: no cover - run() never returns
