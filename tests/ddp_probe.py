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
        self.backing: dict[str, bool] | None = None

    def before_train(self, runner) -> None:
        if os.environ.get("DISTURB_CKPT"):
            self.backing = _optimizer_state_backing(runner, os.environ["DISTURB_CKPT"])
            self._disturb(0)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self.steps += 1
        if os.environ.get("DISTURB_CKPT"):
            self._disturb(self.steps)
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

    def _disturb(self, steps: int) -> None:
        """DISTURB="rewrite@0,truncate@3,delete@6": after that many iterations (0: after the
        resume, before the first step), local rank 0 does that to the resumed checkpoint while
        every rank waits, so all of them have loaded it and none has stepped on."""
        actions = [a.split("@") for a in os.environ.get("DISTURB", "").split(",") if a]
        due = [kind for kind, at in actions if int(at) == steps]
        if not due:
            return
        import torch.distributed as dist

        dist.barrier()
        if os.environ.get("LOCAL_RANK", "0") == "0":
            path = os.environ["DISTURB_CKPT"]
            for kind in due:
                _disturb_file(path, kind)
        dist.barrier()

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
        torch.save(
            {"world_size": get_world_size(), "steps": self.steps, "state": state, "backing": self.backing},
            os.path.join(runner.work_dir, f"probe_rank{get_rank()}.pth"),
        )


def _disturb_file(path: str, kind: str) -> None:
    if kind == "rewrite":  # in place, same inode and length, different bytes (as a torch.save over it would)
        size = os.path.getsize(path)
        with open(path, "r+b") as fh:
            fh.write(bytes(range(256)) * (size // 256) + bytes(size % 256))
            fh.flush()
            os.fsync(fh.fileno())
    elif kind == "truncate":
        os.truncate(path, 0)
    elif kind == "delete":
        os.remove(path)
    elif kind == "replace":  # a later save of the run under the same name
        torch.save({"state_dict": {}, "meta": {"replaced": True}}, path)
    else:
        raise ValueError(kind)


def _optimizer_state_backing(runner, path: str) -> dict[str, bool]:
    """Whether the resumed optimizer state (kept as loaded: the parameters are on the CPU)
    lies in mmfix's shared segment, or in a mapping of the checkpoint file itself."""
    regions = []
    with open("/proc/self/maps") as fh:
        for line in fh:
            fields = line.split(maxsplit=5)
            start, end = (int(x, 16) for x in fields[0].split("-"))
            regions.append((start, end, fields[5].strip() if len(fields) > 5 else "", int(fields[4])))
    # segment: the inode of mmfix's segment, the same in every rank that shares it
    found = {"tensors": 0, "memfd": False, "file": False, "segment": 0}
    for state in runner.optim_wrapper.optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor) and value.numel():
                found["tensors"] += 1
                ptr = value.data_ptr()
                for start, end, name, inode in regions:
                    if start <= ptr < end:
                        if "memfd:mmfix-checkpoint" in name:
                            found["memfd"] = True
                            found["segment"] = inode
                        found["file"] |= os.path.realpath(path) in name
    return found
