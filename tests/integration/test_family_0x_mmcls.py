"""MMClassification 0.x configs and checkpoints on MMPretrain 1.2.0 through mmfix: the same scores.

For a spread of the 0.25.0 zoo's families (ResNet with the short-edge resize, EfficientNet's own crop
style, DeiT and its distilled variant, Tokens-to-Token ViT, Swin, Swin-V2 (whose 0.x state dicts lack
the relative-position tables 1.x saves), ConvNeXt, Conformer's two branches, MobileNetV3, VAN, the
CIFAR ResNet without any resize (its checkpoint with MMCV's EMAHook buffers), and CSRA's
multi-label VOC head at 448 px),
the real MMClassification 0.25.0 (tests/family0x_support.py) builds the official config's model,
gives it seeded weights, saves a 0.x checkpoint and writes its own class scores for two images (0.x's
test pipeline and forward). On the current side, the same official 0.x config file is loaded by
MMPretrain 1.2.0's own API with mmfix active (``init_model`` with the 0.x checkpoint,
``ImageClassificationInferencer``): converted as MMClassification's (``default_scope='mmpretrain'``,
``ClsDataPreprocessor``), the checkpoint must load strictly and the scores must equal 0.x's.
MMPretrain's models import torchvision, which the test environment lacks: the 0.x environment's
patched torchvision 0.28.0 is put on the current side's PYTHONPATH (tests/family0x_support.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from family0x_support import configs_0x, predict_0x, predict_current, seeded_images

pytestmark = pytest.mark.slow

#: configs under MMClassification 0.25.0's configs/
CASES = [
    "resnet/resnet18_8xb32_in1k.py",
    "efficientnet/efficientnet-b0_8xb32_in1k.py",
    "deit/deit-tiny_pt-4xb256_in1k.py",
    "deit/deit-tiny-distilled_pt-4xb256_in1k.py",
    "t2t_vit/t2t-vit-t-14_8xb64_in1k.py",
    "swin_transformer/swin-tiny_16xb64_in1k.py",
    # 0.x kept its relative-position tables out of the state dict; 1.x saves them (computed alike)
    "swin_transformer_v2/swinv2-tiny-w8_16xb64_in1k-256px.py",
    "convnext/convnext-tiny_32xb128_in1k.py",
    "conformer/conformer-tiny-p16_8xb128_in1k.py",
    "mobilenet_v3/mobilenet-v3-small_8xb32_in1k.py",
    "van/van-b0_8xb128_in1k.py",
    "resnet/resnet18_8xb16_cifar10.py",
    "csra/resnet101-csra_1xb16_voc07-448px.py",
]
#: cases whose 0.x checkpoint also holds MMCV's EMAHook buffers (ema_*, one per parameter, which
#: the real EMAHook registers; given values of their own): they must be left out, not refused
EMA = {"resnet/resnet18_8xb16_cifar10.py"}

# The current side, in a process of its own with mmfix active as a user's script has it (the test
# process stays stock): each 0.x config loaded by MMPretrain's init_model with its 0.x checkpoint,
# then a strict load checked, and the image-classification inferencer's scores.
_CURRENT = r"""
import json, sys, numpy as np, torch
import mmfix
from mmengine.config import Config
from mmpretrain.apis import ImageClassificationInferencer, init_model

for job in json.load(open(sys.argv[1])):
    report = {}
    try:
        cfg = Config.fromfile(job["config"])
        report["scope"] = cfg.get("default_scope")
        report["preprocessor"] = cfg.model.data_preprocessor.type
        model = init_model(cfg, job["checkpoint"], device="cpu")
        saved = torch.load(job["checkpoint"], map_location="cpu", weights_only=True)["state_dict"]
        missing, unexpected = model.load_state_dict(saved, strict=False)
        report["missing"], report["unexpected"] = list(missing), list(unexpected)
        report["parameters"] = len(list(model.parameters()))
        report["classes"] = list(model._dataset_meta["classes"])  # what init_model read from the 0.x meta
        # (inference_model itself serves only the model zoo's named models: a config's model goes
        # through the inferencer, as for a 1.x config)
        inferencer = ImageClassificationInferencer(model, device="cpu")
        out = {}
        for number, image in enumerate(job["images"]):
            out[f"scores{number}"] = inferencer(image)[0]["pred_scores"]
        np.savez(job["current"], **out)
    except Exception:
        import traceback
        report["error"] = traceback.format_exc()[-3000:]
    json.dump(report, open(job["report"], "w"))
"""


@pytest.fixture(scope="module")
def made(mmdet2_python: Path, torchvision_path: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Every case's 0.x checkpoint and scores (one 0.x process), then the current side's (one process)."""
    folder = tmp_path_factory.mktemp("cls0x")
    configs = configs_0x(mmdet2_python, "mmcls")
    images = seeded_images(folder)
    jobs = [
        {
            "toolbox": "mmcls",
            "config": str(configs / name),
            "seed": 20 + index,
            "images": [str(p) for p in images],
            "checkpoint": str(folder / f"case{index}.pth"),
            "out": str(folder / f"case{index}.npz"),
            "current": str(folder / f"current{index}.npz"),
            "report": str(folder / f"current{index}.json"),
            "ema": name in EMA,
        }
        for index, name in enumerate(CASES)
    ]
    predict_0x(mmdet2_python, jobs, folder)
    predict_current(_CURRENT, jobs, folder, torchvision_path)
    return jobs


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.split("/")[1].split("_")[0] for c in CASES])
def test_0x_checkpoint_scores_on_mmpretrain_as_on_0x(made: list[dict], index: int) -> None:
    job = made[index]
    report = json.loads(Path(job["report"]).read_text())
    assert "error" not in report, report.get("error")
    # converted as MMClassification's (not MMDetection's) config
    assert report["scope"] == "mmpretrain" and report["preprocessor"] == "ClsDataPreprocessor"
    # every key and shape of the 0.x checkpoint fits the converted model (init_model's load, made
    # strict by mmfix, went through); only buffers the model computes itself may be absent (Swin-V2's
    # relative-position tables, which 0.x did not save: the equal scores below show them right)
    derived = [
        k for k in report["missing"] if k.rsplit(".", 1)[-1] in ("relative_coords_table", "relative_position_index")
    ]
    assert report["missing"] == derived, report
    if job["ema"]:  # the backups, one per parameter, were there and were left out (init_model went through)
        assert report["unexpected"] and all(k.startswith("ema_") and "." not in k for k in report["unexpected"])
        assert len(report["unexpected"]) == report["parameters"], report["parameters"]
    else:
        assert report["unexpected"] == [], report
    assert bool(derived) == ("swinv2" in job["config"]), derived[:4]
    assert report["classes"] == [f"c{i}" for i in range(len(report["classes"]))]
    expected, current = np.load(job["out"]), np.load(job["current"])
    for number in range(len(job["images"])):
        scores, reference = current[f"scores{number}"], expected[f"image{number}"]
        if "csra" in job["config"]:  # 0.x's CSRA head returned logits; 1.x's multi-label heads their sigmoid
            reference = 1.0 / (1.0 + np.exp(-reference.astype(np.float64)))
        assert scores.shape == reference.shape
        # far from uniform (the seeded head spreads them), so that any difference would show
        assert reference.max() > 5.0 / reference.size or reference.std() > 0.05, reference.max()
        np.testing.assert_allclose(scores, reference, rtol=1e-4, atol=1e-6, err_msg=f"{job['config']}, image {number}")
