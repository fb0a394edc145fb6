"""Activation at import, in real interpreters: import order, idempotency, switches, failures."""

from __future__ import annotations

import json

import pytest

from conftest import clean_env, run_python

PROBE = """
import json, sys
import torch
out = {
    "wrapped": hasattr(torch.load, "__wrapped__"),
    "same_object": torch.load is torch.serialization.load,
    "depth": 0,
}
f = torch.load
while hasattr(f, "__wrapped__"):
    out["depth"] += 1
    f = f.__wrapped__
import mmfix
out["status"] = mmfix.status()
print(json.dumps(out))
"""


def probe(prefix: str = "", *flags: str, env: dict[str, str] | None = None) -> dict:
    proc = run_python(prefix + PROBE, *flags, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_mmfix_before_torch_patches_once() -> None:
    out = probe("import mmfix\n")
    assert out["wrapped"] and out["same_object"] and out["depth"] == 1
    assert out["status"]["patches"]["torch_load"]["state"] == "active"
    assert out["status"]["front_doors"] == ["import"]


def test_torch_before_mmfix_patches_at_once() -> None:
    code = """
import json, torch
original = torch.load
import mmfix
assert torch.load is not original and torch.load.__wrapped__ is original
assert torch.serialization.load is torch.load
print(json.dumps(mmfix.status()))
"""
    status = json.loads(run_python(code).stdout.strip().splitlines()[-1])
    assert status["patches"]["torch_load"]["state"] == "active"


def test_import_mmfix_alone_imports_neither_torch_nor_mmengine_nor_wrapt() -> None:
    code = """
import sys, json, mmfix
print(json.dumps({m: m in sys.modules for m in ("torch", "mmengine", "wrapt", "numpy")} | {"status": mmfix.status()}))
"""
    out = json.loads(run_python(code).stdout.strip().splitlines()[-1])
    assert not out["torch"] and not out["mmengine"] and not out["wrapt"] and not out["numpy"]
    states = {name: p["state"] for name, p in out["status"]["patches"].items()}
    # mmcv_bound's finder must be on the import path before a toolbox is looked up: it is the one
    # patch armed at activation (a meta-path entry; it imports nothing)
    assert states.pop("mmcv_bound") == "active"
    assert set(states.values()) == {"pending"}


def test_never_importing_torch_leaves_it_unimported() -> None:
    code = """
import sys, mmfix, json, collections, pickle
print("torch" in sys.modules)
"""
    assert run_python(code).stdout.strip() == "False"


def test_activation_is_idempotent_across_doors() -> None:
    code = """
import mmfix, mmfix._startup as s, importlib
s.from_pth(); s.from_pth(); s.from_start(); mmfix.enable(); mmfix.enable()
importlib.reload  # reloading mmfix is not a supported door
"""
    out = probe(code)
    assert out["depth"] == 1
    assert out["status"]["front_doors"] == ["pth", "start", "enable()"]


@pytest.mark.slow
def test_global_switch_changes_nothing() -> None:
    env = clean_env(MMFIX_DISABLE="1")
    proc = run_python(
        """
import sys, json
import mmfix
import torch, torch.serialization
import mmengine.runner.checkpoint as c
from types import FunctionType
print(json.dumps({
  "wrapped": hasattr(torch.load, "__wrapped__") or hasattr(c._load_checkpoint, "__wrapped__"),
  "plain": type(torch.load) is FunctionType and torch.load is torch.serialization.load
           and torch.load.__module__ == "torch.serialization" and type(c._load_checkpoint) is FunctionType,
  "finder": any(type(f).__module__.startswith("mmfix") for f in sys.meta_path),
  "status": mmfix.status(),
}))
""",
        env=env,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["wrapped"] is False and out["plain"] is True
    assert out["finder"] is False
    assert out["status"]["enabled"] is False
    assert {p["state"] for p in out["status"]["patches"].values()} == {"disabled"}


def test_per_patch_switch() -> None:
    out = probe("import mmfix\n", env=clean_env(MMFIX_DISABLED_PATCHES="torch_load"))
    assert out["wrapped"] is False
    assert out["status"]["patches"]["torch_load"]["state"] == "disabled"
    assert out["status"]["patches"]["mmengine_checkpoint"]["state"] == "pending"


def test_unknown_patch_name_is_reported_not_ignored() -> None:
    proc = run_python("import mmfix", env=clean_env(MMFIX_DISABLED_PATCHES="torch_lod"))
    assert "unknown patch(es) torch_lod" in proc.stderr
    assert "torch_load" in proc.stderr  # says which names exist


def test_bad_boolean_is_reported_and_default_kept() -> None:
    proc = run_python(
        "import mmfix, json; print(json.dumps(mmfix.status()['enabled']))", env=clean_env(MMFIX_DISABLE="maybe")
    )
    assert "MMFIX_DISABLE='maybe' is not a yes/no value" in proc.stderr
    assert proc.stdout.strip() == "true"


@pytest.mark.slow
def test_disable_restores_exact_objects_and_enable_reapplies() -> None:
    code = """
import torch, torch.serialization
import mmengine.runner.checkpoint as ck, mmengine.runner.runner as rr, mmengine.runner as pkg
from mmengine.runner import Runner
from mmengine.runner.checkpoint import CheckpointLoader
before = {
  "torch.load": torch.load, "serialization.load": torch.serialization.load,
  "ck._load_checkpoint": ck._load_checkpoint, "rr._load_checkpoint": rr._load_checkpoint,
  "ck.load_checkpoint": ck.load_checkpoint, "pkg.load_checkpoint": pkg.load_checkpoint,
  "Runner.resume": vars(Runner)["resume"], "Runner.load_checkpoint": vars(Runner)["load_checkpoint"],
  "CheckpointLoader.load_checkpoint": vars(CheckpointLoader)["load_checkpoint"],
}
safe_before = set(map(repr, torch.serialization.get_safe_globals()))
import mmfix
now = lambda: {
  "torch.load": torch.load, "serialization.load": torch.serialization.load,
  "ck._load_checkpoint": ck._load_checkpoint, "rr._load_checkpoint": rr._load_checkpoint,
  "ck.load_checkpoint": ck.load_checkpoint, "pkg.load_checkpoint": pkg.load_checkpoint,
  "Runner.resume": vars(Runner)["resume"], "Runner.load_checkpoint": vars(Runner)["load_checkpoint"],
  "CheckpointLoader.load_checkpoint": vars(CheckpointLoader)["load_checkpoint"],
}
patched = now()
assert all(patched[k] is not before[k] for k in before), [k for k in before if patched[k] is before[k]]
assert set(map(repr, torch.serialization.get_safe_globals())) > safe_before
mmfix.disable()
after = now()
assert all(after[k] is before[k] for k in before), [k for k in before if after[k] is not before[k]]
assert set(map(repr, torch.serialization.get_safe_globals())) == safe_before
assert {p["state"] for p in mmfix.status()["patches"].values()} == {"removed"}
mmfix.enable()
again = now()
assert all(again[k] is not before[k] and again[k].__wrapped__ is before[k] for k in before)
print("ok")
"""
    assert run_python(code).stdout.strip() == "ok"


def test_disable_leaves_a_foreign_wrapper_in_place_and_goes_inert() -> None:
    code = """
import mmfix, torch
ours = torch.load
calls = []
def theirs(*a, **k):
    calls.append(1)
    return ours(*a, **k)
torch.load = theirs
mmfix.disable()
assert torch.load is theirs  # their patch survives
import io
buf = io.BytesIO(); torch.save({"x": torch.ones(1)}, buf); buf.seek(0)
assert torch.load(buf)["x"].item() == 1.0 and calls == [1]
print("ok")
"""
    assert run_python(code).stdout.strip() == "ok"


def test_failing_patch_does_not_break_import_torch() -> None:
    code = """
import mmfix
import mmfix._patches.torch_load as p
from mmfix import _wrapping
real_apply = p.apply
def half_then_boom():
    import torch.serialization
    p._swaps.wrap(torch.serialization, "load", lambda w, i, a, k: w(*a, **k))
    raise RuntimeError("deliberate failure in a patch")
p.apply = half_then_boom
import torch  # must not raise
import json
print(json.dumps({
    "restored": not hasattr(torch.serialization.load, "__wrapped__") and torch.load is torch.serialization.load,
    "status": mmfix.status()["patches"]["torch_load"],
}))
"""
    proc = run_python(code)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["restored"] is True
    assert out["status"]["state"] == "failed"
    assert "deliberate failure" in out["status"]["reason"]
    assert proc.stderr.count("could not be applied") == 1
    assert "MMFIX_DISABLED_PATCHES=torch_load" in proc.stderr


def test_failing_patch_logs_once_even_if_enabled_again() -> None:
    code = """
import mmfix, mmfix._patches.torch_load as p
def boom():
    raise RuntimeError("deliberate")
p.apply = boom
import torch
mmfix.disable(); mmfix.enable(); mmfix.disable(); mmfix.enable()
"""
    proc = run_python(code)
    # enable() forgets shown messages on purpose (a new activation), so at most once per activation
    assert 1 <= proc.stderr.count("could not be applied") <= 3
    assert "Traceback" not in proc.stderr


def test_log_level_and_rank_filtering() -> None:
    code = """
from mmfix import _log
print(_log.info("hello-info"), _log.info("hello-info"), _log.error("an-error"), _log.warning("w"))
"""
    out0 = run_python(code, env=clean_env(MMFIX_LOG_LEVEL="DEBUG"))
    assert out0.stdout.split() == ["True", "False", "True", "True"]
    assert out0.stderr.count("hello-info") == 1
    out1 = run_python(code, env=clean_env(RANK="1"))
    assert out1.stdout.split() == ["False", "False", "True", "False"]  # only errors off rank 0
    out2 = run_python(code, env=clean_env(MMFIX_LOG_LEVEL="ERROR"))
    assert out2.stdout.split() == ["False", "False", "True", "False"]


@pytest.mark.slow
def test_messages_land_in_mmengine_log_when_mmengine_is_loaded(tmp_path) -> None:
    code = f"""
from mmengine.logging import MMLogger
logger = MMLogger.get_instance("train", log_file=r"{tmp_path / 'run.log'}")
from mmfix import _log
_log.warning("visible-in-training-log")
"""
    run_python(code)
    assert "visible-in-training-log" in (tmp_path / "run.log").read_text()


def test_works_without_mmengine_installed(tmp_path) -> None:
    # A meta-path finder that refuses mmengine stands in for an environment without it.
    code = """
import sys, io, json
class NoMMEngine:
    def find_spec(self, name, path=None, target=None):
        if name == "mmengine" or name.startswith("mmengine."):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NoMMEngine())
import mmfix, torch
buf = io.BytesIO(); torch.save({"w": torch.ones(2)}, buf); buf.seek(0)
out = torch.load(buf)
try:
    import mmengine
    has = True
except ImportError:
    has = False
print(json.dumps({"mmengine": has, "loaded": out["w"].sum().item(),
                  "states": {k: v["state"] for k, v in mmfix.status()["patches"].items()}}))
"""
    out = json.loads(run_python(code).stdout.strip().splitlines()[-1])
    assert out["mmengine"] is False and out["loaded"] == 2.0
    assert out["states"]["torch_load"] == "active"
    assert out["states"]["mmengine_checkpoint"] == "pending"


@pytest.mark.parametrize("version_file", [True, False], ids=["version.py", "no-version-file"])
def test_a_torch_older_than_mmfix_supports_gets_nothing_and_one_clear_error(tmp_path, version_file) -> None:
    """pyproject.toml's floor (torch 2.7; scripts/matrix.sh measured 2.4.1 and 2.6.0 failing) is
    said at import on an older torch, and no patch is applied. The old torch is a stand-in
    package here (a real 2.4 is the matrix's to install): only its version is read — before
    torch is imported from its ``torch/version.py`` (as every torch build has), and where that
    file is missing from ``torch.__version__`` once torch is imported."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("__version__ = '2.4.1'\nload = lambda *a, **k: 'stock load'\n")
    if version_file:  # what mmfix reads before torch is imported
        (fake / "version.py").write_text("from typing import Optional\n\n__version__ = '2.4.1'\ndebug = False\n")
    code = """
import json, mmfix, sys
states = {k: v["state"] for k, v in mmfix.status()["patches"].items()}
print(json.dumps(states))
import torch
print(json.dumps({"load": torch.load("x"), "states": {k: v["state"] for k, v in mmfix.status()["patches"].items()}}))
"""
    env = clean_env(PYTHONPATH=str(tmp_path))
    proc = run_python(code, env=env)
    before_torch, out = (json.loads(line) for line in proc.stdout.strip().splitlines()[-2:])
    assert out["load"] == "stock load"  # torch.load left as it is
    assert out["states"]["torch_load"] == "skipped" and out["states"]["cuda_device"] == "skipped"
    assert "active" not in out["states"].values()
    assert proc.stderr.count("mmfix is off: torch 2.4.1 is older than 2.7") == 1, proc.stderr
    # With the version file, the patch armed at interpreter start (mmcv_bound's trigger is sys)
    # is held back before torch is imported; without it, it is taken back when torch is.
    assert before_torch["mmcv_bound"] == ("skipped" if version_file else "active"), before_torch
