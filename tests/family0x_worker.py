"""Runs inside the real 0.x environment (MMSegmentation 0.30.0, MMClassification 0.25.0 on
mmcv-full 1.7.2; see tests/family0x_support.py): builds a 0.x config's model with 0.x's own code,
gives it seeded weights (batch-norm statistics included, so that eval-mode normalisation matters),
saves them as a 0.x checkpoint (mmcv's save_checkpoint, with 0.x's meta), and writes 0.x's own
prediction for each image.

    python family0x_worker.py JOBS.json

JOBS: a list of {"toolbox": "mmseg" | "mmcls", "config": PATH, "options": {dotted key: value}, "seed": N,
      "images": [PATH, ...], "checkpoint": PATH, "out": PATH.npz}; one process for all (0.x's
imports cost seconds). ``out`` holds one array per image: MMSegmentation's class probabilities at
the image's size (``model.inference(..., rescale=True)``: 0.x's test path before the argmax);
MMClassification's class scores (what ``mmcls.apis.inference_model`` computes before its top-1).
"""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import torch
from pretrained_free import strip_pretrained

warnings.filterwarnings("ignore")


def _tuples(value):
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
        return tuple(value)
    return value


def _seed_weights(model: torch.nn.Module, seed: int) -> None:
    """0.x's own initialisation under a seed, then random normalisation parameters and statistics
    (initialised to 1/0 they would hide a difference in how eval-mode normalisation is applied)."""
    torch.manual_seed(seed)
    model.init_weights()
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.modules.batchnorm._NormBase, torch.nn.GroupNorm, torch.nn.LayerNorm)):
                for name, tensor in list(module.named_parameters(recurse=False)) + list(
                    module.named_buffers(recurse=False)
                ):
                    if not tensor.is_floating_point():
                        continue
                    noise = torch.randn(tensor.shape, generator=generator) * 0.1
                    base = 1.0 if name in ("weight", "running_var") else 0.0
                    tensor.copy_(base + (noise.abs() if name == "running_var" else noise))


def _segmentation(job: dict) -> None:
    import logging

    logging.getLogger("mmcv").setLevel(logging.WARNING)  # init_weights' per-parameter lines
    from mmcv import Config
    from mmcv.parallel import collate
    from mmcv.runner import save_checkpoint
    from mmseg.datasets.pipelines import Compose
    from mmseg.models import build_segmentor

    cfg = Config.fromfile(job["config"])
    if job.get("options"):  # JSON has no tuples: a list of numbers is a tuple (a scale) in 0.x configs
        cfg.merge_from_dict({k: _tuples(v) for k, v in job["options"].items()})
    strip_pretrained(cfg.model)
    model = build_segmentor(cfg.model)
    _seed_weights(model, job["seed"])
    model.CLASSES = tuple(f"c{i}" for i in range(model.num_classes))
    model.PALETTE = [[i, i, i] for i in range(len(model.CLASSES))]
    model.eval()
    save_checkpoint(model, job["checkpoint"], meta={"CLASSES": model.CLASSES, "PALETTE": model.PALETTE})
    steps = [dict(type="LoadImageFromFile")] + list(cfg.data.test.pipeline[1:])
    pipeline = Compose(steps)
    out = {}
    for index, path in enumerate(job["images"]):
        data = pipeline({"img_info": {"filename": path}, "img_prefix": None})
        data = collate([data], samples_per_gpu=1)
        img = data["img"][0]
        metas = data["img_metas"][0].data[0]
        with torch.no_grad():
            probs = model.inference(img, metas, rescale=True)
        out[f"image{index}"] = probs[0].numpy()
    np.savez(job["out"], **out)


def _classification(job: dict) -> None:
    """As mmcls.apis.inference_model does (the test pipeline from LoadImageFromFile, one image a
    batch), keeping every class's score rather than only the top one."""
    import logging

    logging.getLogger("mmcv").setLevel(logging.WARNING)
    from mmcls.datasets.pipelines import Compose
    from mmcls.models import build_classifier
    from mmcv import Config
    from mmcv.parallel import collate
    from mmcv.runner import save_checkpoint

    cfg = Config.fromfile(job["config"])
    if job.get("options"):
        cfg.merge_from_dict({k: _tuples(v) for k, v in job["options"].items()})
    strip_pretrained(cfg.model)
    model = build_classifier(cfg.model)
    _seed_weights(model, job["seed"])
    # The head's weights spread wider than its initialisation (std 0.01): scores far from uniform,
    # so that a difference in any step shows in them.
    generator = torch.Generator().manual_seed(job["seed"] + 2)
    with torch.no_grad():
        for name, tensor in model.head.named_parameters():
            tensor.copy_(torch.randn(tensor.shape, generator=generator) * (0.5 if name.endswith("bias") else 0.05))
    num_classes = cfg.model.head.num_classes
    model.CLASSES = tuple(f"c{i}" for i in range(num_classes))
    if job.get("ema"):
        # MMCV's own EMAHook registers its ema_* buffers (copies of the parameters), as at the start of a
        # run; given values of their own, as after training, so that loading them as weights would show.
        from types import SimpleNamespace

        from mmcv.runner.hooks import EMAHook

        EMAHook().before_run(SimpleNamespace(model=model))
        with torch.no_grad():
            for name, buffer in model.named_buffers():
                if name.startswith("ema_"):
                    buffer.copy_(torch.randn(buffer.shape, generator=generator))
    model.eval()
    save_checkpoint(model, job["checkpoint"], meta={"CLASSES": model.CLASSES})
    steps = list(cfg.data.test.pipeline)
    if steps[0]["type"] != "LoadImageFromFile":  # as inference_model adds it (some configs read preloaded images)
        steps.insert(0, dict(type="LoadImageFromFile"))
    pipeline = Compose(steps)
    out = {}
    for index, path in enumerate(job["images"]):
        data = collate([pipeline({"img_info": {"filename": path}, "img_prefix": None})], samples_per_gpu=1)
        with torch.no_grad():
            scores = model(return_loss=False, **data)
        out[f"image{index}"] = np.asarray(scores[0])
    np.savez(job["out"], **out)


def _loss_inputs(seed: int):
    """Logits and labels (with ignored pixels) both sides make from the same seed."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 4, 9, 11, generator=generator) * 2
    labels = torch.randint(0, 4, (2, 9, 11), generator=generator)
    labels[torch.rand(2, 9, 11, generator=generator) < 0.2] = 255
    return logits, labels


def _dice_loss(job: dict) -> None:
    """0.x's DiceLoss (its own class) on seeded inputs: each argument set's value and gradient."""
    from mmseg.models.builder import build_loss

    out = {}
    for index, arguments in enumerate(job["losses"]):
        logits, labels = _loss_inputs(job["seed"] + index)
        logits.requires_grad_(True)
        loss = build_loss(dict(type="DiceLoss", **arguments))(logits, labels, weight=None, ignore_index=255)
        loss.backward()
        out[f"value{index}"] = loss.detach().numpy()
        out[f"grad{index}"] = logits.grad.numpy()
    np.savez(job["out"], **out)


def main() -> int:
    with open(sys.argv[1]) as fh:
        jobs = json.load(fh)
    for job in jobs:
        {"mmseg": _segmentation, "mmseg-dice": _dice_loss, "mmcls": _classification}[job["toolbox"]](job)
    return 0


if __name__ == "__main__":
    sys.exit(main())
