"""The `mmfix` and `mmfix-run` commands as a user meets them (issue 11, items 4-7), in real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, clean_env, run
from mmfix._cli import build_parser

MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")
MMFIX = [sys.executable, "-m", "mmfix"]
BIN = str(Path(sys.executable).parent)


def shell_env(**extra: str) -> dict[str, str]:
    """This environment's `python` first on PATH, as in a shell with the venv activated."""
    return clean_env(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", **extra)


# --- item 5: `mmfix status` / `mmfix doctor` answer for a Python started from this shell ----------


def status(*prefix: str, **env: str) -> dict:
    proc = run([*prefix, *MMFIX, "status", "--json"], env=shell_env(**env), check=True)
    return json.loads(proc.stdout)


def test_status_outside_every_door_says_not_active_and_how_to_turn_it_on() -> None:
    out = status()
    assert out["active"] is False and out["front_doors"] == [] and out["patches"] == {}
    assert out["doors"] == {
        "pth_hook_installed": False,
        "sitecustomize_on_pythonpath": False,
        "inside_mmfix_run": False,
        "pythonstartup_interactive_only": False,
    }
    text = run([*MMFIX, "status"], env=shell_env(), check=True).stdout
    assert "mmfix is NOT active for `python train.py` started from this shell" in text
    assert "mmfix-run python train.py" in text and "mmfix hook install" in text


def test_status_inside_sitecustomize_mmfix_run_and_both() -> None:
    site = str(REPO / "sitecustomize_example")
    out = status(PYTHONPATH=site)
    assert out["active"] and out["front_doors"] == ["sitecustomize"] and out["doors"]["sitecustomize_on_pythonpath"]
    assert out["patches"]["torch_load"]["state"] == "pending"  # a fresh Python: torch not imported yet

    out = status(MMFIX_RUN)
    assert out["active"] and out["front_doors"] == ["mmfix-run"] and out["doors"]["inside_mmfix_run"]

    out = status(MMFIX_RUN, PYTHONPATH=site)  # every door that fired is listed
    assert out["active"] and out["front_doors"] == ["mmfix-run", "sitecustomize"]

    out = status(PYTHONPATH=site, MMFIX_DISABLE="1")
    assert out["active"] is False and out["disabled"] is True
    assert (
        "switched off (MMFIX_DISABLE)"
        in run([*MMFIX, "status"], env=shell_env(PYTHONPATH=site, MMFIX_DISABLE="1")).stdout
    )


def test_status_says_pythonstartup_is_for_interactive_sessions_only() -> None:
    from mmfix import _interactive_startup as interactive_startup

    env = {"PYTHONSTARTUP": interactive_startup.__file__}
    out = status(**env)
    assert out["active"] is False and out["doors"]["pythonstartup_interactive_only"] is True
    text = run([*MMFIX, "status"], env=shell_env(**env), check=True).stdout
    assert "applies to interactive `python` sessions only" in text


@pytest.mark.slow
def test_doctor_reports_the_new_python_not_its_own_process() -> None:
    env = shell_env(PYTHONPATH=str(REPO / "sitecustomize_example"))
    report = json.loads(run([*MMFIX, "doctor", "--json"], env=env, check=True).stdout)
    assert report["mmfix"]["new_python"]["front_doors"] == ["sitecustomize"]
    text = run([*MMFIX, "doctor"], env=shell_env(), check=True).stdout
    assert "mmfix is NOT active for `python train.py` started from this shell" in text


# --- item 6: CLI conventions -------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_mmfix_run_help(flag: str) -> None:
    proc = run([MMFIX_RUN, flag], env=clean_env(), check=True)
    assert proc.stdout.startswith("usage: mmfix-run COMMAND [ARGS...]") and "--version" in proc.stdout
    assert proc.stderr == ""


def test_mmfix_run_version_and_its_help_flag_after_a_command_belongs_to_the_command() -> None:
    import mmfix

    assert (
        run([MMFIX_RUN, "--version"], env=clean_env(), check=True).stdout.strip()
        == f"mmfix-run (mmfix {mmfix.__version__})"
    )
    proc = run(
        [MMFIX_RUN, sys.executable, "-c", "import sys; print(sys.argv[1:])", "--help"], env=clean_env(), check=True
    )
    assert proc.stdout.strip() == "['--help']"


def test_every_subcommand_help_describes_it_and_its_options() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == {
        "status",
        "hook",
        "run",
        "startup-file",
        "translate",
        "doctor",
        "inspect",
        "convert-config",
        "convert-checkpoint",
        "image-metas",
    }
    for name, subparser in sub.choices.items():
        assert subparser.description and len(subparser.description) > 30, name
        for action in subparser._actions:
            assert action.help, (name, action.dest)
        text = run([*MMFIX, name, "--help"], env=clean_env(), check=True).stdout
        assert subparser.description.split(".")[0][:40] in " ".join(text.split()), (name, text)


@pytest.mark.parametrize(
    "command",
    [[*MMFIX, "doctor"], [*MMFIX, "status", "--json"], [*MMFIX, "--help"], [MMFIX_RUN, "--help"]],
    ids=["doctor", "status", "help", "mmfix-run-help"],
)
@pytest.mark.slow
def test_output_into_a_closed_pipe_ends_quietly(command: list[str]) -> None:
    # The reader is gone before the first write, as with `| head` once head has its lines.
    read, write = os.pipe()
    proc = subprocess.Popen(command, stdout=write, stderr=subprocess.PIPE, env=shell_env(), text=True)
    os.close(write)
    os.close(read)
    err = proc.communicate(timeout=120)[1]
    assert err == "" and proc.returncode in (0, 141), (proc.returncode, err)


@pytest.mark.slow
def test_errors_print_with_their_public_name_and_no_traceback(tmp_path: Path) -> None:
    garbage = tmp_path / "epoch_1.pth"
    garbage.write_bytes(b"not a checkpoint at all")
    code = f"import mmfix, torch; torch.load({str(garbage)!r})"
    proc = run([sys.executable, "-c", code], env=clean_env())
    assert proc.returncode == 1
    assert proc.stderr.startswith("mmfix.CheckpointCorruptError: ") and str(garbage) in proc.stderr
    assert "Traceback" not in proc.stderr and "mmfix._errors" not in proc.stderr
    proc = run([sys.executable, "-c", code], env=clean_env(MMFIX_LOG_LEVEL="debug"))
    assert "Traceback" in proc.stderr and "\nmmfix.CheckpointCorruptError: " in proc.stderr

    import pickle

    import mmfix

    error = pickle.loads(pickle.dumps(mmfix.CheckpointCorruptError("x", "p")))
    assert type(error) is mmfix.CheckpointCorruptError and type(error).__module__ == "mmfix"


# --- item 7: `mmfix translate` runs nothing ------------------------------------------------------

TOOL_WITH_SIDE_EFFECT = """
import argparse, os
open(os.environ["SIDE_EFFECT"], "w").write("the script ran")  # top-level code
parser = argparse.ArgumentParser()
parser.add_argument('config')
parser.add_argument('--work-dir')
parser.add_argument('--cfg-options', nargs='+')
parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none')
args = parser.parse_args()
"""


def test_translate_reads_the_parser_from_the_source_and_runs_nothing(tmp_path: Path) -> None:
    tool = tmp_path / "train.py"
    tool.write_text(TOOL_WITH_SIDE_EFFECT)
    marker = tmp_path / "ran"
    env = clean_env(SIDE_EFFECT=str(marker))
    proc = run(
        [*MMFIX, "translate", "--json", sys.executable, str(tool), "cfg.py", "--gpus", "2", "--seed", "3"],
        env=env,
        check=True,
    )
    data = json.loads(proc.stdout)
    assert data["changed"] and data["command"][1:3] == ["-m", "torch.distributed.run"]
    assert "randomness.seed=3" in data["command"] and data["command"][-2:] == ["--launcher", "pytorch"]
    assert not marker.exists()  # no trace of the script's top-level code

    # The control: --run-to-parse does run the top-level code, and agrees.
    proc = run(
        [
            *MMFIX,
            "translate",
            "--json",
            "--run-to-parse",
            sys.executable,
            str(tool),
            "cfg.py",
            "--gpus",
            "2",
            "--seed",
            "3",
        ],
        env=env,
        check=True,
    )
    assert marker.exists() and json.loads(proc.stdout)["command"][3:] == data["command"][3:]


def test_translate_asks_for_run_to_parse_when_the_source_cannot_say(tmp_path: Path) -> None:
    tool = tmp_path / "computed.py"
    tool.write_text(TOOL_WITH_SIDE_EFFECT.replace("'--work-dir'", "'--' + 'work-dir'"))
    marker = tmp_path / "ran"
    proc = run(
        [*MMFIX, "translate", sys.executable, str(tool), "cfg.py", "--gpus", "2"],
        env=clean_env(SIDE_EFFECT=str(marker)),
    )
    assert proc.returncode == 2 and "--run-to-parse" in proc.stderr and "cannot be read from its source" in proc.stderr
    assert not marker.exists() and "Traceback" not in proc.stderr
