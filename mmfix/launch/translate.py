"""The pure translator: a 2.x command line, the environment and the script's parser -> a Plan.

No I/O and no global state: everything the decision depends on is an argument,
so every row of the tables below is unit-tested, and property-tested over random
argv. The only exception it raises is ``LegacyUsageError`` (a clean exit 2).

Rules, in order of precedence:
1. A flag the script's own parser knows is never rewritten (a real 2.x train.py
   keeps its ``--gpus``).
2. Only parsers shaped like OpenMMLab tools (a ``config`` positional and a
   ``--launcher`` option) are translated, unless the caller opts in.
3. Inside a launched worker nothing is ever launched again.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

from .._errors import MmfixUsageError
from .plan import LaunchSpec, ParserInfo, Plan


class LegacyUsageError(MmfixUsageError):
    """A legacy command line mmfix can name the mistake in."""


#: 2.x train.py flags that 3.x rejects -> nargs (0: a flag, 1: one value, "+": one or more)
TRAIN_FLAGS: dict[str, object] = {
    "--gpus": 1, "--gpu-ids": "+", "--gpu-id": 1, "--resume-from": 1, "--load-from": 1, "--auto-resume": 0,
    "--no-validate": 0, "--seed": 1, "--deterministic": 0, "--diff-seed": 0, "--options": "+",
}
#: 2.x test.py flags that 3.x rejects
TEST_FLAGS: dict[str, object] = {
    "--eval": "+", "--format-only": 0, "--eval-options": "+", "--options": "+", "--gpu-collect": 0,
    "--show-score-thr": 1, "--tmpdir": 1, "--gpu-id": 1, "--gpu-ids": "+", "--gpus": 1, "--fuse-conv-bn": 0,
}
NO_EQUIVALENT = {
    "--fuse-conv-bn": "3.x tools/test.py has no conv-bn fusion (it is a TODO there); drop the flag, or fuse the "
                      "model yourself with mmcv.cnn.fuse_conv_bn before testing",
}
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_LAUNCHERS = ("none", "pytorch", "slurm", "mpi")


def _is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def _int_arg(flag: str, value: str, minimum: int | None = None) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise LegacyUsageError(f"{flag} expects a whole number, got {value!r}.") from None
    if minimum is not None and number < minimum:
        raise LegacyUsageError(f"{flag} must be at least {minimum}, got {number}.")
    return number


class _Scan:
    """argv split into kept tokens and legacy flags (with their values), in order."""

    def __init__(self, argv: Sequence[str], parser: ParserInfo, legacy: Mapping[str, object]) -> None:
        self.kept: list[str] = []
        self.legacy: list[tuple[str, list[str]]] = []
        self.renamed: list[tuple[str, str]] = []
        self.user_cfg_options: list[str] = []
        self.launcher: str | None = None
        self.positionals: list[str] = []
        i, n = 0, len(argv)
        while i < n:
            token = argv[i]
            if token == "--":
                self.kept.extend(argv[i:])
                self.positionals.extend(argv[i + 1:])
                break
            if not _is_option(token):
                self.kept.append(token)
                self.positionals.append(token)
                i += 1
                continue
            flag, eq, inline = token.partition("=")
            if parser.knows(flag):
                full = flag if flag in parser.options else self._expand(parser, flag)
                consumed = self._consume(argv, i, parser.options.get(full), eq)
                values = [inline] if eq else list(argv[i + 1:i + 1 + consumed])
                if full == "--cfg-options":
                    self.user_cfg_options.extend(values)
                if full == "--launcher" and values:
                    self.launcher = values[0]
                self.kept.extend(argv[i:i + 1 + consumed])
                i += 1 + consumed
                continue
            alias = {"--local-rank": "--local_rank", "--local_rank": "--local-rank"}.get(flag)
            if alias is not None and alias in parser.options:
                # torch >= 2.0's launch passes --local-rank; 2.x scripts know only --local_rank.
                self.renamed.append((flag, alias))
                consumed = 0 if eq else self._consume(argv, i, 1, eq)
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
                    consumed = self._consume(argv, i, nargs, eq)
                    values = list(argv[i + 1:i + 1 + consumed])
                    if nargs not in (0, "?", "*") and not values:
                        raise LegacyUsageError(f"{flag} needs a value (e.g. {self._example(flag)}).")
                    i += 1 + consumed
                self.legacy.append((flag, values))
                continue
            self.kept.append(token)  # unknown to both: argparse will report it as usual
            i += 1

    @staticmethod
    def _expand(parser: ParserInfo, flag: str) -> str:
        """The option an abbreviation stands for (argparse's allow_abbrev)."""
        matches = [o for o in parser.options if o.startswith(flag)]
        return matches[0] if len(matches) == 1 else flag

    @staticmethod
    def _consume(argv: Sequence[str], i: int, nargs: object, eq: str) -> int:
        if eq or nargs == 0:
            return 0
        rest = argv[i + 1:]
        if nargs is None:
            return 1 if rest else 0
        if isinstance(nargs, int):
            return min(nargs, len(rest))
        if nargs == "?":
            return 1 if rest and not _is_option(rest[0]) else 0
        if nargs == "...":
            return len(rest)
        count = 0
        for token in rest:  # "*" and "+"
            if _is_option(token):
                break
            count += 1
        return count

    @staticmethod
    def _example(flag: str) -> str:
        return {"--gpus": "--gpus 2", "--seed": "--seed 0", "--gpu-id": "--gpu-id 0", "--gpu-ids": "--gpu-ids 0 1",
                "--resume-from": "--resume-from work_dirs/x/epoch_3.pth", "--options": "--options a.b=1",
                "--load-from": "--load-from checkpoints/pretrained.pth",
                "--eval": "--eval bbox", "--eval-options": "--eval-options classwise=True",
                "--show-score-thr": "--show-score-thr 0.3", "--tmpdir": "--tmpdir /tmp/eval"}.get(flag, flag + " X")


def _pairs(flag: str, values: list[str]) -> list[tuple[str, str]]:
    out = []
    for value in values:
        key, eq, val = value.partition("=")
        if not eq or not key:
            raise LegacyUsageError(f"{flag} expects key=value pairs, got {value!r}.")
        out.append((key, val))
    return out


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


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"


def _in_worker(env: Mapping[str, str]) -> bool:
    return "LOCAL_RANK" in env or "TORCHELASTIC_RUN_ID" in env or "OMPI_COMM_WORLD_LOCAL_RANK" in env


def _srun_tasks(env: Mapping[str, str]) -> int:
    if "SLURM_STEP_ID" not in env or "SLURM_PROCID" not in env:
        return 0
    for name in ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        raw = env.get(name, "")
        if raw.isdigit():
            return int(raw)
    return 1


def torchrun_in_srun_message(srun_tasks: int, script: str) -> str:
    return (
        f"torchrun was started inside an srun step with {srun_tasks} tasks, so every task starts its own "
        f"workers and the job would have {srun_tasks} x nproc_per_node processes instead of one per GPU. Use one "
        f"of: `srun -n {srun_tasks} python {script} CONFIG --launcher slurm` (srun starts one process per GPU), or "
        f"`srun -n 1 python -m torch.distributed.run --nproc_per_node N {script} CONFIG --launcher pytorch` "
        "(one torchrun per node)."
    )


def _world_size(env: Mapping[str, str]) -> int:
    raw = env.get("WORLD_SIZE", "")
    return int(raw) if raw.isdigit() else 1


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
) -> Plan:
    """Translate ``argv`` (the script's arguments, without the program) into a Plan.

    ``visible_gpus`` is None on a host without a usable CUDA device; there, one
    worker per GPU becomes one CPU worker per "GPU", and more of them than the
    ``usable_cpus`` this process may run on is refused unless
    ``allow_cpu_oversubscribe``. ``any_parser`` translates for parsers that are not
    shaped like OpenMMLab tools too.
    """
    argv = [str(a) for a in argv]
    tool = parser.tool or ("train" if any_parser else None)
    if tool is None:
        return Plan(argv=tuple(argv))
    legacy_table = TEST_FLAGS if tool == "test" else TRAIN_FLAGS
    scan = _Scan(argv, parser, {k: v for k, v in legacy_table.items() if not parser.knows(k)})
    notes: list[str] = [f"{old} -> {new} (this script's parser knows only {new})" for old, new in scan.renamed]
    warnings: list[str] = []
    checks: list[tuple[str, str]] = []
    cfg: list[tuple[str, str]] = []
    extra: list[str] = []
    new_env: dict[str, str] = {}
    flags: dict[str, list[str]] = {}
    for flag, values in scan.legacy:
        if flag in ("--options", "--eval-options") and flag in flags:
            flags[flag] = flags[flag] + values  # 2.x DictAction merged repeats
        else:
            flags[flag] = values

    for flag, reason in NO_EQUIVALENT.items():
        if flag in flags:
            raise LegacyUsageError(f"{flag} has no 3.x equivalent: {reason}.")

    in_worker = _in_worker(env)
    srun_tasks = _srun_tasks(env)
    launcher = scan.launcher
    if launcher is not None and launcher not in _LAUNCHERS:
        launcher = None  # argparse will reject it with its own message

    # --- processes and devices ----------------------------------------------------------
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
        nproc = _int_arg("--gpus", flags["--gpus"][0], minimum=1)
        if visible_gpus is not None and nproc > visible_gpus and not in_worker and not srun_tasks:
            raise LegacyUsageError(
                f"--gpus {nproc} asks for more GPUs than this process can see ({visible_gpus}; "
                f"CUDA_VISIBLE_DEVICES is {env.get('CUDA_VISIBLE_DEVICES', 'not set')!r}). "
                f"Use --gpus {visible_gpus} or fewer."
            )
    for flag in ("--gpu-ids", "--gpu-id"):
        if flag in flags:
            ids = [_int_arg(flag, v, minimum=0) for v in flags[flag]]
            if len(set(ids)) != len(ids):
                raise LegacyUsageError(f"{flag} lists a GPU twice: {' '.join(flags[flag])}.")
            gpus_flag = f"{flag} {' '.join(flags[flag])}"
            if visible_gpus is None:
                warnings.append(f"{gpus_flag} names GPUs, but no CUDA device is visible here: ignored, "
                                "this run uses the CPU.")
                nproc = len(ids)
            else:
                if not env.get("CUDA_VISIBLE_DEVICES", "").strip():
                    for i in ids:
                        if i >= visible_gpus:
                            raise LegacyUsageError(f"{flag} {i} is out of range: {visible_gpus} GPU(s) are "
                                                   f"visible, numbered 0..{visible_gpus - 1}.")
                mapped = _map_gpu_ids(ids, env, flag)
                if not in_worker:
                    new_env["CUDA_VISIBLE_DEVICES"] = mapped
                    notes.append(f"{gpus_flag} -> CUDA_VISIBLE_DEVICES={mapped}")
                nproc = len(ids)

    if (nproc is not None and visible_gpus is None and usable_cpus is not None and nproc > usable_cpus
            and not in_worker and not srun_tasks and not allow_cpu_oversubscribe):
        # Each CPU worker is a whole training process: 99 of them (a typo) on a small shared
        # machine run it out of memory and CPU for everyone on it.
        raise LegacyUsageError(
            f"{gpus_flag} would start {plural(nproc, 'CPU worker')}: no CUDA device is visible here, so each "
            f"\"GPU\" is a training process on the CPU, and this process may run on only "
            f"{plural(usable_cpus, 'CPU core')}. Use --gpus {usable_cpus} or fewer, run on a machine with GPUs, "
            "or set MMFIX_ALLOW_CPU_OVERSUBSCRIBE=1 if you really mean to start more workers than cores."
        )

    launch: LaunchSpec | None = None
    add_launcher: str | None = None
    if in_worker and "TORCHELASTIC_RUN_ID" in env and srun_tasks > 1:
        # Normally caught earlier, in torchrun's own process (legacy_cli.stop_torchrun_in_srun);
        # here when mmfix was not active there.
        raise LegacyUsageError(torchrun_in_srun_message(srun_tasks, program))
    if in_worker:
        if nproc is not None and "--gpus" in flags:
            notes.append(f"{gpus_flag} dropped: this process is already one of the launched workers")
        if launcher is None and _world_size(env) > 1 and "--launcher" in parser.options:
            add_launcher = "pytorch"
            notes.append("--launcher pytorch added: this is a torchrun worker (WORLD_SIZE="
                         f"{env.get('WORLD_SIZE')}); without it every worker would train alone")
    elif srun_tasks:
        if nproc is not None:
            notes.append(f"{gpus_flag} dropped: under srun each of the {plural(srun_tasks, 'task')} is one process; "
                         "srun's -n/--ntasks sets how many, so no torchrun is started on top")
        if launcher is None and srun_tasks > 1 and "--launcher" in parser.options:
            add_launcher = "slurm"
            notes.append(f"--launcher slurm added: srun started {srun_tasks} tasks; without it each would train alone")
    else:
        nnodes = _int_arg("NNODES", env["NNODES"], minimum=1) if env.get("NNODES", "").strip() else 1
        node_rank = _int_arg("NODE_RANK", env["NODE_RANK"], minimum=0) if env.get("NODE_RANK", "").strip() else 0
        if node_rank >= nnodes:
            raise LegacyUsageError(f"NODE_RANK={node_rank} must be smaller than NNODES={nnodes}.")
        wants_launch = (nproc is not None and nproc > 1) or (nnodes > 1 and nproc is not None) or (
            launcher == "pytorch" and nproc is not None)
        if launcher == "pytorch" and nproc is None:
            raise LegacyUsageError(
                "--launcher pytorch was given, but no launcher started this process (RANK, LOCAL_RANK and "
                "WORLD_SIZE are not set), so it would wait for peers that never come. Start it through torchrun: "
                f"`python -m torch.distributed.run --nproc_per_node N {program} {' '.join(argv)}`, or let mmfix "
                "do it: add --gpus N."
            )
        if launcher not in (None, "pytorch") and wants_launch:
            raise LegacyUsageError(f"{gpus_flag} starts N processes under torchrun, which needs --launcher pytorch, "
                                   f"but --launcher {launcher} was given. Drop one of them.")
        if wants_launch:
            assert nproc is not None
            port_raw = env.get("PORT", "").strip() or env.get("MASTER_PORT", "").strip()
            port = _int_arg("PORT" if env.get("PORT", "").strip() else "MASTER_PORT", port_raw, minimum=1) \
                if port_raw else None
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
                checks.append(("port_free", str(port)))
            launch = LaunchSpec(nproc_per_node=nproc, nnodes=nnodes, node_rank=node_rank,
                                master_addr=addr if (nnodes > 1 or port is not None) else None, master_port=port)
            if launcher is None:
                add_launcher = "pytorch"
            where = plural(nproc, "process", "processes") + (
                f" on node {node_rank} of {nnodes}" if nnodes > 1 else "")
            notes.append(f"{gpus_flag or '--launcher pytorch'} -> torchrun with {where}, --launcher pytorch")
            if visible_gpus is None:
                warnings.append(f"no CUDA device is visible: --gpus {nproc} runs {plural(nproc, 'CPU worker')} with "
                                "the gloo backend (a debugging mode; use GPUs for real training).")
        elif nproc is not None:
            notes.append(f"{gpus_flag} -> one process, run in place")

    # --- train.py ---------------------------------------------------------------------------
    if tool == "train":
        if "--resume-from" in flags:
            extra += ["--resume", flags["--resume-from"][0]]
            notes.append(f"--resume-from {flags['--resume-from'][0]} -> --resume {flags['--resume-from'][0]}")
            if "--auto-resume" in flags:
                notes.append("--auto-resume dropped: --resume-from takes precedence, as in 2.x")
        if "--load-from" in flags:
            cfg.append(("load_from", flags["--load-from"][0]))
        if "--seed" in flags:
            seed = _int_arg("--seed", flags["--seed"][0])
            cfg.append(("randomness.seed", str(seed)))
        if "--deterministic" in flags:
            cfg.append(("randomness.deterministic", "True"))
        if "--diff-seed" in flags:
            cfg.append(("randomness.diff_rank_seed", "True"))
        if "--no-validate" in flags:
            cfg += [("val_cfg", "None"), ("val_dataloader", "None"), ("val_evaluator", "None")]
        if "--options" in flags:
            if scan.user_cfg_options:
                raise LegacyUsageError(
                    "--options and --cfg-options were both given; in 2.x train.py --options was the old name of "
                    "--cfg-options and using both was an error. Move the --options pairs into --cfg-options."
                )
            cfg += _pairs("--options", flags["--options"])
    # --- test.py ----------------------------------------------------------------------------
    else:
        eval_pairs: list[tuple[str, str]] = []
        for flag in ("--eval-options", "--options"):
            if flag in flags:
                eval_pairs += _pairs(flag, flags[flag])
        if "--eval-options" in flags and "--options" in flags:
            raise LegacyUsageError("--eval-options and --options were both given; in 2.x test.py --options was the "
                                   "old name of --eval-options. Keep one of them.")
        if "--eval" in flags:
            metrics = flags["--eval"]
            if not metrics:
                raise LegacyUsageError("--eval needs at least one metric (e.g. --eval bbox).")
            cfg.append(("test_evaluator.metric", "[" + ",".join(metrics) + "]"))
        if "--format-only" in flags:
            prefix = dict(eval_pairs).get("jsonfile_prefix") or dict(eval_pairs).get("outfile_prefix")
            if prefix is None:
                prefix = "./work_dirs/format_only/results"
                notes.append(f"--format-only writes its files under {prefix} (set it with --eval-options "
                             "jsonfile_prefix=DIR/NAME)")
            cfg += [("test_evaluator.format_only", "True"), ("test_evaluator.outfile_prefix", prefix)]
        for key, val in eval_pairs:
            if key in ("jsonfile_prefix", "outfile_prefix"):
                if "--format-only" not in flags:
                    cfg.append(("test_evaluator.outfile_prefix", val))
                continue
            cfg.append((f"test_evaluator.{key}", val))
        if "--gpu-collect" in flags:
            cfg.append(("test_evaluator.collect_device", "gpu"))
        if "--show-score-thr" in flags:
            try:
                float(flags["--show-score-thr"][0])
            except ValueError:
                raise LegacyUsageError(f"--show-score-thr expects a number, got {flags['--show-score-thr'][0]!r}.") \
                    from None
            cfg.append(("default_hooks.visualization.score_thr", flags["--show-score-thr"][0]))
        if "--tmpdir" in flags:
            cfg.append(("test_evaluator.collect_dir", flags["--tmpdir"][0]))
            checks.append(("collect_dir", flags["--tmpdir"][0]))

    user_keys = {kv.partition("=")[0] for kv in scan.user_cfg_options}
    clash = [k for k, _ in cfg if k in user_keys]
    if clash:
        raise LegacyUsageError(
            f"{clash[0]} is set twice: by a 2.x flag and by --cfg-options. Keep one of them."
        )
    if cfg:
        extra += ["--cfg-options", *[f"{k}={v}" for k, v in cfg]]
        described = {
            "--seed": "randomness.seed", "--deterministic": "randomness.deterministic",
            "--diff-seed": "randomness.diff_rank_seed", "--no-validate": "val_cfg/val_dataloader/val_evaluator=None",
            "--load-from": "load_from",
            "--options": "--cfg-options", "--eval": "test_evaluator.metric", "--format-only": "test_evaluator.format_only",
            "--eval-options": "test_evaluator.*", "--gpu-collect": "test_evaluator.collect_device=gpu",
            "--show-score-thr": "default_hooks.visualization.score_thr", "--tmpdir": "test_evaluator.collect_dir",
        }
        for flag, target in described.items():
            if flag in flags and not (flag == "--options" and tool == "test"):
                notes.append(f"{flag} -> --cfg-options {target}")
        if tool == "test" and "--options" in flags:
            notes.append("--options -> test_evaluator.* (in 2.x test.py it meant --eval-options)")
    if "--auto-resume" in flags and "--resume-from" not in flags:
        # Last: a bare nargs='?' --resume would swallow a following positional.
        extra.append("--resume")
        notes.append("--auto-resume -> --resume (latest checkpoint in the work dir)")
    if add_launcher:
        extra += ["--launcher", add_launcher]
    if launch is not None:
        # Checked before torchrun starts: otherwise each of N workers fails on it, after
        # seconds of imports, with its own traceback.
        if scan.positionals:
            checks.append(("config_file", scan.positionals[0]))
        if tool == "test" and len(scan.positionals) > 1:
            checks.append(("checkpoint_file", scan.positionals[1]))
        for flag in ("--resume-from", "--load-from"):
            if flag in flags:
                checks.append(("checkpoint_file", flags[flag][0]))
    return Plan(argv=tuple(scan.kept + extra), env=new_env, launch=launch, notes=tuple(notes),
                warnings=tuple(warnings), checks=tuple(checks))
