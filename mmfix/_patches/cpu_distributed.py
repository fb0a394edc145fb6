"""MMEngine's init_dist and DDP wrapper on hosts without a usable GPU.

Stock MMEngine 0.10.7 calls ``torch.cuda.set_device`` unconditionally in its
pytorch, slurm and mpi initialisers (``_cuda_setDevice`` AttributeError on a CPU
build, "No CUDA GPUs are available" on a CUDA build with none visible), keeps
``backend='nccl'`` from the config, and hands ``device_ids=[LOCAL_RANK]`` to DDP,
which CPU modules reject. On such a host, set_device is skipped during
init_dist, nccl becomes gloo (with one warning), and DDP gets device_ids=None.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator

from .. import _log, _settings, _wrapping

_swaps = _wrapping.SwapSet()


def apply() -> str | None:
    import mmengine.dist as dist_pkg
    from mmengine.dist import utils

    swap = _swaps.wrap(utils, "init_dist", _init_dist, aliases=((dist_pkg, "init_dist"),))

    def alias_in_runner(runner_module: Any) -> None:
        if _swaps:
            _swaps.alias(swap, runner_module, "init_dist")

    def wrap_ddp(model_module: Any) -> None:
        if not _swaps:
            return
        from mmengine.model.wrappers.distributed import MMDistributedDataParallel

        _swaps.wrap(MMDistributedDataParallel, "__init__", _ddp_init)

    _swaps.when_imported("mmengine.runner.runner", _guarded(alias_in_runner))
    _swaps.when_imported("mmengine.model", _guarded(wrap_ddp))
    return None


def remove() -> None:
    _swaps.undo_all()


def _guarded(hook: Callable[[Any], None]) -> Callable[[Any], None]:
    def run(module: Any) -> None:
        try:
            hook(module)
        except Exception as exc:  # never break the import that triggered it
            _log.error(
                f"cpu_distributed could not finish patching {module.__name__}: {exc!r}",
                key=f"cpu_distributed:{module.__name__}",
            )

    return run


def _cuda_usable() -> bool:
    import torch

    return torch.cuda.is_available()


def _no_cuda_reason() -> str:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        return "CUDA_VISIBLE_DEVICES is empty"
    import torch

    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is a CPU-only build"
    return "no CUDA device is visible"


@contextlib.contextmanager
def _set_device_skipped() -> Iterator[None]:
    import torch

    original = torch.cuda.set_device

    def skip_set_device(device: Any) -> None:
        """Stand-in for torch.cuda.set_device while init_dist runs on a CPU-only host."""

    torch.cuda.set_device = skip_set_device
    try:
        yield
    finally:
        if torch.cuda.set_device is skip_set_device:
            torch.cuda.set_device = original


def _init_dist(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if _cuda_usable():
        return wrapped(*args, **kwargs)
    # init_dist(launcher, backend='nccl', init_backend='torch', **kwargs)
    if _wrapping.argument(args, kwargs, 1, "backend", "nccl") == "nccl":
        # In workers of a legacy `--gpus N` CPU launch the launcher has already said it once.
        emit = _log.debug if _settings.current().launched else _log.warning
        emit(
            f"{_no_cuda_reason()}, so the nccl backend cannot run; this is a CPU run and mmfix uses "
            "gloo instead (set env_cfg.dist_cfg.backend='gloo' in the config to silence this).",
            key="nccl-to-gloo",
        )
        args, kwargs = _wrapping.with_argument(args, kwargs, 1, "backend", "gloo")
    with _set_device_skipped():
        result = wrapped(*args, **kwargs)
    _destroy_group_at_exit()
    return result


_exit_hook_registered = False
#: How long the exit may wait for the group to close: a group whose peer died must not hold up the exit.
DESTROY_TIMEOUT_S = 10.0


def _destroy_group_at_exit() -> None:
    # MMEngine never destroys the process group. Left to interpreter finalisation, gloo's worker
    # threads are torn down while they still hold tensors, and a run that finished (checkpoints
    # written, exit status about to be 0) dies with SIGABRT, "terminate called without an active
    # exception", in about a third of two-rank CPU runs here; torchrun then reports the run failed.
    # Destroying the group while the interpreter is still whole avoids it (as PyTorch advises).
    global _exit_hook_registered
    if _exit_hook_registered:
        return
    import atexit

    atexit.register(_destroy_group)
    _exit_hook_registered = True

    def unregister() -> None:  # switched off: the exit is stock again
        global _exit_hook_registered
        atexit.unregister(_destroy_group)
        _exit_hook_registered = False

    _swaps.on_undo(unregister)


#: After the group is closed, the main thread gives up the GIL this long so that gloo's and torch's
#: background threads can drop the tensors they still hold while the interpreter is whole: a thread
#: that takes the GIL during finalisation is ended with pthread_exit, which aborts the process.
SETTLE_S = 0.2


def _close_group() -> None:
    import gc

    import torch.distributed as dist

    gc.collect()  # frees Runner/DDP/Work cycles (and the tensors they hold) now, not during finalisation
    dist.destroy_process_group()


def _destroy_group() -> None:
    import threading
    import time

    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return  # the script destroyed it itself
        closer = threading.Thread(target=_close_group, name="mmfix-destroy-group", daemon=True)
        closer.start()
        closer.join(DESTROY_TIMEOUT_S)
        if closer.is_alive():
            _log.warning(
                f"the distributed process group did not close within {DESTROY_TIMEOUT_S:.0f} s at exit "
                "(a peer process gone?); exiting without waiting further.",
                key="destroy-group-timeout",
            )
        else:
            time.sleep(SETTLE_S)
    except Exception as exc:  # an exit hook must never turn a finished run into a failed one
        _log.debug(f"destroying the process group at exit failed: {exc!r}", key="destroy-group")


def _ddp_init(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if kwargs.get("device_ids") is not None and not _cuda_usable():
        module = _wrapping.argument(args, kwargs, 0, "module")
        on_cpu = module is None or all(p.device.type == "cpu" for p in module.parameters())
        if on_cpu:
            kwargs["device_ids"] = None
            kwargs.pop("output_device", None)
    return wrapped(*args, **kwargs)
