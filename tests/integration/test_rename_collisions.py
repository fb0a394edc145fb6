"""A 3.x key and its stale 2.x twin in one state dict (issue 28, finding 4): never a silent choice.

Through a real MMEngine load (``load_checkpoint`` into a small module carrying YOLACT's 3.x
names) in the default mode and the strict mode of 2.x runs, and through ``mmfix
convert-checkpoint``. Each in its own process under a memory and a time limit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import clean_env, run

pytestmark = pytest.mark.slow  # real processes importing torch and MMEngine

LIMITS = "import resource, signal; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); signal.alarm(120)\n"

LOADS = (
    LIMITS
    + """
import json, sys, torch, mmfix
from torch import nn
from mmengine.runner.checkpoint import load_checkpoint

def model():
    m = nn.Module()
    m.backbone = nn.Conv2d(2, 2, 1)
    m.mask_head = nn.Module()
    m.mask_head.segm_branch = nn.Module()
    m.mask_head.segm_branch.segm_conv = nn.Conv2d(2, 2, 1)
    return m

three, two = torch.full((2, 2, 1, 1), 3.0), torch.full((2, 2, 1, 1), 2.0)
rows = [
    ("backbone.weight", torch.ones(2, 2, 1, 1)), ("backbone.bias", torch.ones(2)),
    ("mask_head.segm_branch.segm_conv.weight", three),  # the 3.x key
    ("segm_head.segm_conv.weight", two),  # its stale 2.x twin
    ("segm_head.segm_conv.bias", torch.full((2,), 5.0)),  # a 2.x key whose 3.x name is free
]
results = {}
for order in (1, -1):
    for meta in ("3.3.0", "2.28.2"):
        path = f"{sys.argv[1]}/ckpt_{order}_{meta}.pth"
        torch.save({"state_dict": dict(rows[::order]), "meta": {"mmdet_version": meta}}, path)
        m = model()
        try:
            load_checkpoint(m, path, map_location="cpu")
        except mmfix.CheckpointMismatchError as exc:
            results[f"{order} {meta}"] = {"error": str(exc)}
            continue
        segm = m.mask_head.segm_branch.segm_conv
        results[f"{order} {meta}"] = {
            "weight": segm.weight.flatten()[0].item(), "bias": segm.bias.flatten()[0].item()
        }
print("RESULTS", json.dumps(results))
"""
)


def test_mmengine_loads_keep_the_3x_tensor_and_report_the_2x_twin(tmp_path: Path) -> None:
    proc = run([sys.executable, "-c", LOADS, str(tmp_path)], env=clean_env(), timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    results = json.loads(out.split("RESULTS ", 1)[1].splitlines()[0])
    for order in (1, -1):
        # default mode (a 3.x run): stock MMEngine's choice -- the 3.x tensor loads, the free
        # 2.x name is still renamed, and the stale key is reported, not swallowed
        assert results[f"{order} 3.3.0"] == {"weight": 3.0, "bias": 5.0}, results
        # the strict mode of 2.x runs: the stale key is an unexpected key, so one clear error
        error = results[f"{order} 2.28.2"]["error"]
        assert "1 key(s) of the checkpoint are not in the model (segm_head.segm_conv.weight)" in error, error
    assert "unexpected key in source state_dict: segm_head.segm_conv.weight" in out  # MMEngine's warning
    assert "mask_head.segm_branch.segm_conv.weight and segm_head.segm_conv.weight, its 2.x name" in out
    assert "Loaded the tensor under the 3.x name" in out
    assert "Traceback" not in out


CONVERT = (
    LIMITS + "import sys, runpy; sys.argv = ['mmfix', *sys.argv[1:]]; runpy.run_module('mmfix', run_name='__main__')\n"
)


def _convert(*args: Path) -> tuple[int, str]:
    proc = run([sys.executable, "-c", CONVERT, "convert-checkpoint", *map(str, args)], env=clean_env(), timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_convert_checkpoint_refuses_two_tensors_for_one_name_and_writes_nothing(tmp_path: Path) -> None:
    write = """
import sys, torch
rows = {"mask_head.segm_branch.segm_conv.weight": torch.full((2,), 3.0), "segm_head.segm_conv.weight": torch.full((2,), 2.0),
        "segm_head.segm_conv.bias": torch.zeros(2), "backbone.weight": torch.ones(2)}
torch.save({"state_dict": rows, "meta": {}}, sys.argv[1])
del rows["mask_head.segm_branch.segm_conv.weight"]
torch.save({"state_dict": rows, "meta": {}}, sys.argv[2])
"""
    stale, fine = tmp_path / "stale.pth", tmp_path / "fine.pth"
    run([sys.executable, "-c", write, str(stale), str(fine)], env=clean_env(), check=True)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, out = _convert(stale, out_dir / "new.pth")
    assert code == 1, out[-3000:]
    assert "Traceback" not in out
    assert "mask_head.segm_branch.segm_conv.weight and segm_head.segm_conv.weight, its 2.x name" in out
    assert "Nothing was written." in out
    assert list(out_dir.iterdir()) == []  # no file, and no temporary left behind

    # without the twin: every tensor read is written (3 in, 3 out), under the 3.x names
    code, out = _convert(fine, out_dir / "new.pth")
    assert code == 0, out[-3000:]
    check = """
import sys, torch
sd = torch.load(sys.argv[1], weights_only=True)["state_dict"]
print("KEYS", sorted(sd))
"""
    proc = run([sys.executable, "-c", check, str(out_dir / "new.pth")], env=clean_env(), check=True)
    assert (
        "KEYS ['backbone.weight', 'mask_head.segm_branch.segm_conv.bias', 'mask_head.segm_branch.segm_conv.weight']"
        in proc.stdout
    )
