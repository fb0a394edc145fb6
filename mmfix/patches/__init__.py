"""The patches, one module each, every one a pair ``apply()`` / ``remove()``.

This package is imported by ``import mmfix`` and so must not import torch or
MMEngine: the table below is plain data, and a patch module is imported only
when the module it patches has been imported.
"""
from __future__ import annotations

#: patch name -> (module holding apply/remove, module whose import triggers it, what it does)
PATCHES: dict[str, tuple[str, str, str]] = {
    "torch_load": (
        "mmfix.patches.torch_load",
        "torch",
        "torch.load maps to CPU by default, loads MMEngine checkpoints with weights_only=True, "
        "explains refused and corrupt files",
    ),
    "mmengine_checkpoint": (
        "mmfix.patches.mmengine_checkpoint",
        "mmengine.runner",
        "MMEngine's checkpoint loaders and Runner.resume load to CPU by default",
    ),
    "cuda_device": (
        "mmfix.patches.cuda_device",
        "torch",
        "in a distributed worker, the current CUDA device is LOCAL_RANK from CUDA's first initialisation on",
    ),
    "cpu_distributed": (
        "mmfix.patches.cpu_distributed",
        "mmengine.dist",
        "init_dist works on hosts without CUDA (gloo, no set_device) and DDP gets device_ids=None there",
    ),
    "ddp_errors": (
        "mmfix.patches.ddp_errors",
        "mmengine.runner",
        "DDP's unused-parameter error names the parameters and the fix; MMFIX_FIND_UNUSED_PARAMETERS",
    ),
    "memory_report": (
        "mmfix.patches.memory_report",
        "mmengine.runner",
        "with MMFIX_MEMORY_REPORT=1, rank 0 prints every rank's peak memory at the end of training",
    ),
    "legacy_cli": (
        "mmfix.patches.legacy_cli",
        "argparse",
        "MMDetection 2.x flags on 3.x tools: translated against the script's own parser; --gpus N starts torchrun",
    ),
    "atomic_save": (
        "mmfix.patches.atomic_save",
        "mmengine.runner",
        "checkpoints and last_checkpoint written to local disk are atomic (temp file, fsync, rename)",
    ),
    "resume_fallback": (
        "mmfix.patches.resume_fallback",
        "mmengine.runner",
        "auto-resume skips an unreadable newest checkpoint for the newest readable one, with a warning",
    ),
    "legacy_config": (
        "mmfix.patches.legacy_config",
        "mmengine.config",
        "MMDetection 2.x config files load as their 3.x equivalent; 2.x keys in 3.x configs are applied, never ignored",
    ),
    "worker_errors": (
        "mmfix.patches.worker_errors",
        "torch",
        "a torchrun worker's uncaught exception is recorded so torchrun's summary names the rank and the error",
    ),
}
