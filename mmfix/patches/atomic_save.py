"""Checkpoints MMEngine writes to local disk are atomic; so is ``last_checkpoint``.

Stock MMEngine 0.10.7 writes ``epoch_N.pth`` with ``open(path, 'wb')`` in
``LocalBackend.put`` and ``last_checkpoint`` with ``open(path, 'w')`` in
CheckpointHook: a SIGKILL, a node crash or a full disk mid-write leaves a
truncated file under the final name, which the next resume then trips over.
``last_checkpoint`` is written by CheckpointHook after ``save_checkpoint``
returned, so with both writes atomic it only ever names a complete file.
"""
from __future__ import annotations

from typing import Any, Callable

from .. import _atomic, _wrapping

NAME = "atomic_save"
_swaps: list[_wrapping.Swap] = []
_hook_module: Any = None


def apply() -> str | None:
    global _hook_module
    from mmengine.fileio.backends import local_backend
    from mmengine.hooks import checkpoint_hook
    from mmengine.runner import checkpoint, runner

    # save_checkpoint on a plain local path: torch.save straight into the temporary
    # file (stock serialises into memory first, then copies it out).
    save = _wrapping.wrap(checkpoint, "save_checkpoint", _save_checkpoint)
    _swaps.append(save)
    if (alias := _wrapping.also_install(save, runner, "save_checkpoint")) is not None:
        _swaps.append(alias)
    # Everything else MMEngine puts on local disk (other backends' arguments included).
    _swaps.append(_wrapping.wrap(local_backend.LocalBackend, "put", _put))
    # CheckpointHook writes last_checkpoint with the builtin open(); a module
    # global of that name takes precedence inside that module only.
    if "open" in vars(checkpoint_hook):
        raise RuntimeError("mmengine.hooks.checkpoint_hook already defines `open`; not patching it")
    checkpoint_hook.open = _atomic.open_atomic
    _hook_module = checkpoint_hook
    return None


def remove() -> None:
    global _hook_module
    while _swaps:
        _swaps.pop().undo()
    if _hook_module is not None and vars(_hook_module).get("open") is _atomic.open_atomic:
        del _hook_module.open
    _hook_module = None


def _is_plain_local(filename: Any, file_client_args: Any, backend_args: Any) -> bool:
    if file_client_args is not None or backend_args is not None:
        return False
    name = str(filename)
    return "://" not in name and not name.startswith("pavi:")


def _save_checkpoint(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    names = ("checkpoint", "filename", "file_client_args", "backend_args")
    bound = dict(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    if len(args) > len(names) or set(kwargs) - set(names) or "filename" not in bound:
        return wrapped(*args, **kwargs)
    if not _is_plain_local(bound["filename"], bound.get("file_client_args"), bound.get("backend_args")):
        return wrapped(*args, **kwargs)
    _atomic.save_torch(bound["checkpoint"], str(bound["filename"]))
    return None


def _put(wrapped: Callable[..., Any], backend: Any, args: tuple, kwargs: dict) -> Any:
    obj = args[0] if args else kwargs["obj"]
    filepath = args[1] if len(args) > 1 else kwargs["filepath"]
    _atomic.write_bytes(str(filepath), obj)
    return None
