"""A legacy EMA hook's ema_* buffers in a 2.x / 0.x checkpoint: left out, as the legacy tools did.

MMCV 1.x's EMAHook (MMClassification and MMSegmentation 0.x) registered one buffer per parameter,
MMDetection 2.x's EMA hooks one per state-dict entry; checkpoints kept them. A strict load of a
legacy run (mmfix's) must neither refuse such a checkpoint nor load the buffers as weights, and
must still refuse anything else unexpected, or an incomplete set. Through MMEngine's real
``load_checkpoint``, in a process with mmfix active. (The real MMCV EMAHook's buffers, in a real
0.x checkpoint: tests/integration/test_family_0x_mmcls.py.)
"""

from __future__ import annotations

import json
import sys

import pytest

from conftest import clean_env, run

pytestmark = pytest.mark.slow  # a real process importing torch and MMEngine

LOADS = """
import json, sys, torch, mmfix
from torch import nn
from mmengine.runner.checkpoint import load_checkpoint

def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3))

weights = {k: torch.randn_like(v.float()).to(v.dtype) for k, v in model().state_dict().items()}
per_parameter = {"ema_" + k.replace(".", "_"): torch.full_like(v, 7.0) for k, v in model().named_parameters()}
per_entry = {"ema_" + k.replace(".", "_"): torch.full_like(v, 7) for k, v in model().state_dict().items()}
some = dict(list(per_parameter.items())[:-1])
cases = {
    "mmcv": {**weights, **per_parameter},
    "mmdet": {**weights, **per_entry},
    "incomplete": {**weights, **some},
    "ema and another": {**weights, **per_parameter, "head.fc.weight": torch.ones(1)},
}
results = {}
for meta in ("2.28.2", "3.3.0"):
    for name, state in cases.items():
        path = f"{sys.argv[1]}/{name}-{meta}.pth"
        torch.save({"state_dict": state, "meta": {"mmdet_version": meta}}, path)
        m = model()
        try:
            load_checkpoint(m, path, map_location="cpu")
        except mmfix.CheckpointMismatchError as exc:
            results[f"{name} {meta}"] = {"error": str(exc)}
            continue
        loaded = m.state_dict()
        results[f"{name} {meta}"] = {
            "same": all(torch.equal(loaded[k], weights[k]) for k in weights), "keys": sorted(loaded),
        }
print("RESULTS", json.dumps(results))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    folder = tmp_path_factory.mktemp("ema")
    proc = run([sys.executable, "-c", LOADS, str(folder)], env=clean_env(MMFIX_LOG_LEVEL="INFO"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULTS "))
    return json.loads(line[len("RESULTS ") :]), proc.stdout + proc.stderr


@pytest.mark.parametrize("hook", ["mmcv", "mmdet"])
def test_a_legacy_run_loads_the_weights_and_leaves_the_ema_buffers_out(results: tuple[dict, str], hook: str) -> None:
    found, log = results
    row = found[f"{hook} 2.28.2"]
    assert "error" not in row, row
    assert row["same"] is True  # the weights, not the buffers (7s), are what loaded
    assert not any(k.startswith("ema_") for k in row["keys"])
    assert "ema_* buffers beside the weights" in log and "left out" in log


def test_an_incomplete_set_or_anything_else_unexpected_is_still_refused(results: tuple[dict, str]) -> None:
    found, _ = results
    error = found["incomplete 2.28.2"]["error"]
    assert "ema_1_bias" not in error and "ema_0_weight" in error  # all of them named: no backup set
    error = found["ema and another 2.28.2"]["error"]
    assert "head.fc.weight" in error and "ema_0_weight" not in error


def test_outside_a_legacy_run_mmengine_loads_as_stock(results: tuple[dict, str]) -> None:
    found, _ = results
    for hook in ("mmcv", "mmdet", "incomplete", "ema and another"):
        row = found[f"{hook} 3.3.0"]
        assert row["same"] is True and "error" not in row, (hook, row)
