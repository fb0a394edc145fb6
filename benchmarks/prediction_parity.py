"""2.x models predict on 3.x what they predicted on 2.x: one official 2.28.2 config per family.

    python benchmarks/prediction_parity.py --mmdet2-python /tmp/mmdet2/bin/python [-j 2]
        [--only FAMILY …] [--out results.json]

For each family, real MMDetection 2.28.2 (the environment of ../shared/wheels/README.md) builds the
official config's model with 2.x's code (seeded ``init_weights()``, pretrained weights stripped),
saves its state dict and predicts on a seeded image (``inference_detector``). Then mmfix converts
the same config for MMDetection 3.3.0 (``init_detector`` reads the 2.x file), the 2.x state dict is
renamed where 3.x moved layers and loaded with ``load_state_dict(strict=True)``, and 3.3.0 predicts
on the same image. Same detections means: the same count, and each 2.x detection has a 3.x one
with its label, its box within 0.5 px and its score within 1e-3 (and, with masks, its mask equal
on all but 0.1 % of the image's pixels; Mask Scoring R-CNN's mask scores within 1e-3).

Each config is a small child of the official file, as a user's would be: the test scale is 384 x 256
where the test pipeline is the usual resize / normalise / pad (CPU time; the official normalisation
and pad divisor kept), and the score threshold is 0 (seeded random weights score every box near
its prior, below the official threshold). SSD's Xavier-initialised head saturates its softmax
(hundreds of scores round to 1.0, and which are kept is the order of ties): a small Normal head init
on the 2.x side spreads them apart. Prints one line per family and the count.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

#: family -> official 2.28.2 config (relative to its configs folder).
FAMILIES = {
    "atss": "atss/atss_r50_fpn_1x_coco.py",
    "autoassign": "autoassign/autoassign_r50_fpn_8x2_1x_coco.py",
    "cascade_mask_rcnn": "cascade_rcnn/cascade_mask_rcnn_r50_fpn_1x_coco.py",
    "cascade_rcnn": "cascade_rcnn/cascade_rcnn_r50_fpn_1x_coco.py",
    "centernet": "centernet/centernet_resnet18_140e_coco.py",
    "ddod": "ddod/ddod_r50_fpn_1x_coco.py",
    "deformable_detr": "deformable_detr/deformable_detr_r50_16x2_50e_coco.py",
    "detr": "detr/detr_r50_8x2_150e_coco.py",
    "double_heads": "double_heads/dh_faster_rcnn_r50_fpn_1x_coco.py",
    "dynamic_rcnn": "dynamic_rcnn/dynamic_rcnn_r50_fpn_1x_coco.py",
    "faster_rcnn": "faster_rcnn/faster_rcnn_r50_fpn_1x_coco.py",
    "fcos": "fcos/fcos_r50_caffe_fpn_gn-head_1x_coco.py",
    "foveabox": "foveabox/fovea_r50_fpn_4x4_1x_coco.py",
    "free_anchor": "free_anchor/retinanet_free_anchor_r50_fpn_1x_coco.py",
    "fsaf": "fsaf/fsaf_r50_fpn_1x_coco.py",
    "gfl": "gfl/gfl_r50_fpn_1x_coco.py",
    "grid_rcnn": "grid_rcnn/grid_rcnn_r50_fpn_gn-head_2x_coco.py",
    "guided_anchoring": "guided_anchoring/ga_faster_r50_caffe_fpn_1x_coco.py",
    "htc": "htc/htc_without_semantic_r50_fpn_1x_coco.py",
    "libra_rcnn": "libra_rcnn/libra_faster_rcnn_r50_fpn_1x_coco.py",
    "mask_rcnn": "mask_rcnn/mask_rcnn_r50_fpn_1x_coco.py",
    "ms_rcnn": "ms_rcnn/ms_rcnn_r50_fpn_1x_coco.py",
    "paa": "paa/paa_r50_fpn_1x_coco.py",
    "panoptic_fpn": "panoptic_fpn/panoptic_fpn_r50_fpn_1x_coco.py",
    "pisa": "pisa/pisa_retinanet_r50_fpn_1x_coco.py",
    "point_rend": "point_rend/point_rend_r50_caffe_fpn_mstrain_1x_coco.py",
    "queryinst": "queryinst/queryinst_r50_fpn_1x_coco.py",
    "reppoints": "reppoints/reppoints_moment_r50_fpn_1x_coco.py",
    "retinanet": "retinanet/retinanet_r50_fpn_1x_coco.py",
    "sabl": "sabl/sabl_retinanet_r50_fpn_1x_coco.py",
    "scnet": "scnet/scnet_r50_fpn_1x_coco.py",
    "solo": "solo/solo_r50_fpn_1x_coco.py",
    "solov2": "solov2/solov2_r50_fpn_1x_coco.py",
    "sparse_rcnn": "sparse_rcnn/sparse_rcnn_r50_fpn_1x_coco.py",
    "ssd": "ssd/ssd300_coco.py",
    "tood": "tood/tood_r50_fpn_1x_coco.py",
    "vfnet": "vfnet/vfnet_r50_fpn_1x_coco.py",
    "yolact": "yolact/yolact_r50_1x8_coco.py",
    "yolof": "yolof/yolof_r50_c5_8x8_1x_coco.py",
    "yolov3": "yolo/yolov3_d53_320_273e_coco.py",
    "yolox": "yolox/yolox_tiny_8x8_300e_coco.py",
}

#: Families whose seeded random weights are chaotic (a 1e-6 relative change of the weights moves
#: Sparse R-CNN's boxes by thousands of pixels: six refinement stages of random box deltas): their
#: box regression layers are scaled down on the 2.x side, so both sides compare a stable model.
#: YOLOv3's random prediction convolutions overflow exp() into infinite boxes with saturated scores.
SCALE_PARAMS = {
    "sparse_rcnn": ("fc_reg=0.01",),
    "queryinst": ("fc_reg=0.01",),
    "yolov3": (r"bbox_head\.convs_pred=0.01",),
}
#: A larger test scale where 2.x's CPU kernels refuse the small one (mmcv-full 1.7.2's deformable
#: convolution needs every level at least as large as its kernel).
TEST_SCALES = {"ddod": (1333, 800)}

#: 3.3.0's LoadPanopticAnnotations imports panopticapi (installed from git only) when it is built,
#: and init_detector builds the test set's pipeline, which the converted config gives the training
#: set's annotation loading: a COCO-style training loader keeps panopticapi out (neither side's
#: prediction reads a training pipeline; tests/integration/test_rebuilt_families_maskformer.py).
PANOPTIC = {"panoptic_fpn"}
_COCO_STYLE_TRAIN = """
data['train'] = dict(pipeline=[dict(type='LoadImageFromFile'),
                               dict(type='LoadAnnotations', with_bbox=True, with_mask=True)])
"""

#: The usual test transforms inside MultiScaleFlipAug: such a pipeline is replaced by the small one.
_USUAL = ["Resize", "RandomFlip", "Normalize", "Pad", "ImageToTensor", "Collect"]


#: Test settings that give seeded random weights detections to compare: SOLO's scores of random
#: weights (class prior 0.01 times a mask score near 0.5) all fall below its filter_thr of 0.05.
TEST_CFG = {"solo": "filter_thr=0.0", "solov2": "filter_thr=0.0"}


def child_text(official: Path, family: str = "") -> tuple[str, str | None, int | None]:
    """What a user's child config of ``official`` overrides: (overrides, normalisation, pad divisor)."""
    from mmengine.config import Config

    cfg = Config.fromfile(str(official))  # plain MMEngine (mmfix is not imported here): a 2.x dict
    model = cfg.model
    test_cfg = model.get("test_cfg") or {}
    overrides = []
    if "rcnn" in test_cfg and isinstance(test_cfg["rcnn"], dict) and "score_thr" in test_cfg["rcnn"]:
        overrides.append("test_cfg=dict(rcnn=dict(score_thr=0.0))")
    elif "score_thr" in test_cfg:
        extra = f", {TEST_CFG[family]}" if family in TEST_CFG else ""
        overrides.append(f"test_cfg=dict(score_thr=0.0{extra})")
    if model.get("bbox_head", {}).get("type") == "SSDHead":
        overrides.append("bbox_head=dict(init_cfg=dict(type='Normal', layer='Conv2d', std=0.001))")
    text = f"model = dict({', '.join(overrides)})" if overrides else ""
    pipeline = cfg.get("data", {}).get("test", {}).get("pipeline", [])
    aug = next((t for t in pipeline if t.get("type") == "MultiScaleFlipAug"), None)
    inner = aug.get("transforms", []) if aug else []
    if not aug or [t["type"] for t in inner] != _USUAL or aug.get("flip"):
        return text, None, None  # its own test pipeline (SSD, YOLO, CenterNet, DETR's …)
    norm = next(t for t in inner if t["type"] == "Normalize")
    pad = next(t for t in inner if t["type"] == "Pad")
    if "size_divisor" not in pad:
        return text, None, None
    described = f"dict(mean={list(norm['mean'])}, std={list(norm['std'])}, to_rgb={bool(norm.get('to_rgb', True))})"
    return text, described, int(pad["size_divisor"])


def run_family(name: str, configs: Path, python: Path, work: Path) -> dict[str, Any]:
    import numpy as np

    from mmdet2_support import assert_same_detections, child_config, predict_2x, predict_3x, seeded_image

    folder = work / name
    folder.mkdir(parents=True)
    start = time.perf_counter()
    official = configs / FAMILIES[name]
    overrides, norm, pad = child_text(official, name)
    scales = TEST_SCALES.get(name, (384, 256))
    config = child_config(folder / "config.py", official, overrides, norm, pad, scales=scales)
    if name in PANOPTIC:
        with config.open("a") as f:
            f.write(_COCO_STYLE_TRAIN)
    image = folder / "image.npy"
    np.save(image, seeded_image(3))
    for side in ("2.28.2", "3.3.0"):
        try:
            if side == "2.28.2":
                expected = predict_2x(python, config, image, folder / "2x", scale_params=SCALE_PARAMS.get(name, ()))
            else:
                actual, load = predict_3x(config, image, folder / "2x" / "state_dict.pth", folder / "3x")
        except AssertionError as exc:
            last = [x for x in str(exc).splitlines() if x.strip()][-1]
            return {"family": name, "ok": False, "status": f"{side} fails", "why": last[:300]}
    result: dict[str, Any] = {
        "family": name,
        "detections": len(expected.get("scores", [])),
        "outputs": sorted(expected),
        "renamed": load.get("renamed", {}),
        "seconds": round(time.perf_counter() - start, 1),
    }
    if "panoptic" in expected:  # COCO panoptic's label 133 is VOID: the pixels no segment took
        result["panoptic_pixels_in_segments"] = round(float((expected["panoptic"] != 133).float().mean()), 3)
    if "panoptic" not in expected and len(expected.get("scores", [])) == len(actual.get("scores", [])) == 0:
        # both sides agree on nothing: seeded weights give this family no detection to compare
        result.update(ok=False, status="both empty", why="no detections on either side: nothing compared")
        return result
    try:
        assert_same_detections(expected, actual, atol=0.5, score_atol=1e-3)
    except AssertionError as exc:
        result.update(ok=False, status="DIFFERENT", why=str(exc).splitlines()[0][:300])
    else:
        result.update(ok=True, status="same")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--mmdet2-python",
        default=os.path.join(os.environ.get("MMFIX_MMDET2_ENV", "/tmp/mmdet2"), "bin", "python"),
        help="the real MMDetection 2.28.2 environment's python (default: $MMFIX_MMDET2_ENV/bin/python)",
    )
    parser.add_argument("--configs", help="the 2.28.2 configs folder (default: the 2.x environment's own)")
    parser.add_argument("--only", nargs="*", default=[], help="families to run (default: all)")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="families at once (each runs two processes)")
    parser.add_argument("--out", help="write every result as JSON")
    args = parser.parse_args()
    python = Path(args.mmdet2_python)
    if not python.exists():
        print(f"no MMDetection 2.28.2 python at {python}: see ../shared/wheels/README.md", file=sys.stderr)
        return 2
    configs = Path(args.configs) if args.configs else _configs_of(python)
    names = [n for n in FAMILIES if not args.only or n in args.only]
    work = Path(tempfile.mkdtemp(prefix="mmfix-parity-"))
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_family, name, configs, python, work): name for name in names}
        for future in concurrent.futures.as_completed(futures):
            result = future.result()
            results.append(result)
            detail = f"{result.get('detections', '?')} detections" if result["ok"] else result["why"]
            if result["ok"] and "panoptic_pixels_in_segments" in result:
                detail += f", panoptic map ({result['panoptic_pixels_in_segments']:.0%} of pixels in segments)"
            print(f"{result['family']:<20} {result['status']:<14} {detail}", flush=True)
    same = sum(r["ok"] for r in results)
    compared = sum(r["status"] in ("same", "DIFFERENT") for r in results)
    print(
        f"\n{same} of {len(results)} families predict on MMDetection 3.3.0 through mmfix what they predict on "
        f"2.28.2 ({compared} compared; the others above say why not)"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(sorted(results, key=lambda r: r["family"]), indent=1))
    return 0 if same == len(results) else 1


def _configs_of(python: Path) -> Path:
    import subprocess

    found = subprocess.run(
        [str(python), "-c", "import os, mmdet; print(os.path.dirname(mmdet.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(found.stdout.strip()) / ".mim" / "configs"


if __name__ == "__main__":
    sys.exit(main())
