"""The topology part of a translation: how many processes, on which devices, under which launcher.

Shared by every toolbox: ``--gpus N``, ``--gpu-ids``, ``--gpu-id`` and the launch
environment (torchrun workers, srun steps, NNODES/NODE_RANK/PORT as in dist_train.sh).
Pure, like the translator that calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .. import _ranks
from .plan import LaunchSpec, ParserInfo
from .tokens import LegacyUsageError, UnknownArgumentsError

LAUNCHERS = ("none", "pytorch", "slurm", "mpi")


def int_arg(flag: str, value: str, minimum: int | None = None) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise LegacyUsageError(f"{flag} expects a whole number, got {value!r}.") from None
    if minimum is not None and number < minimum:
        raise LegacyUsageError(f"{flag} must be at least {minimum}, got {number}.")
    return number


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"


def in_worker(env: Mapping[str, str]) -> bool:
    return _ranks.in_launched_worker(env)


def srun_tasks(env: Mapping[str, str]) -> int:
    """How many tasks the srun step this runs in has; 0 outside an srun step."""
    return _ranks.srun_tasks(env) if _ranks.in_srun_step(env) else 0


def torchrun_in_srun_message(tasks: int, script: str) -> str:
    return (
        f"torchrun was started inside an srun step with {tasks} tasks, so every task starts its own "
        f"workers and the job would have {tasks} x nproc_per_node processes instead of one per GPU. Use one "
        f"of: `srun -n {tasks} python {script} CONFIG --launcher slurm` (srun starts one process per GPU), or "
        f"`srun -n 1 python -m torch.distributed.run --nproc_per_node N {script} CONFIG --launcher pytorch` "
        "(one torchrun per node)."
    )


def _map_gpu_ids(ids: list[int], env: Mapping[str, str], flag: str) -> str:
    """--gpu-ids are indices into what is visible now: read them through CUDA_VISIBLE_DEVICES."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return ",".join(str(i) for i in ids)
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    for i in ids:
        if i >= len(entries):
            raise LegacyUsageError(
                f"{flag} {i} is out of range: CUDA_VISIBLE_DEVICES={visible!r} makes {len(entries)} GPU(s) "
                f"visible, numbered 0..{len(entries) - 1}."
            )
    return ",".join(entries[i] for i in ids)


@dataclass
class Topology:
    launch: LaunchSpec | None = None
    add_launcher: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checks: list[tuple[str, str]] = field(default_factory=list)


def plan_topology(
    flags: Mapping[str, list[str]],
    env: Mapping[str, str],
    parser: ParserInfo,
    launcher: str | None,
    *,
    argv: Sequence[str],
    visible_gpus: int | None,
    program: str,
    usable_cpus: int | None,
    allow_cpu_oversubscribe: bool,
) -> Topology:
    """Processes and devices from the topology flags in ``flags`` and the launch environment."""
    out = Topology()
    worker = in_worker(env)
    tasks = srun_tasks(env)
    if launcher is not None and launcher not in LAUNCHERS:
        # argparse's own words, but once and before anything starts (not once per worker)
        raise UnknownArgumentsError(
            f"argument --launcher: invalid choice: {launcher!r} (choose from {', '.join(map(repr, LAUNCHERS))}). "
            "Nothing was started.",
            [],
        )
    if "--gpus" in flags and ("--gpu-ids" in flags or "--gpu-id" in flags):
        other = "--gpu-ids" if "--gpu-ids" in flags else "--gpu-id"
        raise LegacyUsageError(
            f"--gpus and {other} were both given; they say the same thing twice. Use --gpus N for the first N "
            f"visible GPUs, or {other} to pick them."
        )
    if "--gpu-ids" in flags and "--gpu-id" in flags:
        raise LegacyUsageError("--gpu-ids and --gpu-id were both given; keep one of them.")
    nproc: int | None = None
    gpus_flag = ""
    if "--gpus" in flags:
        gpus_flag = f"--gpus {flags['--gpus'][0]}"
        nproc = int_arg("--gpus", flags["--gpus"][0], minimum=1)
        if visible_gpus is not None and nproc > visible_gpus and not worker and not tasks:
            raise LegacyUsageError(
                f"--gpus {nproc} asks for more GPUs than this process can see ({visible_gpus}; "
                f"CUDA_VISIBLE_DEVICES is {env.get('CUDA_VISIBLE_DEVICES', 'not set')!r}). "
                f"Use --gpus {visible_gpus} or fewer."
            )
    for flag in ("--gpu-ids", "--gpu-id"):
        if flag in flags:
            ids = [int_arg(flag, v, minimum=0) for v in flags[flag]]
            if len(set(ids)) != len(ids):
                raise LegacyUsageError(f"{flag} lists a GPU twice: {' '.join(flags[flag])}.")
            gpus_flag = f"{flag} {' '.join(flags[flag])}"
            if visible_gpus is None:
                out.warnings.append(
                    f"{gpus_flag} names GPUs, but no CUDA device is visible here: ignored, this run uses the CPU."
                )
                nproc = len(ids)
            else:
                if not env.get("CUDA_VISIBLE_DEVICES", "").strip():
                    for i in ids:
                        if i >= visible_gpus:
                            raise LegacyUsageError(
                                f"{flag} {i} is out of range: {visible_gpus} GPU(s) are "
                                f"visible, numbered 0..{visible_gpus - 1}."
                            )
                mapped = _map_gpu_ids(ids, env, flag)
                if not worker:
                    out.env["CUDA_VISIBLE_DEVICES"] = mapped
                    out.notes.append(f"{gpus_flag} -> CUDA_VISIBLE_DEVICES={mapped}")
                nproc = len(ids)

    if (
        nproc is not None
        and visible_gpus is None
        and usable_cpus is not None
        and nproc > usable_cpus
        and not worker
        and not tasks
        and not allow_cpu_oversubscribe
    ):
        # Each CPU worker is a whole training process: 99 of them (a typo) on a small shared
        # machine run it out of memory and CPU for everyone on it.
        raise LegacyUsageError(
            f"{gpus_flag} would start {plural(nproc, 'CPU worker')}: no CUDA device is visible here, so each "
            f"\"GPU\" is a training process on the CPU, and this process may run on only "
            f"{plural(usable_cpus, 'CPU core')}. Use --gpus {usable_cpus} or fewer, run on a machine with GPUs, "
            "or set MMFIX_ALLOW_CPU_OVERSUBSCRIBE=1 if you really mean to start more workers than cores."
        )

    if worker and "TORCHELASTIC_RUN_ID" in env and tasks > 1:
        # Normally caught earlier, in torchrun's own process (_launch.early.stop_torchrun_in_srun);
        # here when mmfix was not active there.
        raise LegacyUsageError(torchrun_in_srun_message(tasks, program))
    if worker:
        if nproc is not None and "--gpus" in flags:
            out.notes.append(f"{gpus_flag} dropped: this process is already one of the launched workers")
        if launcher is None and _ranks.world_size(env) > 1 and "--launcher" in parser.options:
            out.add_launcher = "pytorch"
            out.notes.append(
                "--launcher pytorch added: this is a torchrun worker (WORLD_SIZE="
                f"{env.get('WORLD_SIZE')}); without it every worker would train alone"
            )
        return out
    if tasks:
        if nproc is not None:
            out.notes.append(
                f"{gpus_flag} dropped: under srun each of the {plural(tasks, 'task')} is one process; "
                "srun's -n/--ntasks sets how many, so no torchrun is started on top"
            )
        if launcher is None and tasks > 1 and "--launcher" in parser.options:
            out.add_launcher = "slurm"
            out.notes.append(f"--launcher slurm added: srun started {tasks} tasks; without it each would train alone")
        return out
    nnodes = int_arg("NNODES", env["NNODES"], minimum=1) if env.get("NNODES", "").strip() else 1
    node_rank = int_arg("NODE_RANK", env["NODE_RANK"], minimum=0) if env.get("NODE_RANK", "").strip() else 0
    if node_rank >= nnodes:
        raise LegacyUsageError(f"NODE_RANK={node_rank} must be smaller than NNODES={nnodes}.")
    wants_launch = (
        (nproc is not None and nproc > 1)
        or (nnodes > 1 and nproc is not None)
        or (launcher == "pytorch" and nproc is not None)
    )
    if launcher == "pytorch" and nproc is None:
        raise LegacyUsageError(
            "--launcher pytorch was given, but no launcher started this process (RANK, LOCAL_RANK and "
            "WORLD_SIZE are not set), so it would wait for peers that never come. Start it through torchrun: "
            f"`python -m torch.distributed.run --nproc_per_node N {program} {' '.join(argv)}`, or let mmfix "
            "do it: add --gpus N."
        )
    if launcher not in (None, "pytorch") and wants_launch:
        raise LegacyUsageError(
            f"{gpus_flag} starts N processes under torchrun, which needs --launcher pytorch, "
            f"but --launcher {launcher} was given. Drop one of them."
        )
    if not wants_launch:
        if nproc is not None:
            out.notes.append(f"{gpus_flag} -> one process, run in place")
        return out
    assert nproc is not None
    port_raw = env.get("PORT", "").strip() or env.get("MASTER_PORT", "").strip()
    port = int_arg("PORT" if env.get("PORT", "").strip() else "MASTER_PORT", port_raw, minimum=1) if port_raw else None
    if port is not None and port > 65535:
        raise LegacyUsageError(f"port {port} is out of range (1..65535).")
    addr = env.get("MASTER_ADDR", "").strip() or None
    if nnodes > 1:
        if addr is None:
            raise LegacyUsageError(
                f"NNODES={nnodes} starts a multi-node job, which needs MASTER_ADDR: the address of the "
                "node with NODE_RANK=0, the same on every node (e.g. MASTER_ADDR=10.0.0.1 PORT=29500)."
            )
        port = port or 29500
    if port is not None and node_rank == 0:
        out.checks.append(("port_free", str(port)))
    out.launch = LaunchSpec(
        nproc_per_node=nproc,
        nnodes=nnodes,
        node_rank=node_rank,
        master_addr=addr if (nnodes > 1 or port is not None) else None,
        master_port=port,
    )
    if launcher is None:
        out.add_launcher = "pytorch"
    where = plural(nproc, "process", "processes") + (f" on node {node_rank} of {nnodes}" if nnodes > 1 else "")
    out.notes.append(f"{gpus_flag or '--launcher pytorch'} -> torchrun with {where}, --launcher pytorch")
    if visible_gpus is None:
        out.warnings.append(
            f"no CUDA device is visible: --gpus {nproc} runs {plural(nproc, 'CPU worker')} with "
            "the gloo backend (a debugging mode; use GPUs for real training)."
        )
    return out
