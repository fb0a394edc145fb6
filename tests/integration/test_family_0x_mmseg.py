"""MMSegmentation 0.x configs and checkpoints on MMSegmentation 1.2.2 through mmfix: the same predictions.

For a spread of the 0.30.0 zoo's families (ResNet/PSP, DeepLabV3+, SegFormer's MiT, OCRNet's cascade
on HRNet, BiSeNetV2 with its auxiliary heads, Segmenter's ViT with a mask transformer in sliding
windows, UNet in sliding windows, PointRend's point subdivision), the real MMSegmentation 0.30.0
(tests/family0x_support.py) builds the official config's model, gives it seeded weights, saves a 0.x
checkpoint and writes its own class probabilities for two images (0.x's test pipeline and
``inference``). On the current side, the same official 0.x config file is loaded by MMSegmentation
1.2.2's own API with mmfix active (``init_model`` with the 0.x checkpoint, ``inference_model``): the
checkpoint must load strictly (every key, every shape) and the probabilities must equal 0.x's.
Each config's test scale is made small with a 0.x-style option (``data.test.pipeline.1.img_scale``),
given to both sides: mmfix merges it into the 0.x config before converting, as ``--cfg-options`` is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import clean_env, run
from family0x_support import configs_0x, predict_0x, seeded_images

pytestmark = pytest.mark.slow

#: (config under MMSegmentation 0.30.0's configs/, its 0.x test options)
CASES = [
    ("pspnet/pspnet_r18-d8_512x1024_80k_cityscapes.py", {"data.test.pipeline.1.img_scale": [96, 64]}),
    ("deeplabv3plus/deeplabv3plus_r18-d8_512x1024_80k_cityscapes.py", {"data.test.pipeline.1.img_scale": [96, 64]}),
    ("segformer/segformer_mit-b0_512x512_160k_ade20k.py", {"data.test.pipeline.1.img_scale": [96, 64]}),
    ("ocrnet/ocrnet_hr18s_512x1024_40k_cityscapes.py", {"data.test.pipeline.1.img_scale": [96, 64]}),
    ("bisenetv2/bisenetv2_fcn_4x4_1024x1024_160k_cityscapes.py", {"data.test.pipeline.1.img_scale": [96, 64]}),
    (
        "segmenter/segmenter_vit-t_mask_8x1_512x512_160k_ade20k.py",
        {
            "data.test.pipeline.1.img_scale": [96, 64],
            "model.test_cfg.crop_size": [48, 48],
            "model.test_cfg.stride": [32, 32],
        },
    ),
    ("unet/fcn_unet_s5-d16_64x64_40k_drive.py", {"data.test.pipeline.1.img_scale": [96, 64]}),
    ("point_rend/pointrend_r50_512x1024_80k_cityscapes.py", {"data.test.pipeline.1.img_scale": [96, 64]}),
]


# The current side, in a process of its own with mmfix active as a user's script has it (the test
# process stays stock): each case's 0.x config loaded and given its 0.x options, its 0.x checkpoint
# loaded by init_model, then checked against a strict load, and inference_model's probabilities.
_CURRENT = r"""
import json, sys, numpy as np, torch
import mmfix
from mmengine.config import Config
from mmseg.apis import inference_model, init_model

jobs = json.load(open(sys.argv[1]))
for job in jobs:
    report = {}
    try:
        cfg = Config.fromfile(job["config"])
        report["scope"] = cfg.get("default_scope")
        report["preprocessor"] = cfg.model.data_preprocessor.type
        cfg.merge_from_dict({k: tuple(v) if isinstance(v, list) else v for k, v in job["options"].items()})
        cfg.model.pretrained = None
        model = init_model(cfg, job["checkpoint"], device="cpu")
        saved = torch.load(job["checkpoint"], map_location="cpu", weights_only=True)["state_dict"]
        missing, unexpected = model.load_state_dict(saved, strict=False)
        report["missing"], report["unexpected"] = list(missing), list(unexpected)
        report["classes"] = list(model.dataset_meta["classes"])
        out = {}
        for number, image in enumerate(job["images"]):
            result = inference_model(model, image)
            out[f"probs{number}"] = result.seg_logits.data.softmax(0).numpy()
            out[f"pred{number}"] = result.pred_sem_seg.data[0].numpy()
        np.savez(job["current"], **out)
    except Exception as exc:
        import traceback
        report["error"] = traceback.format_exc()[-3000:]
    json.dump(report, open(job["report"], "w"))
"""


@pytest.fixture(scope="module")
def made(mmdet2_python: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Every case's 0.x checkpoint and predictions (one 0.x process), then the current side's (one process)."""
    folder = tmp_path_factory.mktemp("seg0x")
    configs = configs_0x(mmdet2_python, "mmseg")
    images = seeded_images(folder)
    jobs = [
        {
            "toolbox": "mmseg",
            "config": str(configs / name),
            "options": options,
            "seed": 10 + index,
            "images": [str(p) for p in images],
            "checkpoint": str(folder / f"case{index}.pth"),
            "out": str(folder / f"case{index}.npz"),
            "current": str(folder / f"current{index}.npz"),
            "report": str(folder / f"current{index}.json"),
        }
        for index, (name, options) in enumerate(CASES)
    ]
    predict_0x(mmdet2_python, jobs, folder)
    listing = folder / "current.json"
    listing.write_text(json.dumps(jobs))
    proc = run([sys.executable, "-c", _CURRENT, str(listing)], env=clean_env(), timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return jobs


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0].split("/")[0] for c in CASES])
def test_0x_checkpoint_predicts_on_1x_as_on_0x(made: list[dict], index: int) -> None:
    job = made[index]
    report = json.loads(Path(job["report"]).read_text())
    assert "error" not in report, report.get("error")
    # converted as MMSegmentation's (not MMDetection's) config
    assert report["scope"] == "mmseg" and report["preprocessor"] == "SegDataPreProcessor"
    # every key and shape of the 0.x checkpoint fits the converted model; its meta gave the classes
    assert report["missing"] == [] and report["unexpected"] == [], report
    assert report["classes"] == [f"c{i}" for i in range(len(report["classes"]))]
    expected, current = np.load(job["out"]), np.load(job["current"])
    for number in range(len(job["images"])):
        probs, reference = current[f"probs{number}"], expected[f"image{number}"]
        assert probs.shape == reference.shape
        np.testing.assert_allclose(probs, reference, rtol=0, atol=2e-5, err_msg=f"{job['config']}, image {number}")
        assert (current[f"pred{number}"] == reference.argmax(0)).mean() > 0.999


#: 0.x DiceLoss argument sets (the zoo's UNet configs use the defaults with loss_weight 3).
DICE_ARGUMENTS = [
    {"loss_weight": 3.0, "loss_name": "loss_dice"},
    {"smooth": 0.5, "exponent": 1, "class_weight": [1.0, 2.0, 0.5, 1.5]},
    {"ignore_index": 2},
]

_CURRENT_DICE = r"""
import json, sys, numpy as np, torch
sys.path.insert(0, sys.argv[2])
from family0x_worker import _loss_inputs
import mmfix
from mmengine.config import Config
from mmseg.registry import MODELS
from mmengine.registry import init_default_scope

job = json.load(open(sys.argv[1]))
init_default_scope('mmseg')
cfg = Config.fromfile(job["config"])  # a 0.x config whose decode head uses DiceLoss
losses = cfg.model.decode_head.loss_decode
names = [l["type"] for l in (losses if isinstance(losses, list) else [losses])]
out = {"names": np.array(names)}
for index, arguments in enumerate(job["losses"]):
    logits, labels = _loss_inputs(job["seed"] + index)
    logits.requires_grad_(True)
    loss = MODELS.build(dict(type=names[-1], **arguments))(logits, labels, weight=None, ignore_index=255)
    loss.backward()
    out[f"value{index}"] = loss.detach().numpy()
    out[f"grad{index}"] = logits.grad.numpy()
np.savez(job["current"], **out)
"""


def test_0x_dice_loss_keeps_its_0x_values_and_gradients(mmdet2_python: Path, tmp_path: Path) -> None:
    """1.x's DiceLoss computes another loss: a converted 0.x config names mmfix's copy of 0.x's, which
    equals 0.30's own class (values and gradients) on seeded logits with ignored pixels."""
    configs = configs_0x(mmdet2_python, "mmseg")
    job = {
        "toolbox": "mmseg-dice",
        "config": str(configs / "unet/fcn_unet_s5-d16_ce-1.0-dice-3.0_64x64_40k_drive.py"),
        "losses": DICE_ARGUMENTS,
        "seed": 3,
        "out": str(tmp_path / "dice0x.npz"),
        "current": str(tmp_path / "dice.npz"),
    }
    predict_0x(mmdet2_python, [job], tmp_path)
    (tmp_path / "job.json").write_text(json.dumps(job))
    tests = str(Path(__file__).resolve().parents[1])
    proc = run([sys.executable, "-c", _CURRENT_DICE, str(tmp_path / "job.json"), tests], env=clean_env(), timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    expected, current = np.load(job["out"]), np.load(job["current"])
    assert list(current["names"]) == ["CrossEntropyLoss", "DiceLoss0x"]
    for index in range(len(DICE_ARGUMENTS)):
        np.testing.assert_allclose(current[f"value{index}"], expected[f"value{index}"], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(current[f"grad{index}"], expected[f"grad{index}"], rtol=1e-5, atol=1e-8)


_MISMATCH = r"""
import sys
import mmfix
from mmengine.config import Config
from mmseg.apis import init_model
from mmfix import CheckpointMismatchError

cfg = Config.fromfile(sys.argv[1])
cfg.model.pretrained = None
try:
    init_model(cfg, sys.argv[2], device="cpu")
except CheckpointMismatchError as exc:
    print("REFUSED", exc)
else:
    print("LOADED")
"""


def test_0x_checkpoint_whose_keys_do_not_fit_stops_with_the_mismatch(made: list[dict], tmp_path: Path) -> None:
    """A 0.x run never continues on random layers: a 0.x checkpoint without the classifier's weight,
    loaded into the model of a converted 0.x config, is one clear error (MMEngine would warn)."""
    import torch

    job = made[0]
    checkpoint = torch.load(job["checkpoint"], map_location="cpu", weights_only=True)
    del checkpoint["state_dict"]["decode_head.conv_seg.weight"]
    bad = tmp_path / "partial.pth"
    torch.save(checkpoint, bad)
    proc = run([sys.executable, "-c", _MISMATCH, job["config"], str(bad)], env=clean_env(), timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "REFUSED" in proc.stdout and "decode_head.conv_seg.weight" in proc.stdout, proc.stdout[-3000:]
    assert "built from an MMSegmentation 0.x config" in proc.stdout
    # the whole checkpoint loads (the control)
    proc = run([sys.executable, "-c", _MISMATCH, job["config"], job["checkpoint"]], env=clean_env(), timeout=300)
    assert "LOADED" in proc.stdout, (proc.stdout + proc.stderr)[-3000:]
