"""The patches, one module each, and the registry that names them.

The protocol every patch module follows:

* ``apply() -> str | None`` patches what its trigger module holds. It returns
  None when applied, or the reason it chose not to (a skip, shown by
  ``mmfix.status()``). An exception means failure: the activation layer then
  calls ``remove()`` to roll back whatever was done, logs once and leaves the
  originals in place, so the import that triggered the patch never breaks.
* ``remove()`` undoes everything ``apply()`` did, recorded in the patch's one
  ``_wrapping.SwapSet``: every attribute it swapped (and each alias), every
  post-import hook it registered (``SwapSet.when_imported``) and every other
  change (``SwapSet.on_undo``: module globals, excepthooks). It may be called
  when nothing, or only part, was applied.
* A patch never imports torch or MMEngine at module level: its module is
  imported only when its trigger module has been.

This package is imported by ``import mmfix`` and so must stay light: the
registry below is plain data.
"""

from __future__ import annotations


class Patch:
    """One registry row. The patch's code lives in ``mmfix._patches.<name>``."""

    __slots__ = ("name", "trigger", "summary", "at_start")

    def __init__(self, name: str, trigger: str, summary: str, at_start: str | None = None) -> None:
        self.name = name  # what MMFIX_DISABLED_PATCHES and mmfix.enable([...]) accept
        self.trigger = trigger  # the module whose import applies the patch
        self.summary = summary
        # "module:function" run once at interpreter start while the patch is armed
        # (it must be cheap: every Python that activates mmfix runs it).
        self.at_start = at_start

    @property
    def module(self) -> str:
        return f"{__name__}.{self.name}"


PATCHES: dict[str, Patch] = {
    patch.name: patch
    for patch in (
        Patch(
            "torch_load",
            "torch",
            "torch.load maps to CPU by default, loads MMEngine checkpoints with weights_only=True, "
            "explains refused and corrupt files",
        ),
        Patch(
            "mmengine_checkpoint",
            "mmengine.runner",
            "MMEngine's checkpoint loaders and Runner.resume load to CPU by default",
        ),
        Patch(
            "cuda_device",
            "torch",
            "in a distributed worker, the current CUDA device is LOCAL_RANK from CUDA's first initialisation on",
        ),
        Patch(
            "cpu_distributed",
            "mmengine.dist",
            "init_dist works on hosts without CUDA (gloo, no set_device) and DDP gets device_ids=None there",
        ),
        Patch(
            "ddp_errors",
            "mmengine.runner",
            "DDP's unused-parameter error names the parameters and the fix; MMFIX_FIND_UNUSED_PARAMETERS",
        ),
        Patch(
            "memory_report",
            "mmengine.runner",
            "with MMFIX_MEMORY_REPORT=1, rank 0 prints every rank's peak memory at the end of training",
        ),
        Patch(
            "legacy_cli",
            "argparse",
            "MMDetection 2.x flags on 3.x tools: translated against the script's own parser; --gpus N starts torchrun",
            at_start="mmfix._patches._legacy_cli_start:at_start",
        ),
        Patch(
            "atomic_save",
            "mmengine.runner",
            "checkpoints and last_checkpoint written to local disk are atomic (temp file, fsync, rename)",
        ),
        Patch(
            "resume_fallback",
            "mmengine.runner",
            "auto-resume skips an unreadable newest checkpoint for the newest readable one, with a warning",
        ),
        Patch(
            "legacy_config",
            "mmengine.config",
            "MMDetection 2.x config files load as their 3.x equivalent; 2.x keys in 3.x configs are applied, never ignored",
        ),
        Patch(
            "legacy_checkpoint",
            "mmengine.runner",
            "2.x checkpoints of families 3.x rebuilt are renamed to the 3.x layout in memory; "
            "a 2.x run's checkpoint that leaves keys missing or unexpected is an error, not a warning",
        ),
        Patch(
            "mmcv_ops",
            "mmcv",
            "without compiled mmcv ops (mmcv-lite), mmcv._ext is supplied by mmfix's PyTorch ops; compiled ops win",
        ),
        Patch(
            "mmcv_ops_devices",
            "mmcv.ops",
            "mmcv's furthest_point_sample, knn and points_in_boxes_part/all wrappers accept CPU tensors (they assumed CUDA)",
        ),
        Patch(
            "mmengine_packages",
            "mmengine",
            "MMEngine's package helpers (mmdet:: config bases, hub, registry lookups) work without pkg_resources",
        ),
        Patch(
            "mmcv_bound",
            "sys",
            "MMDetection 3.3, MMSegmentation 1.2 and MMDetection3D 1.4 accept mmcv 2.2 (bound raised in memory)",
        ),
        Patch(
            "runner_randomness",
            "mmengine.runner",
            "a randomness config without a seed (legacy --deterministic / --diff-seed without --seed) fixes none, "
            "as MMEngine's default; stock stops with a TypeError",
        ),
        Patch(
            "ssd_predict",
            "mmdet.models.dense_heads.ssd_head",
            "MMDetection 3.3's SSD heads predict (stock: AttributeError: 'SSDHead' object has no attribute 'loss_cls')",
        ),
        Patch(
            "worker_errors",
            "torch",
            "a torchrun worker's uncaught exception is recorded so torchrun's summary names the rank and the error",
        ),
    )
}
