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
    from ._doctor import format_new_python, new_python

    info = new_python()
    if args.json:
        _print_json({"version": __version__, **info})
        return 0
    print(f"mmfix {__version__}")
    print("\n".join(format_new_python(info)))
    if info["patches"]:
        print("patches in that Python (each attaches when the module it patches is imported):")
        for name, patch in info["patches"].items():
            print(f"  {name:<22} {patch['state']:<9} {patch['reason']}")
    return 0


def _cmd_hook(args: argparse.Namespace) -> int:
    from . import _pth_installer as hook

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
            for name, state in data["files"].items():
                print(f"  {name}: {state}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from ._run import run

    run(list(args.command))


def _cmd_startup_file(args: argparse.Namespace) -> int:
    from . import _interactive_startup as interactive_startup

    print(os.path.abspath(interactive_startup.__file__))
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ._checkpoint.report import format_report, inspect_checkpoint
    from ._errors import CheckpointError

    try:
        report = inspect_checkpoint(args.checkpoint)
    except CheckpointError as exc:
        print(f"mmfix inspect: {exc}", file=sys.stderr)
        return 1
    return _show(report, args.json, format_report)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from ._doctor import collect, format_report

    return _show(collect(), args.json, format_report)


def _cmd_translate(args: argparse.Namespace) -> int:
    from ._launch.execute import describe

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise MmfixUsageError(
            "mmfix translate: no command given. Usage: mmfix translate python tools/train.py CONFIG --gpus 2 --seed 0"
        )
    if command[0].endswith(".py"):
        command = [sys.executable, *command]
    elif not os.path.basename(command[0]).startswith("python"):
        raise MmfixUsageError(
            f"mmfix translate: {command[0]!r} is not a Python command; give the training "
            "command as `python tools/train.py ...`."
        )
    data = _translate_by_running(command) if args.run_to_parse else _translate_statically(command)
    if isinstance(data, int):
        return data
    if args.json:
        _print_json(data)
        return 0
    print(f"original:    {describe(data['original'])}")
    if data.get("rules"):
        print(f"rules:       {data['rules']}")
    if not data["changed"]:
        print("translated:  unchanged" + (f" ({data['reason']})" if data.get("reason") else ""))
    else:
        print(f"translated:  {describe(data['command'])}")
        print("environment: " + (" ".join(f"{k}={v}" for k, v in data["env"].items()) or "unchanged"))
    for note in data["notes"]:
        print(f"  - {note}")
    for warning in data["warnings"]:
        print(f"  ! {warning}")
    return 0


_RUN_TO_PARSE = (
    "Add --run-to-parse to run the script up to the moment it parses its command line (its top-level "
    "code and imports run; nothing after the parse does)."
)


def _translate_statically(command: list[str]) -> dict[str, Any]:
    """The translation from the script's source: nothing of the script runs."""
    from ._launch.early import translate_statically
    from ._launch.translate import LegacyUsageError

    script = command[1] if len(command) > 1 else ""
    if not script.endswith(".py") or not os.path.isfile(script):
        raise MmfixUsageError(
            f"mmfix translate: no script file to read in `{' '.join(command[:3])}` (a module run "
            f"with -m, code given with -c, or a missing file). {_RUN_TO_PARSE}"
        )
    try:
        data = translate_statically(command[0], script, command[2:])
    except LegacyUsageError as exc:
        usage = getattr(exc, "usage", "")
        raise MmfixUsageError(f"{usage}{os.path.basename(script)}: error: {exc.message}") from None
    if data is None:
        raise MmfixUsageError(
            f"mmfix translate: the argument parser of {script} cannot be read from its source with "
            f"certainty (only OpenMMLab-shaped tools built from plain add_argument calls can). "
            f"{_RUN_TO_PARSE}"
        )
    return data


def _translate_by_running(command: list[str]) -> dict[str, Any] | int:
    """--run-to-parse: the script runs until its parse_args, where mmfix prints the translation and exits."""
    import subprocess

    from ._launch.report import TRANSLATION_MARKER
    from ._run import environment_for

    env = environment_for(dict(os.environ))
    env["MMFIX_TRANSLATE_ONLY"] = "1"
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(TRANSLATION_MARKER)]
    if not lines:
        sys.stderr.write(proc.stderr[-4000:])
        if proc.returncode == 2 and "error:" in proc.stderr:
            return 2  # the translator's (or argparse's) usage error, already printed
        print(
            f"mmfix translate: the command did not parse its command line with argparse "
            f"(exit status {proc.returncode}), so there is nothing to translate.",
            file=sys.stderr,
        )
        return proc.returncode or 1
    data: dict[str, Any] = json.loads(lines[-1][len(TRANSLATION_MARKER) :])
    return data


def _sub(sub: Any, name: str, summary: str, details: str = "") -> argparse.ArgumentParser:
    """A subcommand whose --help describes it (the summary) before its options."""
    return sub.add_parser(
        name, help=summary, description=summary[0].upper() + summary[1:] + "." + (f" {details}" if details else "")
    )


JSON_HELP = "print the same as JSON (for scripts and bug reports)"


def _load_config(path: str, command: str) -> tuple[str, dict[str, Any], dict[str, Any], Any]:
    """(kind, source, converted, report) of a config file; a missing file or a 2.x key that cannot
    convert is one paragraph and a non-zero exit."""
    from ._configs._files import load
    from ._errors import ConfigConversionError

    if not os.path.isfile(path):
        raise MmfixUsageError(f"mmfix {command}: {path!r} is not a file.")
    try:
        return load(path)
    except ConfigConversionError as exc:
        raise MmfixUsageError(exc.message, exc.exit_status) from None


def _cmd_convert_config(args: argparse.Namespace) -> int:
    from ._configs._files import diff_lines, render

    kind, source, converted, report = _load_config(args.config, "convert-config")
    if kind == "3.x":
        print(
            f"mmfix convert-config: {args.config} is already a 3.x config (no 2.x keys); nothing to convert.",
            file=sys.stderr,
        )
    if args.diff:
        print("\n".join(diff_lines(source, converted, report)))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(render(args.config, converted, report))
        print(f"wrote {args.output}: {report.summary()}", file=sys.stderr)
    elif not args.diff:
        print(render(args.config, converted, report))
    return 0


def _cmd_convert_checkpoint(args: argparse.Namespace) -> int:
    from ._checkpoint.convert2x import convert_checkpoint
    from ._errors import CheckpointError

    if not os.path.isfile(args.old):
        raise MmfixUsageError(f"mmfix convert-checkpoint: {args.old!r} is not a file.")
    if args.config and not os.path.isfile(args.config):
        raise MmfixUsageError(f"mmfix convert-checkpoint: --config {args.config!r} is not a file.")
    if os.path.exists(args.new) and not args.force:
        raise MmfixUsageError(
            f"mmfix convert-checkpoint: {args.new!r} exists; give another path, or --force to replace it."
        )
    try:
        done = convert_checkpoint(args.old, args.new, args.config)
    except CheckpointError as exc:
        text = str(exc)
        print(text if text.startswith("mmfix") else f"mmfix convert-checkpoint: {text}", file=sys.stderr)
        return 1
    if done.written:
        print(f"wrote {args.new}: {done.summary}", file=sys.stderr)
    else:
        print(f"mmfix convert-checkpoint: {done.summary}; nothing written.", file=sys.stderr)
    return 0


def _cmd_image_metas(args: argparse.Namespace) -> int:
    from ._configs._image_metas import is_url, open_images_sets, write_meta_file

    if args.nproc < 1:
        raise MmfixUsageError(f"mmfix image-metas: --nproc {args.nproc}: give 1 or more processes.")
    converted = _load_config(args.config, "image-metas")[2]
    sets = list(open_images_sets(converted))
    if not sets:
        raise MmfixUsageError(
            f"mmfix image-metas: {args.config} names no OpenImagesDataset / OpenImagesChallengeDataset; "
            "only those read image sizes from a meta_file."
        )
    sources: dict[str, tuple[str, tuple[Any, ...]]] = {}  # meta_file -> (where, what it is made from)
    for where, ds in sets:
        meta = ds["meta_file"]
        if not meta:
            raise MmfixUsageError(
                f"mmfix image-metas: {where} has no meta_file: set {where}.meta_file in the config "
                "(3.x's OpenImages datasets cannot be built without one)."
            )
        if is_url(meta):
            raise MmfixUsageError(
                f"mmfix image-metas: {where}.meta_file {meta} is a URL; write it locally (set a local "
                "path in the config), then copy it there."
            )
        source = (ds["type"], ds["ann_file"], ds["img_prefix"])
        if meta in sources:
            if sources[meta][1] != source:
                raise MmfixUsageError(
                    f"mmfix image-metas: {sources[meta][0]} and {where} name the same meta_file {meta} "
                    "for different annotation files or image folders; one file cannot hold both lists. "
                    "Give each its own meta_file."
                )
            continue
        sources[meta] = (where, source)
        if os.path.exists(meta) and not args.force:
            stale = isinstance(ds["ann_file"], str) and _newer(ds["ann_file"], meta)
            print(
                f"{where}: {meta} exists, kept"
                + (" — but it is older than its annotation file" if stale else "")
                + " (--force writes it again)",
                file=sys.stderr,
            )
            continue
        count = write_meta_file(ds["ann_file"], ds["img_prefix"], meta, ds["type"], nproc=args.nproc)
        print(f"{where}: wrote {meta} ({count} images from {ds['ann_file']})", file=sys.stderr)
    return 0


def _newer(path: str, than: str) -> bool:
    try:
        return os.path.getmtime(path) > os.path.getmtime(than)
    except OSError:
        return False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mmfix",
        description="Makes OpenMMLab training behave on multi-GPU machines, clusters and modern PyTorch. "
        "`mmfix COMMAND --help` describes each command.",
    )
    parser.add_argument("--version", action="version", version=f"mmfix {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = _sub(
        sub,
        "status",
        "whether `python train.py` started from this shell runs with mmfix, through which front doors, and its patches",
        "Starts that Python (`python` on PATH) to find out, so the answer covers the .pth hook, sitecustomize "
        "on PYTHONPATH, mmfix-run and MMFIX_DISABLE as they are set now.",
    )
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_cmd_status)

    p = _sub(
        sub,
        "hook",
        "install, uninstall or show the start-up hook (mmfix.pth) in site-packages",
        "Installed, every Python of this environment activates mmfix at start-up (MMFIX_DISABLE=1 still turns it off).",
    )
    p.add_argument("action", choices=("install", "uninstall", "status"), help="what to do")
    p.add_argument("--site-dir", default=None, help="site-packages folder (default: this environment's)")
    p.add_argument("--json", action="store_true", help=JSON_HELP + " (status only)")
    p.set_defaults(func=_cmd_hook)

    p = _sub(
        sub,
        "run",
        "run a command with mmfix active in it and its Python children (same as mmfix-run)",
        "Example: mmfix run -- python tools/train.py CONFIG --gpus 2.",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    p.set_defaults(func=_cmd_run)

    p = _sub(
        sub,
        "startup-file",
        "print the path of mmfix's PYTHONSTARTUP file",
        "Python reads PYTHONSTARTUP for interactive sessions only, never for `python train.py`: "
        "export PYTHONSTARTUP=$(mmfix startup-file).",
    )
    p.set_defaults(func=_cmd_startup_file)

    p = _sub(
        sub,
        "translate",
        "print how a legacy 2.x command line is translated, without running it",
        "The script's argument parser is read from its source; nothing of the script runs. Where only "
        "running the script can tell, --run-to-parse runs it up to its argument parsing.",
    )
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument(
        "--run-to-parse",
        action="store_true",
        help="run the script's top-level code up to its parse_args (for parsers that cannot be read from the source)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="python tools/train.py CONFIG --gpus 2 ...")
    p.set_defaults(func=_cmd_translate)

    p = _sub(sub, "doctor", "versions, devices, launch variables and mmfix's state, for a bug report")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_cmd_doctor)

    p = _sub(
        sub,
        "convert-config",
        "write an MMDetection 2.x config as a self-contained 3.x config",
        "Merges the 2.x config with its _base_ files, converts it as the automatic path does, and writes "
        "a readable 3.x config with a header listing what was converted and dropped.",
    )
    p.add_argument("config", help="the 2.x config file (its _base_ files are merged in)")
    p.add_argument("-o", "--output", help="the 3.x config to write (default: print it)")
    p.add_argument("--diff", action="store_true", help="show the conversion key by key")
    p.set_defaults(func=_cmd_convert_config)

    p = _sub(
        sub,
        "convert-checkpoint",
        "write an MMDetection 2.x checkpoint in the 3.x layout of its family (YOLACT …)",
        "Loads may do this in memory (mmfix renames a 2.x state dict whose layers 3.x moved); this writes "
        "it out, atomically, for tools without mmfix. With --config, the renamed state dict is checked key "
        "for key against that config's model (2.x configs are converted first) and nothing is written if "
        "any key is missing or unexpected.",
    )
    p.add_argument("old", help="the 2.x checkpoint (.pth)")
    p.add_argument("new", help="the checkpoint to write")
    p.add_argument("--config", help="the model's config (2.x or 3.x): rename towards its keys and check them all")
    p.add_argument("--force", action="store_true", help="replace NEW if it exists")
    p.set_defaults(func=_cmd_convert_checkpoint)

    p = _sub(
        sub,
        "image-metas",
        "write the image-size files (meta_file) a config's OpenImages datasets read on 3.x",
        "2.x read a training image's size from the image; 3.x's OpenImages datasets read every size from "
        "meta_file, which 2.x configs named only for evaluation. Reads each image the annotation file "
        "lists, as 2.x did, and writes the files that do not exist yet. Works on 2.x and 3.x configs.",
    )
    p.add_argument("config", help="the config (2.x or 3.x) whose OpenImages datasets name a meta_file")
    p.add_argument("--nproc", type=int, default=max(1, min(8, os.cpu_count() or 1)), help="processes reading images")
    p.add_argument("--force", action="store_true", help="write files that exist too")
    p.set_defaults(func=_cmd_image_metas)

    p = _sub(
        sub,
        "inspect",
        "describe a checkpoint without executing its pickle",
        "Format, size, the devices its storages were saved on, the globals it needs and whether mmfix "
        "allows them, whether it can be memory-mapped, and its top-level keys.",
    )
    p.add_argument("checkpoint", help="path of the .pth file")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_cmd_inspect)
    return parser


def _quiet_broken_pipe(run: Any) -> int:
    """Run the command; output cut short by its reader (`mmfix doctor | head`) ends quietly."""
    try:
        code = int(run() or 0)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush is silent.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # what a shell reports for a command ended by SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2

    def command() -> int:
        try:
            return int(args.func(args) or 0)
        except MmfixUsageError as exc:
            named = exc.message.startswith("mmfix") or exc.message.split(" ")[0].endswith(":")
            print(exc.message if named else f"mmfix: {exc.message}", file=sys.stderr)
            return exc.exit_status

    return _quiet_broken_pipe(command)


RUN_USAGE = """usage: mmfix-run COMMAND [ARGS...]

Run COMMAND with mmfix active in it and in every Python process it starts, e.g.
  mmfix-run python tools/train.py configs/my_config.py --gpus 2

COMMAND replaces mmfix-run (exit status and signals are its own). The same as
`mmfix run -- COMMAND`. `mmfix status` inside shows which front doors fired.

options (only before COMMAND; everything after it belongs to COMMAND):
  -h, --help  show this help and exit
  --version   show mmfix's version and exit
"""


def run_main() -> int:
    """Entry point of ``mmfix-run``."""
    argv = sys.argv[1:]
    if argv[:1] in (["-h"], ["--help"]):
        return _quiet_broken_pipe(lambda: print(RUN_USAGE, end=""))
    if argv[:1] == ["--version"]:
        return _quiet_broken_pipe(lambda: print(f"mmfix-run (mmfix {__version__})"))
    try:
        from ._run import run

        run(argv)
    except MmfixUsageError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_status
    return 0  # pragma: no cover - run() never returns
