"""MMPose 0.x top-down configs and checkpoints on MMPose 1.3.2 through mmfix: the same keypoints.

For a spread of MMPose 0.29.0's top-down heatmap zoo (ResNet, HRNet, Lite-HRNet and MobileNetV2
backbones, HRNetV2 whose head merged four feature maps, ViPNAS's grouped deconvolutions, CPM's and
Hourglass's multi-stage heads, MSPN's and RSN's multi-stage multi-unit ones) and its
DeepPose regression models (with and without RLE's sigmas, with and without the flip shift; COCO,
CrowdPose, AI Challenger, COCO-WholeBody, an animal, a face and a hand data set, each with its own
keypoints and flip pairs; 0.x's default post-processing, DARK's and UDP's), the real MMPose 0.29.0
(tests/family0x_support.py) builds the official config's model, gives it seeded weights, saves a 0.x
checkpoint and predicts each image's keypoints for one person box with its own
``inference_top_down_pose_model`` (the config's test pipeline, flip test and heatmap shift, its
decoding). On the current side, the same official 0.x config file is loaded by MMPose 1.3.2's own
API with mmfix active (``init_model`` with the 0.x checkpoint, ``inference_topdown`` with the same
box): converted as MMPose's (``default_scope='mmpose'``, ``TopdownPoseEstimator``), the checkpoint
must load strictly and the keypoints and their scores must equal 0.x's.

MMPose 1.x's data sets import xtcocotools, whose wheels need numpy 1: these run in the version
matrix's ``mmpose`` cell (and skip in an environment without MMPose, unless REQUIRE_TOOLBOXES
names it). MMPose's models import torchvision, which the test environment lacks: the 0.x
environment's patched torchvision is put on the current side's PYTHONPATH (tests/family0x_support.py).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import clean_env, run
from family0x_support import configs_0x, predict_0x, predict_current, seeded_images

pytestmark = pytest.mark.slow  # in the version matrix's `mmpose` cell (scripts/matrix.sh), by name

TOPDOWN = "2d_kpt_sview_rgb_img/topdown_heatmap"
DEEPPOSE = "2d_kpt_sview_rgb_img/deeppose"
#: configs under MMPose 0.29.0's configs/
CASES = [
    f"body/{TOPDOWN}/coco/res50_coco_256x192.py",
    f"body/{TOPDOWN}/coco/hrnet_w32_coco_256x192.py",
    f"body/{TOPDOWN}/coco/res50_coco_256x192_dark.py",  # DARK's decoding (post_process='unbiased')
    f"body/{TOPDOWN}/coco/litehrnet_18_coco_256x192.py",
    f"body/{TOPDOWN}/coco/mobilenetv2_coco_256x192.py",
    f"body/{TOPDOWN}/crowdpose/res50_crowdpose_256x192.py",
    f"body/{TOPDOWN}/aic/res50_aic_256x192.py",
    f"wholebody/{TOPDOWN}/coco-wholebody/res50_coco_wholebody_256x192.py",
    f"animal/{TOPDOWN}/animalpose/res50_animalpose_256x256.py",
    # HRNetV2: the head merged the four maps itself (resize_concat); 1.x's FeatureMapProcessor neck
    f"face/{TOPDOWN}/300w/hrnetv2_w18_300w_256x256.py",
    f"hand/{TOPDOWN}/onehand10k/hrnetv2_w18_onehand10k_256x256.py",
    # ViPNAS: grouped deconvolutions (ViPNASHead)
    f"body/{TOPDOWN}/coco/vipnas_res50_coco_256x192.py",
    # DeepPose: RegressionHead; RLEHead (sigmas as scores) with 0.x's flip shift, and without it
    # multi-stage heads (CPMHead): CPM's six stages, Hourglass's one
    f"body/{TOPDOWN}/coco/cpm_coco_256x192.py",
    f"body/{TOPDOWN}/coco/hourglass52_coco_256x256.py",
    # UDP: its unbiased warp, Gaussian encoding and DARK-UDP decoding (UDPHeatmap)
    f"body/{TOPDOWN}/coco/hrnet_w32_coco_256x192_udp.py",
    # UDP's combined targets: a disc and x, y offsets a keypoint, decoded as 0.x's CombinedTarget
    f"body/{TOPDOWN}/coco/hrnet_w32_coco_256x192_udp_regress.py",
    # MSPN's and RSN's multi-stage multi-unit heads (MSPNHead) and Megvii's decoding
    f"body/{TOPDOWN}/coco/2xmspn50_coco_256x192.py",
    f"body/{TOPDOWN}/coco/rsn18_coco_256x192.py",
    f"body/{DEEPPOSE}/coco/res50_coco_256x192.py",
    f"body/{DEEPPOSE}/coco/res50_coco_256x192_rle.py",
    f"body/{DEEPPOSE}/mpii/res50_mpii_256x256_rle.py",
]
#: one person box per image (x, y, w, h; not on whole pixels): inside the 45x61 and 53x65 images
BOXES = [[3.5, 2.25, 40.0, 37.5], [9.0, 5.5, 31.25, 44.0]]

# The current side, in a process of its own with mmfix active as a user's script has it (the test
# process stays stock): each 0.x config loaded by MMPose's init_model with its 0.x checkpoint, a
# strict load checked, then inference_topdown on each image with its box.
_CURRENT = r"""
import json, sys, numpy as np, torch
import mmfix
from mmengine.config import Config
from mmpose.apis import inference_topdown, init_model

for job in json.load(open(sys.argv[1])):
    report = {}
    try:
        cfg = Config.fromfile(job["config"])
        report["scope"] = cfg.get("default_scope")
        report["model"] = [cfg.model.type, cfg.model.head.type, cfg.model.head.decoder.type]
        model = init_model(job["config"], job["checkpoint"], device="cpu")
        saved = torch.load(job["checkpoint"], map_location="cpu", weights_only=True)["state_dict"]
        missing, unexpected = model.load_state_dict(saved, strict=False)
        report["missing"], report["unexpected"] = list(missing), list(unexpected)
        report["keypoints"] = model.dataset_meta["num_keypoints"]
        report["flip_indices"] = list(model.dataset_meta["flip_indices"])
        out = {}
        for number, (image, (x, y, w, h)) in enumerate(zip(job["images"], job["boxes"])):
            sample = inference_topdown(model, image, np.array([[x, y, x + w, y + h]]), bbox_format="xyxy")[0]
            found = sample.pred_instances
            out[f"image{number}"] = np.concatenate([found.keypoints[0], found.keypoint_scores[0][:, None]], axis=1)
        np.savez(job["current"], **out)
    except Exception:
        import traceback
        report["error"] = traceback.format_exc()[-3000:]
    json.dump(report, open(job["report"], "w"))
"""


@pytest.fixture(scope="module")
def made(
    mmpose_runs: None, mmdet2_python: Path, torchvision_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[dict]:
    """Every case's 0.x checkpoint and keypoints (one 0.x process), then the current side's (one process)."""
    folder = tmp_path_factory.mktemp("pose0x")
    configs = configs_0x(mmdet2_python, "mmpose")
    images = seeded_images(folder)
    jobs = [
        {
            "toolbox": "mmpose",
            "config": str(configs / name),
            "seed": 40 + index,
            "images": [str(p) for p in images],
            "boxes": BOXES,
            "checkpoint": str(folder / f"case{index}.pth"),
            "out": str(folder / f"case{index}.npz"),
            "current": str(folder / f"current{index}.npz"),
            "report": str(folder / f"current{index}.json"),
        }
        for index, name in enumerate(CASES)
    ]
    predict_0x(mmdet2_python, jobs, folder)
    predict_current(_CURRENT, jobs, folder, torchvision_path)
    return jobs


def _head_1x(config: str) -> str:
    if "/deeppose/" in config:
        return "RLEHead" if config.endswith("_rle.py") else "RegressionHead"
    if "/cpm_" in config or "/hourglass" in config:
        return "CPMHead"
    if "mspn" in config or "rsn" in config:
        return "MSPNHead"
    return "ViPNASHead" if "vipnas" in config else "HeatmapHead"


def _inside(points: np.ndarray, box: list[float]) -> np.ndarray:
    """Which points lie inside the box enlarged 1.25 times about its centre (as decoded)."""
    x, y, w, h = box
    return (np.abs(points[:, 0] - x - w / 2) < 0.625 * w) & (np.abs(points[:, 1] - y - h / 2) < 0.625 * h)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[Path(c).stem for c in CASES])
def test_0x_checkpoint_predicts_keypoints_on_mmpose_1x_as_on_0x(made: list[dict], index: int) -> None:
    job = made[index]
    report = json.loads(Path(job["report"]).read_text())
    assert "error" not in report, report.get("error")
    # converted as MMPose's (not MMDetection's) config, into 1.x's top-down estimator
    assert report["scope"] == "mmpose"
    assert report["model"][0] == "TopdownPoseEstimator", report["model"]
    assert report["model"][1] == _head_1x(job["config"]), report["model"]
    # every key and shape of the 0.x checkpoint fits the converted model
    assert report["missing"] == [] and report["unexpected"] == [], report
    expected, current = np.load(job["out"]), np.load(job["current"])
    for number in range(len(job["images"])):
        found, reference = current[f"image{number}"], expected[f"image{number}"]
        assert found.shape == reference.shape == (report["keypoints"], 3)
        # the seeded heads put the keypoints apart, so that a difference in any step would show
        assert np.ptp(reference[:, 0]) > 5 and np.ptp(reference[:, 1]) > 5, reference[:, :2]
        compared = np.ones(len(reference), dtype=bool)
        tolerance = 1e-3
        if "_udp" in job["config"] and "_regress" not in job["config"]:  # (combined targets: no Taylor step)
            # UDP's decoding is DARK's Taylor step too, on log heatmaps clipped below (it stays put
            # where 0.x's DARK flies off): the environments' rounding moves it by thousandths of a
            # pixel (0.005 px seen), every keypoint compared
            tolerance = 0.05
        if "_dark" in job["config"]:
            # DARK's Taylor step on the seeded model's flat heatmaps
            # (no trained peak) is ill-conditioned: the two environments' convolutions and OpenCV
            # blurs, equal to float rounding, move it by hundredths of a pixel (0.055 px seen), and
            # where its Hessian is nearly singular, off the box by thousands of pixels on both
            # sides. Compared here: the keypoints inside the box (1.25x, as decoded), to 0.1 px, and
            # the outside ones outside on both sides; the decoding itself is compared on
            # trained-like heatmaps to 1e-3 px (the test below).
            box = job["boxes"][number]
            compared = _inside(reference, box)
            assert compared.sum() >= len(reference) // 2 and not _inside(found, box)[~compared].any()
            tolerance = 0.1
        # An exact tie: the same maximum at two heatmap cells (the flip test averages a seeded
        # model's constant border, where the box overhangs a small image, into mirrored equal
        # values: 300W's centre-line keypoints, a pair of ankles) is decoded at either cell, float
        # noise deciding. Such a keypoint keeps its score, lands pixels away (a refinement moves it
        # 0.25 heatmap pixels at most) and is compared by its score: one keypoint per image, or a
        # keypoint and its flip partner (the same mirrored values in both heatmaps).
        far = np.abs(found[:, :2] - reference[:, :2]).max(axis=1) > 2.0
        tie = far & (np.abs(found[:, 2] - reference[:, 2]) < 1e-6)
        tied = np.flatnonzero(tie).tolist()
        pair = len(tied) == 2 and report["flip_indices"][tied[0]] == tied[1]
        assert len(tied) <= 1 or pair, (job["config"], number, tied, report["flip_indices"])
        compared &= ~tie
        np.testing.assert_allclose(
            found[compared, :2],
            reference[compared, :2],
            atol=tolerance,
            err_msg=f"{job['config']}, image {number}: keypoints",
        )
        np.testing.assert_allclose(
            found[:, 2], reference[:, 2], rtol=1e-4, atol=1e-6, err_msg=f"{job['config']}, image {number}: scores"
        )


def _photometric_draws_as_0x(images: np.ndarray, job: dict) -> None:
    """mmfix's ``PhotometricDistortion0x`` (what a converted 0.x pipeline names) against 0.29's on the
    same images and seeds: the same pixels. 0.29 got the image in RGB (its LoadImageFromFile's
    default) and the converted pipeline in BGR (1.x's LoadImage; the data preprocessor swaps): the
    copy gets it reversed and must give 0.29's result reversed. Without putting the channels in 0.x's
    order (the hue turns the other way), and with 1.x's namesake, most images come out otherwise."""
    from mmpose.datasets.transforms import PhotometricDistortion

    from mmfix._legacy_models.mmpose import PhotometricDistortion0x

    reference = np.load(job["out"])["images"]
    ours, stock = PhotometricDistortion0x(**job["args"]), PhotometricDistortion(**job["args"])
    unordered = PhotometricDistortion0x(**job["args"], rgb_0x=False)

    def distorted(transform, image: np.ndarray, seed: int) -> np.ndarray:
        np.random.seed(seed)
        return transform.transform({"img": image.copy()})["img"]

    changed = [not np.array_equal(a, b) for a, b in zip(reference, images)]
    assert sum(changed) > 45, sum(changed)  # most images were distorted, so a wrong draw would show
    bgr = images[..., ::-1]
    np.testing.assert_array_equal(
        np.asarray([distorted(ours, image, seed) for image, seed in zip(bgr, job["seeds"])])[..., ::-1], reference
    )
    for other, image_set in ((unordered, bgr), (stock, images)):
        outputs = [distorted(other, image, seed) for image, seed in zip(image_set, job["seeds"])]
        if other is unordered:
            outputs = [o[..., ::-1] for o in outputs]
        assert sum(not np.array_equal(a, b) for a, b in zip(outputs, reference)) > 30, other


def test_0x_box_augmentations_draw_as_mmpose_0x(mmpose_runs: None, mmdet2_python: Path, tmp_path: Path) -> None:
    """mmfix's copies of 0.29's random shift, half-body and scale/rotation transforms (which a
    converted 0.x config's training pipeline names: 1.x's draw from other distributions) against
    0.29's own on 200 seeded instances: the same boxes and rotations, draw for draw; and 0.29's
    photometric distortion on 60 seeded images (below)."""
    from mmfix._legacy_models.mmpose import (
        TopDownGetRandomScaleRotation0x,
        TopDownHalfBodyTransform0x,
        TopDownRandomShiftBboxCenter0x,
    )

    rng = np.random.default_rng(2026)
    upper = list(range(11))  # COCO's upper body
    cases = [
        {
            "keypoints": rng.uniform(0, 300, (17, 2)).round(2).tolist(),
            "visible": (rng.random(17) < 0.8).astype(int).tolist(),
            "center": rng.uniform(50, 250, 2).round(2).tolist(),
            "scale": (rng.uniform(0.3, 1.5, 2) * 200).round(2).tolist(),
            "seed": 1000 + index,
        }
        for index in range(200)
    ]
    # probabilities raised above the zoo's (0.3) so that every branch is taken many times
    job = {
        "toolbox": "mmpose-augment",
        "cases": cases,
        "upper_body_ids": upper,
        "image_size": [192, 256],
        "shift": {"shift_factor": 0.16, "prob": 0.6},
        "half": {"num_joints_half_body": 8, "prob_half_body": 0.6},
        "scale_rotation": {"rot_factor": 40, "scale_factor": 0.5, "rot_prob": 0.6},
        "out": str(tmp_path / "augment0x.npz"),
    }
    images = np.random.default_rng(7).integers(0, 256, (60, 24, 20, 3), dtype=np.uint8)
    np.savez(tmp_path / "images.npz", images=images)
    photometric = {
        "toolbox": "mmpose-photometric",
        "images": str(tmp_path / "images.npz"),
        "seeds": list(range(500, 560)),
        "args": {"brightness_delta": 32, "contrast_range": [0.5, 1.5], "saturation_range": [0.5, 1.5], "hue_delta": 18},
        "out": str(tmp_path / "photometric0x.npz"),
    }
    predict_0x(mmdet2_python, [job, photometric], tmp_path)
    _photometric_draws_as_0x(images, photometric)
    shift = TopDownRandomShiftBboxCenter0x(**job["shift"])
    half = TopDownHalfBodyTransform0x(**job["half"], image_size=job["image_size"])
    scale_rotation = TopDownGetRandomScaleRotation0x(**job["scale_rotation"])
    centers, scales, rotations = [], [], []
    for case in cases:
        results = {
            "keypoints": np.asarray(case["keypoints"], np.float32)[None],
            "keypoints_visible": np.asarray(case["visible"], np.float32)[None],
            "bbox_center": np.asarray(case["center"], np.float32)[None],
            "bbox_scale": np.asarray(case["scale"], np.float32)[None],
            "upper_body_ids": upper,
        }
        np.random.seed(case["seed"])
        results = scale_rotation.transform(half.transform(shift.transform(results)))
        centers.append(results["bbox_center"][0])
        scales.append(results["bbox_scale"][0])
        rotations.append(results["bbox_rotation"][0])
    reference = np.load(job["out"])
    start_center = np.asarray([c["center"] for c in cases])
    start_scale = np.asarray([c["scale"] for c in cases])
    # each transform acted on many of the cases (so that a wrong draw would show)
    assert (np.abs(reference["center"] - start_center).max(axis=1) > 1e-3).sum() > 60
    assert (np.abs(reference["scale"] - start_scale).max(axis=1) > 1e-3).sum() > 150
    assert (reference["rotation"] != 0).sum() > 60
    np.testing.assert_allclose(np.asarray(centers), reference["center"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(scales), reference["scale"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(rotations), reference["rotation"], rtol=1e-5, atol=1e-5)


def _heatmaps(rng: np.random.Generator, count: int, keypoints: int, height: int, width: int) -> np.ndarray:
    """Heatmaps as trained models give them: one Gaussian peak (sigma 2 px) per keypoint at a
    sub-pixel place, with a little noise; a third of the peaks on the second row or column from an
    edge (where 0.x's and 1.x's refinements part), some at the edge itself."""
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    maps = rng.normal(0, 0.005, (count, keypoints, height, width)).astype(np.float32)
    for n in range(count):
        for k in range(keypoints):
            cx, cy = rng.uniform(2.6, width - 3.6), rng.uniform(2.6, height - 3.6)
            edge = rng.integers(0, 9)
            if edge in (0, 1):
                cy = [1.0, height - 2.0][edge] + rng.uniform(-0.3, 0.3)
            elif edge in (2, 3):
                cx = [1.0, width - 2.0][edge - 2] + rng.uniform(-0.3, 0.3)
            elif edge == 4:
                cy = 0.0
            maps[n, k] += rng.uniform(0.4, 1.0) * np.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / 8.0)
    return maps


def _combined_maps(rng: np.random.Generator, maps: np.ndarray, radius: float) -> np.ndarray:
    """UDP's combined outputs as trained models give them, three maps a keypoint: the disc (here
    ``maps``' peak; one keypoint in eight with no positive value, as an occluded one), and the x and
    y offsets to a place near the peak, over ``radius``, with noise."""
    count, keypoints, height, width = maps.shape
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    out = np.zeros((count, keypoints * 3, height, width), np.float32)
    for n in range(count):
        for k in range(keypoints):
            disc = maps[n, k]
            if rng.random() < 0.125:
                disc = -np.abs(disc) - 0.01
            y, x = np.unravel_index(np.argmax(maps[n, k]), maps[n, k].shape)
            cx, cy = x + rng.uniform(-0.8, 0.8), y + rng.uniform(-0.8, 0.8)
            out[n, 3 * k] = disc
            out[n, 3 * k + 1] = (cx - xs) / radius + rng.normal(0, 0.3, xs.shape)
            out[n, 3 * k + 2] = (cy - ys) / radius + rng.normal(0, 0.3, ys.shape)
    return out


def test_0x_heatmap_decoding_as_mmpose_0x(mmpose_runs: None, mmdet2_python: Path, tmp_path: Path) -> None:
    """The converted configs' decoders against 0.29's ``keypoints_from_heatmaps`` on heatmaps as
    trained models give them (the seeded models of the test above give flat ones, on which DARK's
    Taylor step is ill-conditioned): ``MSRAHeatmap0x`` (0.x's quarter-pixel refinement, which stock
    1.x's ``MSRAHeatmap`` does not compute on the heatmap's second rows and columns: shown), 1.x's
    unbiased (DARK) decoding, which a converted DARK config keeps, and ``UDPHeatmap0x`` (0.x's
    ``use_udp=True``: DARK's UDP step after a plain blur, where stock 1.x's ``UDPHeatmap`` blurs
    otherwise: shown), also for UDP's combined targets (0.x blurred the offsets, 1.x does not: shown),
    and 1.x's ``MegviiHeatmap`` for 0.x's ``post_process='megvii'`` (MSPN, RSN: a converted config's
    decoder, blurred by its ``modulate_kernel``)."""
    from mmpose.codecs import MegviiHeatmap, MSRAHeatmap, UDPHeatmap

    from mmfix._legacy_models.mmpose import MSRAHeatmap0x, UDPHeatmap0x

    height, width = 64, 48
    maps = _heatmaps(np.random.default_rng(7), 24, 17, height, width)
    combined = _combined_maps(np.random.default_rng(8), maps, radius=0.0546875 * height)
    np.savez(tmp_path / "heatmaps.npz", heatmaps=maps, combined=combined)
    job = {"toolbox": "mmpose-decode", "heatmaps": str(tmp_path / "heatmaps.npz"), "kernel": 11, "megvii_kernel": 5}
    job["out"] = str(tmp_path / "decoded0x.npz")
    predict_0x(mmdet2_python, [job], tmp_path)
    reference = np.load(job["out"])
    sizes = {"input_size": (width * 4, height * 4), "heatmap_size": (width, height), "sigma": 2}
    decoders = {
        "default": MSRAHeatmap0x(**sizes),
        "unbiased": MSRAHeatmap0x(**sizes, unbiased=True, blur_kernel_size=11),
        # mapped to the box as 0.x's transform_preds(use_udp=True): W / (W - 1) of the heatmap's pixels
        "udp": UDPHeatmap0x(**sizes, blur_kernel_size=11),
        "megvii": MegviiHeatmap(sizes["input_size"], sizes["heatmap_size"], kernel_size=5),
    }
    stock = {"default": MSRAHeatmap(**sizes), "udp": UDPHeatmap(**sizes, blur_kernel_size=11)}
    parted = dict.fromkeys(stock, 0)
    for post_process, decoder in decoders.items():
        for n in range(len(maps)):
            keypoints, scores = decoder.decode(maps[n])
            np.testing.assert_allclose(keypoints[0] / 4, reference[post_process][n], rtol=0, atol=1e-3)
            np.testing.assert_allclose(scores[0], reference[f"{post_process}_scores"][n], rtol=1e-6)
            if post_process in stock:
                moved = np.abs(stock[post_process].decode(maps[n])[0][0] / 4 - reference[post_process][n])
                parted[post_process] += int((moved > 0.2).any(axis=1).sum())
    # stock 1.x's refinement and blur differ there: what the copies are for
    assert parted["default"] > 20 and parted["udp"] > 20, parted
    # UDP's combined targets (0.x's target_type='CombinedTarget'): 0.x blurred the offsets too (and
    # one keypoint in eight has no positive disc value: 0.x's index arithmetic, kept)
    combined_sizes = {k: v for k, v in sizes.items() if k != "sigma"}
    decoder = UDPHeatmap0x(**combined_sizes, heatmap_type="combined", blur_kernel_size=11)
    stock_combined = UDPHeatmap(**combined_sizes, heatmap_type="combined", blur_kernel_size=11)
    parted_combined = 0
    for n in range(len(combined)):
        keypoints, scores = decoder.decode(combined[n])
        np.testing.assert_allclose(keypoints[0] / 4, reference["combined"][n], rtol=0, atol=1e-3)
        np.testing.assert_allclose(scores[0], reference["combined_scores"][n], rtol=1e-6)
        moved = np.abs(stock_combined.decode(combined[n])[0][0] / 4 - reference["combined"][n])
        parted_combined += int((moved > 0.2).any(axis=1).sum())
    assert (reference["combined_scores"] <= 0).sum() > 20
    assert parted_combined > 100, parted_combined


def _target_job(
    mmdet2_python: Path, name: str, tmp_path: Path, joint_weights: list[float] | None = None
) -> tuple[dict, dict, list]:
    """The 0.x config's ``TopDownGenerateTarget`` as a job for 0.29 on 12 seeded cases (keypoints in
    and out of the input, invisible ones), and the converted config. ``joint_weights``: the config's
    ``data_cfg.use_different_joint_weights`` set, 0.x's target weights times these."""
    from mmengine.config import Config

    from mmfix._configs import convert

    config = configs_0x(mmdet2_python, "mmpose") / f"body/{TOPDOWN}/coco/{name}"
    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)  # stock: the 0.x dict
    old = fromfile(str(config)).to_dict()
    if joint_weights is not None:
        for split in ("train", "val", "test"):
            old["data"][split]["data_cfg"]["use_different_joint_weights"] = True
    target_0x = next(t for t in old["train_pipeline"] if t["type"] == "TopDownGenerateTarget")
    out, _ = convert(old, "mmpose")
    rng = np.random.default_rng(5)
    cases = [
        {
            "keypoints": rng.uniform([-12.0, -12.0], [204.0, 268.0], (17, 2)).round(3).tolist(),
            "visible": (rng.random(17) < 0.8).astype(int).tolist(),
        }
        for _ in range(12)
    ]
    job = {
        "toolbox": "mmpose-target",
        "target": {k: v for k, v in target_0x.items() if k != "type"},
        "image_size": old["data_cfg"]["image_size"],
        "heatmap_size": old["data_cfg"]["heatmap_size"],
        "cases": cases,
        "out": str(tmp_path / f"targets0x-{name}{'-weighted' if joint_weights else ''}.npz"),
    }
    if joint_weights is not None:
        job["joint_weights"] = joint_weights
    return job, out, cases


def _generated(out: dict, case: dict, joint_weights: list[float] | None = None) -> dict:
    from mmpose.datasets.transforms import GenerateTarget

    import mmfix._legacy_models.mmpose  # noqa: F401 (the converted codecs, as custom_imports imports them)

    step = next(t for t in out["train_dataloader"]["dataset"]["pipeline"] if t["type"] == "GenerateTarget")
    generate = GenerateTarget(**{k: v for k, v in step.items() if k != "type"})
    results = {
        "keypoints": np.asarray(case["keypoints"], np.float32)[None],
        "keypoints_visible": np.asarray(case["visible"], np.float32)[None],
    }
    if joint_weights is not None:  # what 1.x's data sets put in each sample (the metainfo's)
        results["dataset_keypoint_weights"] = np.asarray(joint_weights, np.float32)
    return generate(results)


def test_0x_training_targets_as_mmpose_0x(mmpose_runs: None, mmdet2_python: Path, tmp_path: Path) -> None:
    """0.29's ``TopDownGenerateTarget`` of two real configs against the converted configs'
    ``GenerateTarget``, on seeded keypoints in and out of the input (and invisible ones): the same
    targets and weights. MSPN's Megvii targets: 2xmspn50's eight kernels (one per stage and unit)
    as ``GenerateTarget(multilevel=True)`` over five ``MegviiHeatmap`` levels, each stage and unit
    reading its level. UDP's combined targets (hrnet_w32 udp_regress): ``UDPHeatmap0x``'s disc and
    offsets (stock 1.x's writes offsets outside the disc too: shown). ``data_cfg.use_different_joint_weights``
    (hrnet_w32 with COCO's joint weights): the target weights times them, as 1.x's
    ``use_dataset_keypoint_weights``."""
    from mmpose.codecs import UDPHeatmap

    megvii, out, cases = _target_job(mmdet2_python, "2xmspn50_coco_256x192.py", tmp_path)
    combined, combined_out, _ = _target_job(mmdet2_python, "hrnet_w32_coco_256x192_udp_regress.py", tmp_path)
    # data_cfg.use_different_joint_weights: COCO's joint weights (1.2 and 1.5 for the limbs' ends)
    weights = [1.0] * 7 + [1.2, 1.2, 1.5, 1.5, 1.0, 1.0, 1.2, 1.2, 1.5, 1.5]
    weighted, weighted_out, _ = _target_job(mmdet2_python, "hrnet_w32_coco_256x192.py", tmp_path, weights)
    predict_0x(mmdet2_python, [megvii, combined, weighted], tmp_path)

    reference = np.load(weighted["out"])
    for n, case in enumerate(cases):
        results = _generated(weighted_out, case, weights)
        np.testing.assert_allclose(results["heatmaps"], reference["target"][n], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(results["keypoint_weights"][0], reference["target_weight"][n][:, 0], rtol=1e-6)
    assert (reference["target_weight"] > 1.0).any()  # the weights reached the targets

    reference = np.load(combined["out"])
    codec = dict(combined_out["codec"])
    assert codec.pop("type") == "UDPHeatmap0x" and codec["heatmap_type"] == "combined"
    stock, parted = UDPHeatmap(**codec), 0
    for n, case in enumerate(cases):
        results = _generated(combined_out, case)
        np.testing.assert_allclose(results["heatmaps"], reference["target"][n], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(results["keypoint_weights"][0], reference["target_weight"][n][:, 0])
        assert results["heatmaps"][0::3].sum() > 50  # discs were drawn
        keypoints = np.asarray(case["keypoints"], np.float32)[None]
        visible = np.asarray(case["visible"], np.float32)[None]
        parted += int(not np.allclose(stock.encode(keypoints, visible)["heatmaps"], reference["target"][n]))
    assert parted == len(cases)

    reference = np.load(megvii["out"])
    target_0x = megvii["target"]
    step = next(t for t in out["train_dataloader"]["dataset"]["pipeline"] if t["type"] == "GenerateTarget")
    levels = out["model"]["head"]["level_indices"]
    assert len(levels) == len(target_0x["kernel"]) == 8 and len(step["encoder"]) == 5
    outside = 0
    for n, case in enumerate(cases):
        results = _generated(out, case)
        for unit, level in enumerate(levels):  # each stage and unit: its 0.x target, its 1.x level
            np.testing.assert_allclose(results["heatmaps"][level], reference["target"][n][unit], rtol=1e-5, atol=1e-4)
            np.testing.assert_array_equal(
                results["keypoint_weights"][level][0], reference["target_weight"][n][unit][:, 0]
            )
        outside += int(((np.asarray(case["visible"]) == 1) & (results["keypoint_weights"][0][0] == 0)).sum())
    assert outside > 0  # visible keypoints outside the heatmap were among them (weight 0 on both sides)


#: 0.29's keypoint losses as its configs write them (and arguments its zoo leaves at defaults)
LOSSES_0X = [
    ("heatmap", {"type": "JointsMSELoss", "use_target_weight": True}),
    ("heatmap", {"type": "JointsMSELoss", "use_target_weight": False, "loss_weight": 0.5}),
    ("heatmap", {"type": "AdaptiveWingLoss", "use_target_weight": True}),
    ("heatmap", {"type": "AdaptiveWingLoss", "use_target_weight": False, "alpha": 2.5, "theta": 0.4}),
    # MSPN's and RSN's online hard keypoint mining (the inputs' 5 keypoints: a smaller top-k)
    ("heatmap", {"type": "JointsOHKMMSELoss", "use_target_weight": True, "topk": 3}),
    ("heatmap", {"type": "JointsOHKMMSELoss", "use_target_weight": False, "topk": 2, "loss_weight": 0.5}),
    # UDP's combined targets (hrnet_w32_coco_256x192_udp_regress.py): a disc and x, y offsets a keypoint
    ("combined", {"type": "CombinedTargetMSELoss", "use_target_weight": True}),
    ("combined", {"type": "CombinedTargetMSELoss", "use_target_weight": False, "loss_weight": 0.5}),
    ("regression", {"type": "SmoothL1Loss", "use_target_weight": True}),
    ("regression", {"type": "SmoothL1Loss", "use_target_weight": False, "loss_weight": 2.0}),
    ("regression", {"type": "WingLoss", "use_target_weight": True}),
    ("regression", {"type": "SoftWingLoss", "use_target_weight": True, "omega1": 2.5, "epsilon": 0.4}),
    ("regression", {"type": "RLELoss", "use_target_weight": True, "size_average": True, "residual": True}),
    ("regression", {"type": "RLELoss", "use_target_weight": False, "size_average": False, "q_dis": "gaussian"}),
    ("regression", {"type": "RLELoss", "use_target_weight": True, "q_dis": "strict"}),
    ("regression", {"type": "RLELoss", "use_target_weight": True, "residual": False}),
]

# The current side of the losses, in a process with MMPose 1.x's models (which import torchvision):
# each 0.x loss through mmfix's head rules, built by MMPose 1.x and called as 1.x's heads call it.
_CURRENT_LOSSES = r"""
import json, sys, numpy as np, torch
from mmfix._configs._mmpose import _heatmap_head, _regression_head
from mmfix._configs._report import Report
from mmpose.registry import MODELS
import mmpose.models  # noqa: F401 (registers the losses)
import mmfix._legacy_models.mmpose  # noqa: F401 (mmfix's 0.x copies, as a converted config imports them)

job = json.load(open(sys.argv[1]))
inputs = {name: torch.from_numpy(array) for name, array in np.load(job["inputs"]).items()}
out = {}
for index, (kind, row) in enumerate(job["losses"]):
    rle = row["type"] == "RLELoss"
    if kind in ("heatmap", "combined"):
        channels = 5 if kind == "heatmap" else 15
        head = {"type": "TopdownHeatmapSimpleHead", "in_channels": 8, "out_channels": channels, "loss_keypoint": dict(row)}
        loss = MODELS.build(_heatmap_head(head, {}, Report())[0]["loss"])
        output = inputs[f"{kind}s"].clone().requires_grad_(True)
        value = loss(output, inputs[f"{kind}_targets"], inputs["weight"])  # 1.x's heads: (N, K) weights
    else:
        head = {"type": "DeepposeRegressionHead", "in_channels": 8, "num_joints": 5, "loss_keypoint": dict(row), "out_sigma": rle}
        loss = MODELS.build(_regression_head(head, Report())["loss"])
        output = (inputs["output"] if rle else inputs["output"][..., :2]).clone().requires_grad_(True)
        weight = inputs["weight"][..., None]  # 1.x's regression heads: (N, K, 1)
        if rle:  # 0.x's seeded flow model; 1.x's RLEHead hands its loss the sigmas apart
            loss.flow_model.load_state_dict(torch.load(f"{job['flow']}{index}.pth", weights_only=True))
            value = loss(output[..., :2], output[..., 2:], inputs["target"], weight)
        else:
            value = loss(output, inputs["target"], weight)
    value.backward()
    out[f"value{index}"], out[f"grad{index}"] = value.detach().numpy(), output.grad.numpy()
np.savez(job["current"], **out)
"""


def test_0x_losses_compute_as_the_1x_ones_they_become(
    mmpose_runs: None, mmdet2_python: Path, torchvision_path: Path, tmp_path: Path
) -> None:
    """Each 0.x heatmap (and combined-target) and regression loss a top-down config names, converted by mmfix's rules and
    built by MMPose 1.x, on the same outputs (heatmaps; coordinates and RLE's sigmas), targets and
    visibility weights (and RLE's same flow model): the same value and gradient as 0.29's own."""
    rng = np.random.default_rng(2026)
    np.savez(
        tmp_path / "inputs.npz",
        output=rng.normal(0.5, 0.4, (3, 5, 4)).astype(np.float32),
        target=rng.uniform(0.0, 1.0, (3, 5, 2)).astype(np.float32),
        weight=(rng.random((3, 5)) < 0.7).astype(np.float32),
        heatmaps=rng.normal(0.2, 0.3, (3, 5, 8, 6)).astype(np.float32),
        heatmap_targets=rng.uniform(0.0, 1.0, (3, 5, 8, 6)).astype(np.float32),
        combineds=rng.normal(0.2, 0.3, (3, 15, 8, 6)).astype(np.float32),
        combined_targets=rng.uniform(-1.0, 1.0, (3, 15, 8, 6)).astype(np.float32),
    )
    job = {
        "toolbox": "mmpose-loss",
        "losses": LOSSES_0X,
        "seed": 11,
        "inputs": str(tmp_path / "inputs.npz"),
        "flow": str(tmp_path / "flow"),
        "out": str(tmp_path / "old.npz"),
        "current": str(tmp_path / "new.npz"),
    }
    predict_0x(mmdet2_python, [job], tmp_path)
    (tmp_path / "job.json").write_text(json.dumps(job))
    env = clean_env(PYTHONPATH=os.pathsep.join(filter(None, [str(torchvision_path), os.environ.get("PYTHONPATH")])))
    proc = run([sys.executable, "-c", _CURRENT_LOSSES, str(tmp_path / "job.json")], env=env, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    old, new = np.load(job["out"]), np.load(job["current"])
    for index, row in enumerate(LOSSES_0X):
        assert float(old[f"value{index}"]) != 0.0, row  # the inputs reach every term
        np.testing.assert_allclose(new[f"value{index}"], old[f"value{index}"], rtol=1e-5, err_msg=str(row))
        np.testing.assert_allclose(new[f"grad{index}"], old[f"grad{index}"], rtol=1e-5, atol=1e-7, err_msg=str(row))
