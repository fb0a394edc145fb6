"""Which process this is in a distributed job, as the launchers announce it.

Read from the environment only (never from torch.distributed, which may not be
initialised yet): torchrun / torch.distributed.launch set RANK and LOCAL_RANK,
srun sets SLURM_PROCID / SLURM_LOCALID, Open MPI sets OMPI_COMM_WORLD_*.
"""
from __future__ import annotations

import os


def _int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    return None


def process_rank() -> int:
    """The global rank of this process (0 when alone)."""
    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        value = _int(name)
        if value is not None:
            return value
    return 0


def in_srun_step() -> bool:
    """Inside a task started by srun (not merely inside an salloc/sbatch allocation)."""
    return "SLURM_STEP_ID" in os.environ and "SLURM_PROCID" in os.environ


def srun_tasks() -> int:
    return _int("SLURM_STEP_NUM_TASKS") or _int("SLURM_NTASKS") or 1


def local_rank() -> int | None:
    """This worker's rank on its node, or None if it is not a distributed worker."""
    value = _int("LOCAL_RANK")
    if value is not None:
        return value
    if in_srun_step() and srun_tasks() > 1:
        return _int("SLURM_LOCALID")
    return _int("OMPI_COMM_WORLD_LOCAL_RANK")


def world_size() -> int:
    return _int("WORLD_SIZE") or 1
