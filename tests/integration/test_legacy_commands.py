"""Legacy 2.x command lines, end to end on CPU (gloo), with real torchrun launches."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import CONFIG, REPO, TEST, TRAIN, clean_env, processes_mentioning, run

pytestmark = pytest.mark.slow  # launched jobs and real tools

DDP_CONFIG = REPO / "tests" / "configs" / "toy_ddp.py"
LEGACY2X = REPO / "tests" / "legacy2x_train.py"
MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")


def env(**extra: str) -> dict[str, str]:
    return clean_env(PYTHONPATH=str(REPO / "tests"), **extra)


def mmfix_python(*args: str, environment: dict[str, str] | None = None, timeout: float = 300):
    proc = run([MMFIX_RUN, sys.executable, *map(str, args)], env=environment or env(), timeout=timeout)
    return proc, proc.stdout + proc.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probes(work_dir: Path) -> list[dict]:
    return [torch.load(p) for p in sorted(work_dir.glob("probe_rank*.pth"))]


def test_legacy_gpus_2_trains_with_world_size_2_and_resume_from_continues(tmp_path: Path) -> None:
    proc, log = mmfix_python(TRAIN, DDP_CONFIG, "--work-dir", tmp_path, "--gpus", "2", "--seed", "0", "--no-validate")
    assert proc.returncode == 0, log[-3000:]
    assert log.count("command line translated:") == 1
    assert "--nproc_per_node 2" in log and "randomness.seed=0" in log
    # CPU host: exactly one warning about CPU workers, none repeated by the workers about nccl
    assert log.count("runs 2 CPU workers with the gloo backend") == 1 and "mmfix uses gloo instead" not in log
    ranks = probes(tmp_path)
    assert [p["world_size"] for p in ranks] == [2, 2] and [p["steps"] for p in ranks] == [8, 8]
    assert (tmp_path / "saved_by_rank0").exists() and not (tmp_path / "saved_by_rank1").exists()
    assert (tmp_path / "epoch_2.pth").exists() and not list(tmp_path.glob("best_*.pth"))  # no validation ran

    proc, log = mmfix_python(
        TRAIN,
        DDP_CONFIG,
        "--work-dir",
        tmp_path,
        "--gpus",
        "2",
        "--resume-from",
        tmp_path / "epoch_2.pth",
        "--cfg-options",
        "train_cfg.max_epochs=3",
    )
    assert proc.returncode == 0, log[-3000:]
    assert "resumed epoch: 2, iter: 8" in log and (tmp_path / "epoch_3.pth").exists()

    # test.py with 2.x --eval on the trained checkpoint
    proc, log = mmfix_python(
        TEST, DDP_CONFIG, tmp_path / "epoch_3.pth", "--eval", "mse", "--work-dir", tmp_path / "test"
    )
    assert proc.returncode == 0, log[-3000:]
    assert "toy/mse:" in log and "toy/acc" not in log  # the metric --eval asked for, and only it


def test_a_2x_script_that_defines_gpus_is_left_alone() -> None:
    proc, log = mmfix_python(LEGACY2X, "cfg.py", "--gpus", "2", "--seed", "3")
    assert proc.returncode == 0, log
    result = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["args"]["gpus"] == 2 and result["args"]["seed"] == 3 and result["WORLD_SIZE"] is None
    assert "legacy command translated" not in log


def test_torch_distributed_launch_with_a_parser_that_knows_only_local_underscore_rank() -> None:
    cmd = [
        MMFIX_RUN,
        sys.executable,
        "-m",
        "torch.distributed.launch",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
        str(LEGACY2X),
        "cfg.py",
        "--launcher",
        "pytorch",
    ]
    proc = run(cmd, env=env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(x[7:]) for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert sorted(r["args"]["local_rank"] for r in results) == [0, 1]
    # and stock fails exactly as users see it
    stock = run(cmd[1:], env=env(MMFIX_DISABLE="1"), timeout=300)
    assert stock.returncode != 0 and "unrecognized arguments: --local-rank" in stock.stderr


def test_two_nodes_on_localhost_form_one_job(tmp_path: Path) -> None:
    port = str(free_port())
    nodes = []
    for rank in ("0", "1"):
        e = env(NNODES="2", NODE_RANK=rank, MASTER_ADDR="127.0.0.1", PORT=port)
        nodes.append(
            subprocess.Popen(
                [
                    MMFIX_RUN,
                    sys.executable,
                    str(TRAIN),
                    str(DDP_CONFIG),
                    "--work-dir",
                    str(tmp_path),
                    "--gpus",
                    "1",
                    "--no-validate",
                ],
                env=e,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    logs = [n.communicate(timeout=300)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    ranks = probes(tmp_path)
    assert len(ranks) == 2 and all(p["world_size"] == 2 for p in ranks)
    assert torch.equal(ranks[0]["state"]["bbox_head.weight"], ranks[1]["state"]["bbox_head.weight"])


def test_missing_launcher_is_added_in_torchrun_workers(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(TRAIN),
        str(DDP_CONFIG),
        "--work-dir",
        str(tmp_path),
        "--cfg-options",
        "train_cfg.max_epochs=1",
    ]
    proc, log = mmfix_python(*cmd[1:])
    assert proc.returncode == 0, log[-3000:]
    assert "--launcher pytorch added: this is a torchrun worker" in log
    assert [p["world_size"] for p in probes(tmp_path)] == [2, 2]


def test_launcher_pytorch_without_a_launcher_is_a_clear_error() -> None:
    proc, log = mmfix_python(TRAIN, CONFIG, "--launcher", "pytorch")
    assert proc.returncode == 2 and "Traceback" not in log
    assert "no launcher started this process" in log and "python -m torch.distributed.run --nproc_per_node N" in log


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--gpus", "0"], "--gpus must be at least 1"),
        (["--gpus", "-1"], "--gpus must be at least 1"),
        (["--gpus", "2.5"], "--gpus expects a whole number"),
        (["--gpus", "2", "--gpu-ids", "0", "1"], "--gpus and --gpu-ids were both given"),
        (["--options", "a=1", "--cfg-options", "b=2"], "--options and --cfg-options were both given"),
    ],
)
def test_usage_errors_exit_2_with_one_paragraph(args: list[str], needle: str) -> None:
    proc, log = mmfix_python(TRAIN, CONFIG, *args)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in log


def test_multi_node_without_master_addr_and_a_busy_port_are_reported_before_anything_starts() -> None:
    proc, log = mmfix_python(TRAIN, CONFIG, "--gpus", "1", environment=env(NNODES="2", NODE_RANK="0"))
    assert proc.returncode == 2 and "needs MASTER_ADDR" in proc.stderr
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        start = time.monotonic()
        proc, log = mmfix_python(TRAIN, CONFIG, "--gpus", "2", environment=env(PORT=str(port)))
    assert proc.returncode == 2 and f"port {port} (from PORT/MASTER_PORT) is already in use" in proc.stderr
    assert "torch.distributed.run" not in log.split("error:")[0] or time.monotonic() - start < 60


def test_fuse_conv_bn_is_refused() -> None:
    proc, _log = mmfix_python(TEST, CONFIG, "x.pth", "--fuse-conv-bn")
    assert proc.returncode == 2 and "--fuse-conv-bn has no 3.x equivalent" in proc.stderr


def test_mmfix_translate_prints_and_runs_nothing(tmp_path: Path) -> None:
    proc = run(
        [
            sys.executable,
            "-m",
            "mmfix",
            "translate",
            "--json",
            sys.executable,
            str(TRAIN),
            str(CONFIG),
            "--work-dir",
            str(tmp_path),
            "--gpus",
            "2",
            "--seed",
            "0",
        ],
        env=env(),
        check=True,
    )
    data = json.loads(proc.stdout)
    assert data["changed"] and data["command"][1:4] == ["-m", "torch.distributed.run", "--standalone"]
    assert "randomness.seed=0" in data["command"] and data["command"][-2:] == ["--launcher", "pytorch"]
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # nothing ran
    text = run(
        [
            sys.executable,
            "-m",
            "mmfix",
            "translate",
            sys.executable,
            str(TEST),
            str(CONFIG),
            "c.pth",
            "--gpu-id",
            "0",
            "--eval",
            "acc",
        ],
        env=env(),
        check=True,
    ).stdout
    assert "test_evaluator.metric=[acc]" in text
    plain = run(
        [
            sys.executable,
            "-m",
            "mmfix",
            "translate",
            "--run-to-parse",
            sys.executable,
            "-c",
            "import argparse; p = argparse.ArgumentParser(); p.add_argument('--gpus'); p.parse_args()",
            "--gpus",
            "2",
        ],
        env=env(),
        check=True,
    ).stdout
    assert "unchanged" in plain


def test_sigterm_to_the_launched_command_leaves_no_process_behind(tmp_path: Path) -> None:
    work = tmp_path / "sigterm_marker_dir"
    job = subprocess.Popen(
        [
            MMFIX_RUN,
            sys.executable,
            str(TRAIN),
            str(DDP_CONFIG),
            "--work-dir",
            str(work),
            "--gpus",
            "2",
            "--cfg-options",
            "train_cfg.max_epochs=100000",
        ],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    seen = ""
    while time.monotonic() < deadline:
        line = job.stdout.readline()
        seen += line
        if "Epoch(train)" in line:
            break
    assert "Epoch(train)" in seen, seen[-3000:]
    assert len(processes_mentioning(str(work))) >= 3  # torchrun (this very pid) + 2 workers
    job.send_signal(signal.SIGTERM)
    job.stdout.close()
    code = job.wait(timeout=90)
    assert code != 0
    time.sleep(1)
    assert processes_mentioning(str(work)) == []


def test_launch_from_the_parse_time_hook_when_the_source_cannot_be_read_statically(tmp_path: Path) -> None:
    # Option names computed at run time: the start-up path cannot be sure of the parser,
    # so the launch happens when the script parses its command line.
    source = TRAIN.read_text().replace("'--launcher',", "*['--launcher'],")
    assert source != TRAIN.read_text()
    script = tmp_path / "train_dynamic.py"
    script.write_text(source)
    e = clean_env(PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO / "examples")]))
    proc = run(
        [
            MMFIX_RUN,
            sys.executable,
            str(script),
            str(DDP_CONFIG),
            "--work-dir",
            str(tmp_path / "w"),
            "--gpus",
            "2",
            "--cfg-options",
            "train_cfg.max_epochs=1",
        ],
        env=e,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [p["world_size"] for p in probes(tmp_path / "w")] == [2, 2]


def test_other_programs_are_untouched_and_do_not_even_load_the_translator(tmp_path: Path) -> None:
    script = tmp_path / "other_tool.py"
    script.write_text(
        "import argparse, json, sys\n"
        "p = argparse.ArgumentParser(); p.add_argument('data'); p.add_argument('--gpus', type=int)\n"
        "a = p.parse_args()\n"
        "import mmfix\n"
        "print('RESULT ' + json.dumps({'gpus': a.gpus, 'argv': sys.argv[1:],\n"
        "  'legacy_cli': mmfix.status()['patches']['legacy_cli']['state'],\n"
        "  'translator_loaded': 'mmfix._launch.translate' in sys.modules}))\n"
    )
    proc, _log = mmfix_python(script, "d", "--gpus", "2")
    result = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[7:])
    assert result == {"gpus": 2, "argv": ["d", "--gpus", "2"], "legacy_cli": "skipped", "translator_loaded": False}


def test_unknown_flag_under_torch_distributed_launch_is_refused_once_in_the_launcher(tmp_path: Path) -> None:
    # What dist_train.sh does: the launcher starts the workers; mmfix checks the tool's arguments
    # in the launcher's own process, so the mistake is reported once and no worker starts.
    work = tmp_path / "w"
    proc, log = mmfix_python(
        "-m",
        "torch.distributed.launch",
        "--nproc_per_node=2",
        f"--master_port={free_port()}",
        TRAIN,
        DDP_CONFIG,
        "--launcher",
        "pytorch",
        "--work-dir",
        work,
        "--bogus",
        "1",
    )
    assert proc.returncode == 2, log[-3000:]
    assert log.count("error:") == 1 and log.count("usage: train.py") == 1, log[-3000:]
    assert "unrecognized arguments: --bogus 1" in log
    assert "ChildFailedError" not in log and "Traceback" not in log
    assert not work.exists()  # no worker ran
    # the control: the same launch without the bad flag starts its workers and trains
    proc, log = mmfix_python(
        "-m",
        "torch.distributed.launch",
        "--nproc_per_node=2",
        f"--master_port={free_port()}",
        TRAIN,
        DDP_CONFIG,
        "--launcher",
        "pytorch",
        "--work-dir",
        work,
        "--cfg-options",
        "train_cfg.max_epochs=1",
    )
    assert proc.returncode == 0, log[-3000:]
    assert (work / "epoch_1.pth").exists()
