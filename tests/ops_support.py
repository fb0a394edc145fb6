"""The op tests' ground truth (mmcv's compiled extension) and how they compare the two extensions.

The ground truth is the compiled ``mmcv/_ext*.so`` of the prebuilt mmcv 2.1.0 wheel in
``../shared/wheels`` (built from mmcv's source against torch 2.13.0, CPU). It is
extracted from the wheel and loaded as a module object of its own, outside
``sys.modules``, so the same process holds both extensions: mmcv-lite's Python code
(identical to mmcv 2.1.0's) stays installed, and every comparison runs both kernels
on the same tensors. Without the wheel (or with another torch, which the binary was
not built for) the comparisons skip, saying why; CI sets REQUIRE_COMPILED_MMCV=1 so
that there they fail instead.
"""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import os
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
WHEEL_NAME = "mmcv-2.1.0-cp311-cp311-linux_x86_64.whl"
#: The torch the wheel's binary was built against (a C++ ABI: another release may crash on load).
WHEEL_TORCH = "2.13."


def wheel_path() -> Path:
    folder = os.environ.get("MMFIX_MMCV_WHEELS") or str(REPO.parent / "shared" / "wheels")
    return Path(folder) / WHEEL_NAME


def _unavailable(reason: str) -> None:
    message = (
        f"compiled mmcv 2.1.0 (the ground truth for mmfix's ops) is not available: {reason}. "
        f"The comparisons need {WHEEL_NAME} (set MMFIX_MMCV_WHEELS to its folder) and torch 2.13."
    )
    if os.environ.get("REQUIRE_COMPILED_MMCV") == "1":
        pytest.fail("REQUIRE_COMPILED_MMCV=1 but " + message)
    pytest.skip(message)


def extract_compiled_ext(folder: Path) -> Path:
    """The compiled extension's file, extracted from the wheel into ``folder`` (not loaded): for a
    subprocess to load. Skips (fails under REQUIRE_COMPILED_MMCV=1) where the wheel cannot serve."""
    wheel = wheel_path()
    if not wheel.is_file():
        _unavailable(f"{wheel} does not exist")
    if not torch.__version__.startswith(WHEEL_TORCH):
        _unavailable(f"the wheel's binary was built for torch {WHEEL_TORCH}x, this is torch {torch.__version__}")
    with zipfile.ZipFile(wheel) as archive:
        member = next(n for n in archive.namelist() if n.startswith("mmcv/_ext") and n.endswith(".so"))
        target = folder / Path(member).name
        if not target.exists():
            archive.extract(member, folder)
            (folder / member).rename(target)
    return target


def load_compiled_ext(cache: Path) -> ModuleType:
    """The compiled extension loaded in this process, extracted into ``cache``.

    CPython keeps an extension module per name for the life of the process: a second load, from
    another file, hands back the first module object, whose ``__file__`` names the first file. So
    a module's ``__file__`` is no path to give a subprocess (that file may be gone with its test's
    folder): use :func:`extract_compiled_ext` for that, and load in-process only from folders that
    live as long as the process's use of the module (session fixtures, a benchmark's run)."""
    target = extract_compiled_ext(cache)
    loader = importlib.machinery.ExtensionFileLoader("mmcv._ext", str(target))
    spec = importlib.util.spec_from_file_location("mmcv._ext", str(target), loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def compiled_ext_or_none(purpose: str) -> ModuleType | None:
    """For the benchmarks: compiled mmcv's extension (extracted to a fresh temporary folder), or
    None after printing why not and that only mmfix's ``purpose`` (times, peaks …) follow."""
    import tempfile

    try:
        return load_compiled_ext(Path(tempfile.mkdtemp(prefix="mmfix-bench-")))
    except BaseException as exc:  # _unavailable raises pytest's skip/fail, BaseException subclasses
        if isinstance(exc, KeyboardInterrupt):
            raise
        print(f"no compiled mmcv to compare with ({exc}); printing mmfix's {purpose} only")
        return None


# --- comparing the two extensions ------------------------------------------------------------
# Most of mmcv's extension functions write their results into tensors the caller passes in,
# so "the output" is every tensor argument after the call, plus the return value. Each side
# gets its own deep copy of the arguments.


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return copy.deepcopy(value)


def call(ext: ModuleType, name: str, *args: Any, **kwargs: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """``ext.name(*args, **kwargs)`` on copies: (returned value, the args after, the kwargs after)."""
    args, kwargs = _clone(args), _clone(kwargs)
    result = getattr(ext, name)(*args, **kwargs)
    return result, args, kwargs


def assert_close(actual: Any, expected: Any, *, what: str, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual).__name__}"
        assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
        if expected.dtype.is_floating_point:
            # NaN where the compiled kernel gives NaN is the same answer (e.g. 0/0 overlaps of empty boxes).
            torch.testing.assert_close(
                actual, expected, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}"
            )
        else:
            assert torch.equal(actual, expected), f"{what}: {actual} != {expected}"
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), f"{what}: {actual!r} != {expected!r}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, what=f"{what}[{i}]", rtol=rtol, atol=atol)
    else:
        assert actual == expected, f"{what}: {actual!r} != {expected!r}"


def assert_same_call(
    mmfix_ext: ModuleType,
    compiled_ext: ModuleType,
    name: str,
    *args: Any,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    **kwargs: Any,
) -> tuple[Any, tuple[Any, ...]]:
    """Both extensions give the same return value and leave the same values in every argument.

    Returns mmfix's (result, args after the call) for further checks."""
    expected, expected_args, expected_kwargs = call(compiled_ext, name, *args, **kwargs)
    actual, actual_args, actual_kwargs = call(mmfix_ext, name, *args, **kwargs)
    assert_close(actual, expected, what=f"{name} returned", rtol=rtol, atol=atol)
    for i, (a, e) in enumerate(zip(actual_args, expected_args)):
        assert_close(a, e, what=f"{name} argument {i}", rtol=rtol, atol=atol)
    for key in expected_kwargs:
        assert_close(actual_kwargs[key], expected_kwargs[key], what=f"{name} argument {key}", rtol=rtol, atol=atol)
    return actual, actual_args


# --- running mmcv's own Python API on one extension or the other ---------------------------


class swap_ext:
    """Within the block, every imported ``mmcv.ops`` module calls ``ext`` as its extension.

    Each ``mmcv/ops/*.py`` keeps the extension as its module global ``ext_module``; swapping
    that global runs mmcv's real autograd Functions and modules (the code users run) on
    either extension, in one process: ``with swap_ext(compiled_ext): expected = RoIAlign(...)(x, rois)``.
    Needs ``import mmcv.ops`` to have worked (mmfix's patch supplies the extension there).
    """

    def __init__(self, ext: ModuleType) -> None:
        self.ext = ext
        self._saved: list[tuple[ModuleType, Any]] = []

    def __enter__(self) -> ModuleType:
        import sys

        for name, module in list(sys.modules.items()):
            if name.startswith("mmcv.ops.") and module is not None and hasattr(module, "ext_module"):
                self._saved.append((module, module.ext_module))
                module.ext_module = self.ext
        return self.ext

    def __exit__(self, *exc: object) -> None:
        for module, original in self._saved:
            module.ext_module = original
        self._saved.clear()


def require_mmcv() -> ModuleType:
    """mmcv's Python package (mmcv-lite, or mmcv): the tests that drive mmfix's ops through mmcv's
    own API, or run mmfix's code that calls mmcv, need it. Without it they skip, saying so
    (mmfix itself does not depend on mmcv); where CI asks for the whole stack (REQUIRE_MMDET=1 or
    REQUIRE_COMPILED_MMCV=1) a missing mmcv is a failure instead."""
    try:
        import mmcv
    except ImportError as exc:
        message = f"mmcv is not importable ({exc}); pip install -r requirements/mmdet.txt (mmcv-lite) to run this test"
        required = [name for name in ("REQUIRE_MMDET", "REQUIRE_COMPILED_MMCV") if os.environ.get(name) == "1"]
        if required:
            pytest.fail(f"{'=1 and '.join(required)}=1 but {message}")
        pytest.skip(message)
    return mmcv


def import_mmcv_ops(mmfix_ext: ModuleType) -> ModuleType:
    """``mmcv.ops``, imported with ``mmfix_ext`` as ``mmcv._ext`` where no compiled one is installed.

    The test process keeps mmfix's patches off (tests/conftest.py), so the stand-in is put in
    ``sys.modules`` directly, as the ``mmcv_ops`` patch would. Skips where mmcv is not installed
    (see require_mmcv)."""
    import sys

    require_mmcv()
    try:
        import mmcv.ops
    except ImportError:
        sys.modules.setdefault("mmcv._ext", mmfix_ext)
        import mmcv.ops
    return mmcv.ops
