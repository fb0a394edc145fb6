"""With MMFIX_DISABLE=1, importing mmfix changes nothing at all, object by object; and
mmfix.disable() puts back every object every patch replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mmfix as mmfix_package
from conftest import clean_env, run_python

pytestmark = pytest.mark.slow  # object-by-object comparison in fresh interpreters

FINGERPRINT = """
import argparse, json, sys, types
import torch, torch.serialization, torch.cuda
import mmengine.runner, mmengine.dist, mmengine.model
import mmengine.runner.checkpoint as ck, mmengine.runner.runner as rr, mmengine.dist.utils as du
import mmengine.hooks.checkpoint_hook as ch
from mmengine.fileio.backends import local_backend
from mmengine.model.wrappers.distributed import MMDistributedDataParallel
from mmengine.runner import Runner
from mmengine.runner.checkpoint import CheckpointLoader
TARGETS = {
  "torch.load": torch.load, "torch.serialization.load": torch.serialization.load,
  "torch.cuda._lazy_init": torch.cuda._lazy_init, "torch.cuda.set_device": torch.cuda.set_device,
  "ck._load_checkpoint": ck._load_checkpoint, "rr._load_checkpoint": rr._load_checkpoint,
  "ck.load_checkpoint": ck.load_checkpoint, "ck.save_checkpoint": ck.save_checkpoint,
  "rr.save_checkpoint": rr.save_checkpoint, "ck.find_latest_checkpoint": ck.find_latest_checkpoint,
  "rr.find_latest_checkpoint": rr.find_latest_checkpoint, "du.init_dist": du.init_dist,
  "mmengine.dist.init_dist": mmengine.dist.init_dist, "rr.init_dist": rr.init_dist,
  "LocalBackend.put": vars(local_backend.LocalBackend)["put"],
  "Runner.resume": vars(Runner)["resume"], "Runner.load_checkpoint": vars(Runner)["load_checkpoint"],
  "Runner.wrap_model": vars(Runner)["wrap_model"], "Runner.train": vars(Runner)["train"],
  "CheckpointLoader.load_checkpoint": vars(CheckpointLoader)["load_checkpoint"],
  "DDP.__init__": vars(MMDistributedDataParallel)["__init__"],
  "DDP.train_step": vars(MMDistributedDataParallel)["train_step"],
  "ArgumentParser.parse_known_args": vars(argparse.ArgumentParser)["parse_known_args"],
  "sys.excepthook": sys.excepthook,
}
def describe(obj):
    inner = getattr(obj, "__func__", obj)
    return [type(obj).__name__, getattr(inner, "__module__", None), getattr(inner, "__qualname__", None),
            hasattr(obj, "__wrapped__"), getattr(getattr(inner, "__code__", None), "co_filename", None)]
print("FP " + json.dumps({
  "targets": {k: describe(v) for k, v in TARGETS.items()},
  "checkpoint_hook_open": "open" in vars(ch),
  "safe_globals": sorted(g[1] if isinstance(g, tuple) else f"{g.__module__}.{g.__qualname__}"
                         for g in torch.serialization.get_safe_globals()),
  "meta_path": [type(f).__module__ + "." + type(f).__qualname__ for f in sys.meta_path],
}, sort_keys=True))
"""


def fingerprint(prefix: str, **env: str) -> dict:
    proc = run_python(prefix + FINGERPRINT, env=clean_env(TORCHELASTIC_ERROR_FILE="/tmp/x.json", **env))
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("FP "))[3:])


def test_global_switch_changes_nothing_object_by_object() -> None:
    stock = fingerprint("")  # a process that never imports mmfix
    switched_off = fingerprint("import mmfix\n", MMFIX_DISABLE="1", LOCAL_RANK="0", WORLD_SIZE="2")
    assert switched_off == stock
    # no wrapper, no code of ours, no finder, no allowlist entry
    package = str(Path(mmfix_package.__file__).parent)
    for kind, _module, _name, _wrapped, filename in switched_off["targets"].values():
        assert not kind.startswith("Mmfix") and not (filename or "").startswith(package)
    assert not any(f.startswith("mmfix.") for f in switched_off["meta_path"])
    assert "builtins.getattr" not in switched_off["safe_globals"]


def test_active_then_disabled_is_stock_again() -> None:
    stock = fingerprint("")
    # MMFIX_LEGACY_ANY_PARSER: legacy_cli applies even though `python -c` is no OpenMMLab tool
    every_patch = dict(LOCAL_RANK="0", WORLD_SIZE="2", MMFIX_MEMORY_REPORT="1", MMFIX_LEGACY_ANY_PARSER="1")
    active = fingerprint("import mmfix\n", **every_patch)
    changed = {k for k in stock["targets"] if active["targets"][k] != stock["targets"][k]}
    # every patch really replaced its objects while active (set_device is only swapped during init_dist)
    assert changed == set(stock["targets"]) - {"torch.cuda.set_device"}
    assert active["checkpoint_hook_open"] is True and active["safe_globals"] != stock["safe_globals"]
    disabled = fingerprint(
        "import mmfix\nimport torch, mmengine.runner, mmengine.dist, mmengine.model\nmmfix.disable()\n", **every_patch
    )
    assert disabled["targets"] == stock["targets"]
    assert disabled["checkpoint_hook_open"] is False and disabled["safe_globals"] == stock["safe_globals"]
