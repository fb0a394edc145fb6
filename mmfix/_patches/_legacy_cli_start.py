"""legacy_cli's step at interpreter start: a legacy ``--gpus N`` command starts torchrun
before the script's heavy imports (the registry's ``at_start`` for ``legacy_cli``).

This runs in every Python that activates mmfix, so it is a scan of ``sys.argv``
and nothing else; the work (reading the script's parser from its source) happens
only for command lines that carry a 2.x launch flag.
"""

from __future__ import annotations

import os
import sys

#: The 2.x flags that make a command a launch (``--gpus N`` becomes torchrun).
LAUNCH_FLAGS = ("--gpus", "--gpu-ids", "--gpu-id")


def at_start() -> None:
    argv = sys.argv
    # torchrun inside an srun step is stopped in torchrun's own process.
    torchrun_in_srun = "SLURM_STEP_ID" in os.environ and any(
        "torch.distributed." in a or a.endswith("torchrun") for a in getattr(sys, "orig_argv", argv)[:4]
    )
    # torchrun / torch.distributed.launch starting a tool (dist_train.sh): unknown arguments are
    # refused once, in the launcher's own process.
    launcher = not torchrun_in_srun and any(
        "torch.distributed." in a or a.endswith("torchrun") for a in getattr(sys, "orig_argv", argv)[:3]
    )
    if not (torchrun_in_srun or launcher) and (
        len(argv) < 2 or not any(a.split("=")[0] in LAUNCH_FLAGS for a in argv[1:])
    ):
        return
    # argparse first: its post-import hook imports the patch module, which must
    # not be half-imported at that moment (its own imports may pull argparse in).
    import argparse  # noqa: F401

    from .._launch import early

    if torchrun_in_srun:
        early.stop_torchrun_in_srun()
    elif launcher:
        early.refuse_unknown_in_launcher()
        return
    early.launch_early(LAUNCH_FLAGS)
