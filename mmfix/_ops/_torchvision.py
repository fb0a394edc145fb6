"""Whether torchvision's compiled kernels can serve as fast paths.

torchvision imports only beside the torch it was built for; a mismatched pair
fails at import (``operator torchvision::nms does not exist``) or warns. Either
way the pure-PyTorch implementations are used. ``MMFIX_OPS_TORCHVISION=0``
turns the fast paths off (they compute the same values; the switch exists to
compare the two and to rule torchvision out when debugging).
"""

from __future__ import annotations

from typing import Any

_UNSET: Any = object()
_ops: Any = _UNSET


def ops() -> Any:
    """``torchvision.ops`` when its compiled kernels work here, else None."""
    global _ops
    if _ops is _UNSET:
        _ops = _load()
    return _ops


def _load() -> Any:
    from .. import _settings

    if not _settings.current().ops_torchvision:
        return None
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch
            import torchvision.ops

            # Registered by torchvision's compiled library; absent when it failed to load.
            torch.ops.torchvision.nms  # noqa: B018
            torch.ops.torchvision.roi_align  # noqa: B018
        return torchvision.ops
    except Exception:
        return None


#: Where torchvision's kernel serves an op: (op, device type). Only where it computes what
#: mmcv's kernel on that device computes, and (on the CPU) is faster than mmfix's own code.
FAST_PATHS: frozenset[tuple[str, str]] = frozenset(
    {
        ("nms", "cpu"),
        ("roi_align", "cuda"),
    }
)


def use_for(op: str, device: Any) -> bool:
    """Whether ``op`` on tensors of ``device`` goes to torchvision's kernel."""
    return (op, device.type) in FAST_PATHS and ops() is not None


def reset() -> None:
    """Forget the answer (tests switch MMFIX_OPS_TORCHVISION)."""
    global _ops
    _ops = _UNSET


def describe() -> str:
    """A phrase for messages: which kernels back the ops."""
    return " (torchvision's kernels where it has them)" if ops() is not None else ""
