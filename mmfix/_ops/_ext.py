"""The stand-in ``mmcv._ext``: every name mmcv's compiled extension has.

Built from ``_table.EXT_FUNCTIONS``. Implemented names are the family modules'
functions themselves (no wrapper: same call cost as any Python function); the
others are stubs that raise ``mmfix.OpUnavailableError`` when called. mmcv checks
only that each name exists at ``import mmcv.ops``, so every ``mmcv.ops`` module
imports, and a model fails only if it really runs an op mmfix cannot supply.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any, Callable

from .. import _log
from ._table import EXT_FUNCTIONS, UNAVAILABLE_HINTS

MODULE_NAME = "mmcv._ext"

_GET_COMPILED_OPS = (
    "To run it, install mmcv with its compiled ops for your torch and CUDA: a prebuilt wheel where "
    "OpenMMLab publishes one (https://mmcv.readthedocs.io/en/latest/get_started/installation.html), "
    "or build it: `pip install 'setuptools<82' ninja` then `pip install --no-build-isolation "
    "mmcv==2.1.0` (10-20 minutes, needs a C++ compiler and, for CUDA ops, nvcc). A compiled "
    "mmcv._ext always takes precedence over mmfix's."
)


def _calling_layer() -> str:
    """Who called the op: the nearest ``nn.Module`` on the stack and the mmcv wrapper, if any."""
    frame: Any = sys._getframe(2)
    wrapper = layer = None
    nn_module = getattr(sys.modules.get("torch.nn"), "Module", None)
    while frame is not None and (wrapper is None or layer is None):
        module_name = frame.f_globals.get("__name__", "")
        if wrapper is None and module_name.startswith("mmcv.ops."):
            wrapper = f"{module_name}.{frame.f_code.co_name}"
        this = frame.f_locals.get("self")
        if layer is None and nn_module is not None and isinstance(this, nn_module):
            cls = type(this)
            layer = f"{cls.__module__}.{cls.__qualname__}"
        frame = frame.f_back
    parts = []
    if layer:
        parts.append(f"layer {layer}")
    if wrapper:
        parts.append(f"through {wrapper}")
    return ", ".join(parts) if parts else "no nn.Module on the call stack"


def _hint(name: str) -> str:
    for prefix, hint in UNAVAILABLE_HINTS.items():
        if name.startswith(prefix):
            return f" {hint}."
    return ""


def unavailable(name: str, why: str | None = None) -> Callable[..., Any]:
    """A stub for an extension function mmfix does not implement (or could not load)."""

    def stub(*args: Any, **kwargs: Any) -> Any:
        from .._errors import OpUnavailableError

        reason = why or "has no PyTorch implementation in mmfix"
        raise OpUnavailableError(
            f"mmcv op `{name}` ({_calling_layer()}) {reason}, and this mmcv has no compiled ops "
            f"(mmcv-lite, or mmcv built without them).{_hint(name)} {_GET_COMPILED_OPS}",
            op=name,
        )

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = f"Not implemented by mmfix: calling it raises mmfix.OpUnavailableError ({name})."
    stub.__mmfix_unavailable__ = True  # type: ignore[attr-defined]
    return stub


def implementation(name: str) -> tuple[Callable[..., Any], str | None]:
    """The function for one extension name, and its family (None for a stub)."""
    family = EXT_FUNCTIONS[name]
    try:
        module = importlib.import_module(f"{__package__}.{family}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.{family}":
            raise
        return unavailable(name), None
    except Exception as exc:
        # A bug in one family must not make `import mmcv.ops` fail for every model.
        _log.error(
            f"mmfix's PyTorch ops for {family!r} failed to load ({type(exc).__name__}: {exc}); "
            "models that use them will stop with an error naming the op. Please report it.",
            key=f"ops-family:{family}",
        )
        return unavailable(name, f"failed to load in mmfix ({type(exc).__name__}: {exc})"), None
    function = getattr(module, name, None)
    if function is None:
        return unavailable(name), None
    return function, family


def build() -> types.ModuleType:
    """A fresh stand-in module holding every extension name."""
    module = types.ModuleType(MODULE_NAME, "mmcv's compiled ops, supplied by mmfix in PyTorch (mmfix._ops).")
    families: dict[str, str | None] = {}
    for name in EXT_FUNCTIONS:
        function, family = implementation(name)
        setattr(module, name, function)
        families[name] = family
    module.__mmfix__ = True  # type: ignore[attr-defined]
    module.__mmfix_families__ = families  # type: ignore[attr-defined]
    return module


def implemented_names() -> list[str]:
    """The extension names mmfix implements (for reports and tests)."""
    return [name for name in EXT_FUNCTIONS if implementation(name)[1] is not None]
