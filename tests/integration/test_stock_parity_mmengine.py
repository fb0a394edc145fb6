"""Item 5 of issue 27, MMEngine's side: where mmfix has nothing to add, MMEngine behaves as stock.

Each check runs the same probe twice in fresh interpreters, once with mmfix active and once
with MMFIX_DISABLE=1 (stock MMEngine), and compares what the probe saw: exception type and
message for ``custom_imports``, identity and equality for every attribute mmfix wraps.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import clean_env, run

pytestmark = pytest.mark.slow

_CUSTOM_IMPORTS = """
import json, sys
if sys.argv[1] == "mmfix":
    import mmfix
from mmengine.config import Config
out = {}
for name in sys.argv[2:]:
    try:
        cfg = Config.fromfile(name)
        out[name] = {"loaded": sorted(cfg.keys())}
    except BaseException as exc:
        out[name] = {"type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": str(exc),
                     "cause": repr(exc.__cause__)}
wrapped = type(Config.__dict__["fromfile"]).__module__.startswith(("mmfix", "wrapt"))
print("RESULT " + json.dumps({"wrapped": wrapped, "out": out}))
"""


def _result(proc) -> dict:
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise AssertionError(f"no RESULT line\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")


def _probe(code: str, mode: str, *args: str, cwd: Path, **extra_env: str) -> dict:
    """``code`` in a fresh interpreter: ``mode`` "mmfix" (active) or "stock" (MMFIX_DISABLE=1)."""
    env = clean_env(**extra_env) if mode == "mmfix" else clean_env(MMFIX_DISABLE="1", **extra_env)
    return _result(run([sys.executable, "-c", textwrap.dedent(code), mode, *args], env=env, cwd=cwd, check=True))


def _both(code: str, *args: str, cwd: Path) -> tuple[dict, dict]:
    return _probe(code, "stock", *args, cwd=cwd), _probe(code, "mmfix", *args, cwd=cwd)


def test_custom_imports_that_fail_raise_mmengines_own_error(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("custom_imports = dict(imports=['no_such_module'])\na = 1\n")
    (tmp_path / "allowed.py").write_text(
        "custom_imports = dict(imports=['no_such_module'], allow_failed_imports=True)\na = 1\n"
    )
    # A lazy-import (pure Python) config: stock MMEngine never imports its custom_imports.
    (tmp_path / "lazy.py").write_text(
        "from mmengine.dataset import DefaultSampler\n"
        "custom_imports = dict(imports=['no_such_module'])\n"
        "sampler = dict(type=DefaultSampler)\n"
    )
    files = ("plain.py", "allowed.py", "lazy.py")
    stock, ours = _both(_CUSTOM_IMPORTS, *files, cwd=tmp_path)
    assert ours["wrapped"] and not stock["wrapped"]
    assert stock["out"]["plain.py"]["type"] == "builtins.ImportError"
    assert stock["out"]["plain.py"]["message"].startswith("Failed to import custom modules from ")
    assert "the current sys.path is" in stock["out"]["plain.py"]["message"]
    assert "loaded" in stock["out"]["allowed.py"] and "loaded" in stock["out"]["lazy.py"]
    assert ours["out"] == stock["out"]


_IDENTITY = """
import json, os, sys
if sys.argv[1] == "mmfix":
    import mmfix
import torch
if sys.argv[1] == "stock" and os.environ.get("COMPILED_MMCV_EXT"):
    # Stock MMDetection needs compiled mmcv ops (mmfix supplies them on mmcv-lite).
    import importlib.machinery, importlib.util
    so = os.environ["COMPILED_MMCV_EXT"]
    loader = importlib.machinery.ExtensionFileLoader("mmcv._ext", so)
    ext = importlib.util.module_from_spec(importlib.util.spec_from_file_location("mmcv._ext", so, loader=loader))
    loader.exec_module(ext)
    sys.modules["mmcv._ext"] = ext
import mmengine, mmengine.config, mmengine.dist, mmengine.runner
if os.environ.get("COMPILED_MMCV_EXT"):
    import mmdet.apis  # DetInferencer's own name for MMEngine's loader (legacy_checkpoint)
from mmengine.config import Config
from mmengine.utils import get_object_from_string

if sys.argv[1] == "mmfix":
    from mmfix import _activation
    targets = []
    for state in _activation._patches.values():
        if state.module is None:
            continue
        for swap in state.module._swaps.swaps():
            owner = swap.owner
            if isinstance(owner, type):
                targets.append([owner.__module__, owner.__qualname__, swap.name])
            elif hasattr(owner, "__name__") and sys.modules.get(owner.__name__) is owner:
                targets.append([owner.__name__, None, swap.name])
else:
    targets = json.loads(sys.argv[2])


def resolve(module, qualname):
    import importlib

    owner = importlib.import_module(module)
    for part in (qualname or "").split(".") if qualname else ():
        owner = getattr(owner, part)
    return owner


def by_string(path):
    try:
        return get_object_from_string(path)
    except Exception as exc:
        return exc


facts = {}
for module, qualname, name in targets:
    owner = resolve(module, qualname)
    a, b = getattr(owner, name), getattr(owner, name)
    path = ".".join(p for p in (module, qualname, name) if p)
    found = by_string(path)
    fact = {
        "wrapped": type(vars(owner).get(name, a)).__module__.startswith(("mmfix", "wrapt")),
        "is": a is b,
        "eq": a == b,
        "hash": hash(a) == hash(b),
        "by_string_is": found is a,
        "by_string_eq": found == a,
    }
    if isinstance(owner, type):
        sub = type("Sub", (owner,), {})
        fact["subclass_is"] = getattr(sub, name) is a
        fact["subclass_eq"] = getattr(sub, name) == a
    facts[path] = fact
# the issue's own expressions
facts["issue"] = {
    "get_object_from_string": get_object_from_string("mmengine.config.Config.fromfile") is Config.fromfile,
    "fromfile": Config.fromfile is Config.fromfile,
    "resume": mmengine.runner.Runner.resume is mmengine.runner.Runner.resume,
    "load_checkpoint": mmengine.runner.load_checkpoint is mmengine.runner.load_checkpoint,
}
cfg = Config(dict(a=1))
facts["Config().merge_from_dict"] = {"is": cfg.merge_from_dict is cfg.merge_from_dict,
                                     "eq": cfg.merge_from_dict == cfg.merge_from_dict}
print("RESULT " + json.dumps({"targets": targets, "facts": facts}))
"""


def test_every_wrapped_attribute_keeps_stocks_identity_and_equality(tmp_path: Path) -> None:
    from ops_support import extract_compiled_ext

    # Stock MMDetection imports only with compiled mmcv: without its wheel, MMEngine's side alone.
    # (Extracted for the probes, not loaded here: see load_compiled_ext on a loaded module's file.)
    try:
        ext = str(extract_compiled_ext(tmp_path))
    except pytest.skip.Exception:
        ext = ""
    ours = _probe(_IDENTITY, "mmfix", cwd=tmp_path, COMPILED_MMCV_EXT=ext)
    stock = _probe(_IDENTITY, "stock", json.dumps(ours["targets"]), cwd=tmp_path, COMPILED_MMCV_EXT=ext)
    paths = set(ours["facts"])
    # the enumeration really found the wrapped methods the issue names (and more)
    for named in (
        "mmengine.config.config.Config.fromfile",
        "mmengine.config.config.Config.merge_from_dict",
        "mmengine.runner.runner.Runner.resume",
        "mmengine.runner.load_checkpoint",
    ):
        assert named in paths, sorted(paths)
    assert all(f["wrapped"] for f in ours["facts"].values() if "wrapped" in f)
    assert not any(f.get("wrapped") for f in stock["facts"].values())
    strip = lambda facts: {p: {k: v for k, v in f.items() if k != "wrapped"} for p, f in facts.items()}
    assert strip(ours["facts"]) == strip(stock["facts"])
    # what the issue saw broken: stock has identity for each of these
    assert all(stock["facts"]["issue"].values()), stock["facts"]["issue"]
