"""Which process this is in a distributed job, as the launchers announce it.

Read from the environment only (never from torch.distributed, which may not be
initialised yet): torchrun / torch.distributed.launch set RANK and LOCAL_RANK,
srun sets SLURM_PROCID / SLURM_LOCALID, Open MPI sets OMPI_COMM_WORLD_*.
Every function reads ``env`` (this process's environment by default), so the
pure legacy-command translator asks the same questions of the environment it
was given.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing costs ~5 ms of every interpreter's start-up
    from typing import Mapping, Optional

    Env = Optional[Mapping[str, str]]


def _int(env: Env, name: str) -> int | None:
    raw = (os.environ if env is None else env).get(name, "").strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    return None


def process_rank(env: Env = None) -> int:
    """The global rank of this process (0 when alone)."""
    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        value = _int(env, name)
        if value is not None:
            return value
    return 0


def in_srun_step(env: Env = None) -> bool:
    """Inside a task started by srun (not merely inside an salloc/sbatch allocation)."""
    environ = os.environ if env is None else env
    return "SLURM_STEP_ID" in environ and "SLURM_PROCID" in environ


def srun_tasks(env: Env = None) -> int:
    """How many tasks the srun step has (1 outside a step, or where srun did not say)."""
    return _int(env, "SLURM_STEP_NUM_TASKS") or _int(env, "SLURM_NTASKS") or 1


def in_launched_worker(env: Env = None) -> bool:
    """Started by torchrun / torch.distributed.launch or mpirun as one worker of a job."""
    environ = os.environ if env is None else env
    return "LOCAL_RANK" in environ or "TORCHELASTIC_RUN_ID" in environ or "OMPI_COMM_WORLD_LOCAL_RANK" in environ


def local_rank(env: Env = None) -> int | None:
    """This worker's rank on its node, or None if it is not a distributed worker."""
    value = _int(env, "LOCAL_RANK")
    if value is not None:
        return value
    if in_srun_step(env) and srun_tasks(env) > 1:
        return _int(env, "SLURM_LOCALID")
    return _int(env, "OMPI_COMM_WORLD_LOCAL_RANK")


def world_size(env: Env = None) -> int:
    return _int(env, "WORLD_SIZE") or 1
