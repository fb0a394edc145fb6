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

from .. import _wrapping
from .._checkpoint import atomic

_swaps = _wrapping.SwapSet()


def apply() -> str | None:
    from mmengine.fileio.backends import local_backend
    from mmengine.hooks import checkpoint_hook
    from mmengine.runner import checkpoint, runner

    # save_checkpoint on a plain local path: torch.save straight into the temporary
    # file (stock serialises into memory first, then copies it out).
    _swaps.wrap(checkpoint, "save_checkpoint", _save_checkpoint, aliases=((runner, "save_checkpoint"),))
    # Everything else MMEngine puts on local disk (other backends' arguments included).
    _swaps.wrap(local_backend.LocalBackend, "put", _put)
    # CheckpointHook writes last_checkpoint with the builtin open(); a module
    # global of that name takes precedence inside that module only.
    if "open" in vars(checkpoint_hook):
        raise RuntimeError("mmengine.hooks.checkpoint_hook already defines `open`; not patching it")
    checkpoint_hook.open = atomic.open_atomic  # type: ignore[attr-defined, unused-ignore]
    _swaps.on_undo(lambda: _drop_open(checkpoint_hook))
    return None


def remove() -> None:
    _swaps.undo_all()


def _drop_open(module: Any) -> None:
    if vars(module).get("open") is atomic.open_atomic:
        del module.open


def _is_plain_local(filename: Any, file_client_args: Any, backend_args: Any) -> bool:
    if file_client_args is not None or backend_args is not None:
        return False
    name = str(filename)
    return "://" not in name and not name.startswith("pavi:")


def _save_checkpoint(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    names = ("checkpoint", "filename", "file_client_args", "backend_args")
    bound = dict(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    if len(args) > len(names) or set(kwargs) - set(names) or "filename" not in bound:
        return wrapped(*args, **kwargs)
    if not _is_plain_local(bound["filename"], bound.get("file_client_args"), bound.get("backend_args")):
        return wrapped(*args, **kwargs)
    atomic.save_torch(bound["checkpoint"], str(bound["filename"]))
    return None


def _put(wrapped: Callable[..., Any], backend: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    obj = _wrapping.argument(args, kwargs, 0, "obj")
    filepath = _wrapping.argument(args, kwargs, 1, "filepath")
    atomic.write_bytes(str(filepath), obj)
    return None
