"""mmfix: makes OpenMMLab training behave on multi-GPU machines, clusters and modern PyTorch.

``import mmfix`` activates every enabled patch. It imports neither torch nor
MMEngine: each patch attaches when the module it patches is imported (at once,
if it already is). See the README for the switches and the zero-code front doors.
"""

from __future__ import annotations

from . import _activation, _log, _settings
from ._version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Iterable

# Exception classes, resolved on first use (see __getattr__ below).
_LAZY_ERRORS = (
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointRefusedError",
    "CheckpointSaveError",
    "ConfigConversionError",
    "DeviceAssignmentError",
    "MmfixUsageError",
    "OpUnavailableError",
    "UnusedParametersError",
)

__all__ = [
    *_LAZY_ERRORS,
    "__version__",
    "disable",
    "enable",
    "patch_names",
    "status",
    "trust_globals",
]


def enable(patches: Iterable[str] | None = None) -> dict[str, Any]:
    """Activate mmfix's patches again (all enabled ones, or just ``patches``).

    ``MMFIX_*`` variables are read afresh, so a changed switch takes effect. The
    global switch ``MMFIX_DISABLE=1`` still wins: it is the one place an
    administrator can turn mmfix off without touching code. Returns ``status()``.
    """
    _settings.refresh()
    _log.forget()
    _activation.activate("enable()", only=patches)
    return status()


def disable(patches: Iterable[str] | None = None) -> dict[str, Any]:
    """Restore every original object (or those of ``patches``). Returns ``status()``.

    An attribute is put back only where it still holds mmfix's wrapper; where
    someone has wrapped it since, the wrapper is switched to pass-through instead.
    """
    _activation.deactivate(only=patches)
    return status()


def status() -> dict[str, Any]:
    """Which patches are active, pending (their module is not imported yet), skipped
    or failed, and why; plus which front doors activated mmfix."""
    return _activation.snapshot()


def patch_names() -> list[str]:
    """The names accepted by ``enable``/``disable`` and ``MMFIX_DISABLED_PATCHES``."""
    from ._patches import PATCHES

    return list(PATCHES)


def trust_globals(*names: Any) -> None:
    """Allow checkpoints to use these globals (``"module.Name"`` strings or objects).

    Only call this for files you trust: unpickling a global runs its code.
    """
    from ._checkpoint.safe_globals import trust

    trust(names)


def __getattr__(name: str) -> Any:
    # The error classes subclass pickle's; importing pickle costs ~4 ms, which
    # every interpreter start would pay once the .pth hook is installed.
    if name in _LAZY_ERRORS:
        from . import _errors

        return getattr(_errors, name)
    raise AttributeError(f"module 'mmfix' has no attribute {name!r}")


_activation.activate_at_import()
