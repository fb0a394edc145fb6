"""Runs inside the real 0.x environment (MMSegmentation 0.30.0, MMClassification 0.25.0 on
mmcv-full 1.7.2; see tests/family0x_support.py): builds a 0.x config's model with 0.x's own code,
gives it seeded weights (batch-norm statistics included, so that eval-mode normalisation matters),
saves them as a 0.x checkpoint (mmcv's save_checkpoint, with 0.x's meta), and writes 0.x's own
prediction for each image.

    python family0x_worker.py JOBS.json

JOBS: a list of {"toolbox": "mmseg" | "mmcls" | "mmpose", "config": PATH, "options": {dotted key: value}, "seed": N,
      "images": [PATH, ...], "checkpoint": PATH, "out": PATH.npz}; one process for all (0.x's
imports cost seconds). ``out`` holds one array per image: MMSegmentation's class probabilities at
the image's size (``model.inference(..., rescale=True)``: 0.x's test path before the argmax);
MMClassification's class scores (what ``mmcls.apis.inference_model`` computes before its top-1);
MMPose's keypoints and scores for one person box (``inference_top_down_pose_model``).
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


def _built_0x(job: dict, build):
    """The job's 0.x config (its ``options`` merged) and its model, built by the 0.x toolbox's
    ``build`` without pretrained weights, seeded (``_seed_weights``)."""
    from mmcv import Config

    cfg = Config.fromfile(job["config"])
    if job.get("options"):  # JSON has no tuples: a list of numbers is a tuple (a scale) in 0.x configs
        cfg.merge_from_dict({k: _tuples(v) for k, v in job["options"].items()})
    strip_pretrained(cfg.model)
    model = build(cfg.model)
    _seed_weights(model, job["seed"])
    return cfg, model


def _segmentation(job: dict) -> None:
    import logging

    logging.getLogger("mmcv").setLevel(logging.WARNING)  # init_weights' per-parameter lines
    from mmcv.parallel import collate
    from mmcv.runner import save_checkpoint
    from mmseg.datasets.pipelines import Compose
    from mmseg.models import build_segmentor

    cfg, model = _built_0x(job, build_segmentor)
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
    from mmcv.parallel import collate
    from mmcv.runner import save_checkpoint

    cfg, model = _built_0x(job, build_classifier)
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


def _pose(job: dict) -> None:
    """As a 0.x user predicts with a top-down model: ``inference_top_down_pose_model`` on each image
    with one person box (``job["boxes"]``, x y w h), the config's test pipeline and test_cfg (flip
    test, heatmap shift, the post-processing), the dataset's flip pairs from its dataset_info. Writes
    each image's keypoints (K x 3: x, y, score)."""
    import logging

    logging.getLogger("mmcv").setLevel(logging.WARNING)
    from mmcv.runner import save_checkpoint
    from mmpose.apis import inference_top_down_pose_model
    from mmpose.datasets import DatasetInfo
    from mmpose.models import build_posenet

    cfg, model = _built_0x(job, build_posenet)
    # The final layer spread wider than its initialisation (std 0.001): heatmaps with clear maxima
    # at different places per keypoint, so that a difference in the affine, the flip or the
    # decoding moves them.
    generator = torch.Generator().manual_seed(job["seed"] + 2)
    with torch.no_grad():
        head = model.keypoint_head
        final = getattr(head, "final_layer", None)
        if final is None and hasattr(head, "multi_final_layers"):  # the last stage predicts (CPM's is
            final = head.multi_final_layers[-1]  # an identity: its backbone's last stage gives the heatmaps)
        if final is None and hasattr(head, "predict_layers"):  # MSPN's and RSN's: the last unit predicts
            final = head.predict_layers[-1].conv_layers[-1]  # (its last convolution and batch norm)
        if final is not None:
            for name, tensor in final.named_parameters():
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * (0.1 if name.endswith("bias") else 0.2))
        else:  # DeepPose's fully connected head: coordinates (and RLE's sigmas) spread over the crop
            head.fc.weight.copy_(torch.randn(head.fc.weight.shape, generator=generator) * 0.002)
            head.fc.bias.copy_(torch.rand(head.fc.bias.shape, generator=generator) * 0.7 + 0.15)
    model.cfg = cfg  # as init_pose_model sets it: the inference reads the test pipeline from it
    model.eval()
    save_checkpoint(model, job["checkpoint"], meta={"mmpose_version": "0.29.0"})
    dataset_info = DatasetInfo(cfg.data.test.dataset_info)
    out = {}
    for index, (path, box) in enumerate(zip(job["images"], job.get("boxes", []))):
        results, _ = inference_top_down_pose_model(
            model,
            path,
            [{"bbox": np.asarray(box, dtype=np.float32)}],
            format="xywh",
            dataset=cfg.data.test.type,
            dataset_info=dataset_info,
        )
        out[f"image{index}"] = np.asarray(results[0]["keypoints"])
    np.savez(job["out"], **out)


def _joints_0x(case: dict) -> tuple[np.ndarray, np.ndarray]:
    """A case's keypoints and visibility as 0.x's pipelines hold them: ``joints_3d`` and
    ``joints_3d_visible`` (K x 3, the third column 0)."""
    joints = np.zeros((len(case["keypoints"]), 3), np.float32)
    joints[:, :2] = case["keypoints"]
    visible = np.zeros_like(joints)
    visible[:, :2] = np.asarray(case["visible"], np.float32)[:, None]
    return joints, visible


def _pose_augment(job: dict) -> None:
    """0.29's random box augmentations (shift, half body, scale and rotation, in a 0.x pipeline's
    order) on each case of ``job["cases"]``, numpy's global generator seeded per case as 0.x's
    data workers draw from it: the center, the scale in pixels (0.x's units of 200 px times 200)
    and the rotation."""
    from mmpose.datasets.pipelines import (
        TopDownGetRandomScaleRotation,
        TopDownHalfBodyTransform,
        TopDownRandomShiftBboxCenter,
    )

    shift = TopDownRandomShiftBboxCenter(**job["shift"])
    half = TopDownHalfBodyTransform(**job["half"])
    scale_rotation = TopDownGetRandomScaleRotation(**job["scale_rotation"])
    centers, scales, rotations = [], [], []
    for case in job["cases"]:
        joints, visible = _joints_0x(case)
        results = {
            "joints_3d": joints,
            "joints_3d_visible": visible,
            "center": np.asarray(case["center"], np.float32),
            "scale": np.asarray(case["scale"], np.float32) / 200.0,
            "ann_info": {
                "num_joints": len(joints),
                "upper_body_ids": job["upper_body_ids"],
                "image_size": np.asarray(job["image_size"]),
            },
        }
        np.random.seed(case["seed"])
        results = scale_rotation(half(shift(results)))
        centers.append(results["center"])
        scales.append(np.asarray(results["scale"]) * 200.0)
        rotations.append(results["rotation"])
    np.savez(job["out"], center=np.asarray(centers), scale=np.asarray(scales), rotation=np.asarray(rotations))


def _pose_photometric(job: dict) -> None:
    """0.29's ``PhotometricDistortion`` on ``job["images"]`` (an .npz of N x H x W x 3 uint8),
    numpy's global generator seeded per image (``job["seeds"]``)."""
    from mmpose.datasets.pipelines import PhotometricDistortion

    distortion = PhotometricDistortion(**job["args"])
    images = np.load(job["images"])["images"]
    out = []
    for image, seed in zip(images, job["seeds"]):
        np.random.seed(seed)
        out.append(distortion({"img": image.copy()})["img"])
    np.savez(job["out"], images=np.asarray(out))


def _pose_decode(job: dict) -> None:
    """0.29's ``keypoints_from_heatmaps`` on the heatmaps of ``job["heatmaps"]`` (N x K x H x W),
    with 0.x's default quarter-pixel refinement and with DARK's (``post_process='unbiased'``), in
    heatmap pixels (a box of the heatmap's own size centred on it maps them one to one)."""
    from mmpose.core.evaluation import keypoints_from_heatmaps

    heatmaps = np.load(job["heatmaps"])["heatmaps"]
    n, _, height, width = heatmaps.shape
    center = np.tile([width / 2.0, height / 2.0], (n, 1))
    scale = np.tile([width / 200.0, height / 200.0], (n, 1))
    out = {}
    for post_process in ("default", "unbiased"):
        preds, maxvals = keypoints_from_heatmaps(
            heatmaps.copy(), center, scale, post_process=post_process, kernel=job["kernel"]
        )
        out[post_process] = preds
        out[f"{post_process}_scores"] = maxvals[..., 0]
    # UDP's Gaussian decoding (DARK's UDP refinement), mapped to (W - 1) / W of the box
    preds, maxvals = keypoints_from_heatmaps(
        heatmaps.copy(), center, scale, kernel=job["kernel"], use_udp=True, target_type="GaussianHeatmap"
    )
    out["udp"], out["udp_scores"] = preds, maxvals[..., 0]
    # Megvii's (MSPN, RSN): blurred by its own kernel, a quarter pixel plus half a pixel, scores / 255 + 0.5
    preds, maxvals = keypoints_from_heatmaps(
        heatmaps.copy(), center, scale, post_process="megvii", kernel=job["megvii_kernel"]
    )
    out["megvii"], out["megvii_scores"] = preds, maxvals[..., 0]
    # UDP's combined targets (a disc and x, y offsets a keypoint), 0.x's default disc radius
    # (one person at a time: 0.29's index arithmetic reads a keypoint without a positive disc value
    # from the map before its own, across persons in a batch)
    combined = np.load(job["heatmaps"])["combined"]
    decoded = [
        keypoints_from_heatmaps(
            combined[i : i + 1].copy(),
            center[i : i + 1],
            scale[i : i + 1],
            kernel=job["kernel"],
            use_udp=True,
            target_type="CombinedTarget",
        )
        for i in range(n)
    ]
    out["combined"] = np.concatenate([preds for preds, _ in decoded])
    out["combined_scores"] = np.concatenate([maxvals[..., 0] for _, maxvals in decoded])
    np.savez(job["out"], **out)


def _pose_target(job: dict) -> None:
    """0.29's ``TopDownGenerateTarget(**job["target"])`` on each case of ``job["cases"]`` (keypoints
    in the input image, their visibility): the targets (one per kernel or sigma where it took a
    list) and target weights."""
    from mmpose.datasets.pipelines import TopDownGenerateTarget

    generate = TopDownGenerateTarget(
        **{k: [tuple(v) for v in vs] if k == "kernel" else vs for k, vs in job["target"].items()}
    )
    targets, weights = [], []
    for case in job["cases"]:
        joints, visible = _joints_0x(case)
        results = {
            "joints_3d": joints,
            "joints_3d_visible": visible,
            "ann_info": {
                "num_joints": len(joints),
                "image_size": np.asarray(job["image_size"]),
                "heatmap_size": np.asarray(job["heatmap_size"]),
                "joint_weights": np.asarray(job.get("joint_weights", [1.0] * len(joints)), np.float32)[:, None],
                "use_different_joint_weights": bool(job.get("joint_weights")),
            },
        }
        results = generate(results)
        targets.append(results["target"])
        weights.append(results["target_weight"])
    np.savez(job["out"], target=np.asarray(targets), target_weight=np.asarray(weights))


def _pose_evaluate(job: dict) -> None:
    """0.29's own ``evaluate`` of the config's test data set (its annotation file and images
    replaced by ``job``'s) on given keypoints: ``job["predictions"]`` (an npz, one K x 2 array per
    image file name), scored 1, in the results layout 0.x's test loop hands to ``evaluate``. Writes
    each reported name and value (JSON)."""
    from mmcv import Config
    from mmpose.datasets import build_dataset

    cfg = Config.fromfile(job["config"])
    test = cfg.data.test
    test.ann_file, test.img_prefix = job["ann_file"], job["img_prefix"]
    dataset = build_dataset(test)
    predictions = np.load(job["predictions"])
    results = []
    for item in dataset.db:
        points = predictions[item["image_file"][len(job["img_prefix"]) :]]
        preds = np.concatenate([points, np.ones((len(points), 1))], axis=1)[None]
        results.append(
            {
                "preds": preds,
                "boxes": np.array([[0.0, 0.0, 1.0, 1.0, 1.0, 1.0]]),
                "image_paths": [item["image_file"]],
                "bbox_ids": [item["bbox_id"]],
            }
        )
    values = dataset.evaluate(results, res_folder=job["res_folder"], metric=cfg.evaluation.metric)
    with open(job["out"], "w") as fh:
        json.dump({name: float(value) for name, value in dict(values).items()}, fh)
    if job.get("boxes_out"):  # the boxes the data set read (center; scale in pixels, 0.x's units x 200)
        boxes = [
            {
                "file": item["image_file"][len(job["img_prefix"]) :],
                "center": np.asarray(item["center"], np.float64).tolist(),
                "scale": (np.asarray(item["scale"], np.float64) * 200.0).tolist(),
            }
            for item in dataset.db
        ]
        with open(job["boxes_out"], "w") as fh:
            json.dump(boxes, fh)


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


def _pose_loss(job: dict) -> None:
    """0.29's keypoint losses (``job["losses"]``: [kind, loss config], kind "heatmap" or "regression")
    on the outputs, targets and weights of ``job["inputs"]`` (0.x's target weight per keypoint for
    heatmaps, per coordinate for regression): each value and its gradient with respect to the
    output; RLE's flow model (seeded) saved beside for the other side."""
    from mmpose.models.builder import build_loss

    inputs = {name: torch.from_numpy(array) for name, array in np.load(job["inputs"]).items()}
    out = {}
    for index, (kind, row) in enumerate(job["losses"]):
        torch.manual_seed(job["seed"] + index)
        loss = build_loss(dict(row))
        if kind in ("heatmap", "combined"):  # combined: three maps a keypoint (UDP's disc and offsets)
            output, target = inputs[f"{kind}s"].clone(), inputs[f"{kind}_targets"]
            weight = inputs["weight"][..., None]
        else:
            output = inputs["output"].clone() if row["type"] == "RLELoss" else inputs["output"][..., :2].clone()
            target, weight = inputs["target"], inputs["weight"][..., None].repeat(1, 1, 2)
        output.requires_grad_(True)
        value = loss(output, target, weight)
        value.backward()
        out[f"value{index}"] = value.detach().numpy()
        out[f"grad{index}"] = output.grad.numpy()
        if row["type"] == "RLELoss":
            torch.save(loss.flow_model.state_dict(), f"{job['flow']}{index}.pth")
    np.savez(job["out"], **out)


def _pose_lift(job: dict) -> None:
    """A 3D lifting config as 0.x ran it, from ``job["cwd"]`` (where its ``data/h36m`` paths start):
    the model's own initialisation from ``torch.manual_seed(seed)`` (``init``: its state dict), the
    seeded model saved as a 0.x checkpoint; the test data set through its pipeline, the model
    (``forward_test``: the global position restored) and its ``evaluate`` (the config's metrics and
    N-MPJPE); the training data set's samples with ``np.random.seed(flip_seed)`` (its random flip).
    Writes ``out`` (npz) and ``out``.json (the metrics, the target image paths)."""
    import logging
    import os

    logging.getLogger("mmcv").setLevel(logging.WARNING)
    from mmcv import Config
    from mmcv.parallel import collate
    from mmcv.runner import save_checkpoint
    from mmpose.datasets import build_dataset
    from mmpose.models import build_posenet

    os.chdir(job["cwd"])
    cfg = Config.fromfile(job["config"])
    torch.manual_seed(job["seed"])
    model = build_posenet(cfg.model)  # PoseLifter initialises itself
    # copies: the seeding below writes into these tensors
    out = {f"init/{k}": v.numpy().copy() for k, v in model.state_dict().items() if v.is_floating_point()}
    _seed_weights(model, job["seed"])
    model.eval()
    save_checkpoint(model, job["checkpoint"], meta={"mmpose_version": "0.29.0"})
    dataset = build_dataset(cfg.data.test, dict(test_mode=True))
    samples = [dataset[i] for i in range(len(dataset))]
    results = []
    with torch.no_grad():
        for start in range(0, len(samples), 16):
            batch = collate(samples[start : start + 16], samples_per_gpu=16)
            results.append(model(input=batch["input"], metas=batch["metas"].data[0], return_loss=False))
    metrics = list(cfg.evaluation.metric) + ["n-mpjpe"]
    report = {
        "metrics": {k: float(v) for k, v in dataset.evaluate(results, metric=metrics).items()},
        "paths": [s["metas"].data["target_image_path"] for s in samples],
    }
    out["input"] = np.stack([s["input"].numpy() for s in samples])
    out["preds"] = np.concatenate([r["preds"] for r in results])
    np.random.seed(job["flip_seed"])
    train = build_dataset(cfg.data.train)
    drawn = [train[i] for i in range(len(train))]
    out["train_input"] = np.stack([s["input"].numpy() for s in drawn])
    out["train_target"] = np.stack([np.asarray(s["target"]) for s in drawn])
    report["train_paths"] = [s["metas"].data["target_image_path"] for s in drawn]
    np.savez(job["out"], **out)
    with open(job["out"] + ".json", "w") as fh:
        json.dump(report, fh)


def main() -> int:
    with open(sys.argv[1]) as fh:
        jobs = json.load(fh)
    for job in jobs:
        {
            "mmseg": _segmentation,
            "mmseg-dice": _dice_loss,
            "mmcls": _classification,
            "mmpose": _pose,
            "mmpose-augment": _pose_augment,
            "mmpose-photometric": _pose_photometric,
            "mmpose-decode": _pose_decode,
            "mmpose-evaluate": _pose_evaluate,
            "mmpose-loss": _pose_loss,
            "mmpose-target": _pose_target,
            "mmpose-lift": _pose_lift,
        }[job["toolbox"]](job)
    return 0


if __name__ == "__main__":
    sys.exit(main())
