"""A hook the distributed tests load through `custom_imports`, to see inside each rank."""
from __future__ import annotations

import os
import signal
import threading
import time

import torch
from mmengine.dist import get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class RankProbeHook(Hook):
    """Writes, per rank: the world size, how many iterations it stepped, who saved
    checkpoints, and its final parameters."""

    def __init__(self) -> None:
        self.steps = 0

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self.steps += 1
        if os.environ.get("PROBE_FAIL_RANK") == str(get_rank()) and self.steps == 3:
            raise RuntimeError(f"probe: deliberate failure on rank {get_rank()} at iteration {self.steps}")

    def before_save_checkpoint(self, runner, checkpoint) -> None:
        kill = os.environ.get("KILL_AT_SAVE")  # "EPOCH:FRACTION": SIGKILL mid-write of epoch_EPOCH.pth
        if kill:
            epoch, fraction = kill.split(":")
            if int(epoch) == runner.epoch + 1 and not getattr(self, "_killer_started", False):
                self._killer_started = True
                self._start_killer(runner.work_dir, int(epoch), float(fraction))
        with open(os.path.join(runner.work_dir, f"saved_by_rank{get_rank()}"), "a") as fh:
            fh.write(f"{runner.epoch}\n")

    @staticmethod
    def _start_killer(work_dir: str, epoch: int, fraction: float) -> None:
        final = f"epoch_{epoch}.pth"
        expected = int(os.environ.get("KILL_EXPECTED_BYTES", "0"))

        def watch() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for name in os.listdir(work_dir):
                    if name == final or name.startswith(f".{final}."):
                        try:
                            size = os.path.getsize(os.path.join(work_dir, name))
                        except OSError:
                            continue
                        if size >= fraction * expected:
                            os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(0.0005)

        threading.Thread(target=watch, daemon=True).start()

    def after_run(self, runner) -> None:
        model = runner.model.module if hasattr(runner.model, "module") else runner.model
        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        torch.save({"world_size": get_world_size(), "steps": self.steps, "state": state},
                   os.path.join(runner.work_dir, f"probe_rank{get_rank()}.pth"))
