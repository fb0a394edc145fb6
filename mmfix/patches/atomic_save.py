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


def _put(wrapped: Callable[..., Any], backend: Any, args: tuple, kwargs: dict) -> Any:
    obj = args[0] if args else kwargs["obj"]
    filepath = args[1] if len(args) > 1 else kwargs["filepath"]
    _atomic.write_bytes(str(filepath), obj)
    return None
