"""Every official MMPose 0.29.0 config through mmfix's MMPose rules (conversion only, no MMPose 1.x).

mmfix converts MMPose 0.x's top-down and 3D lifting configs so far (tests/integration/test_family_0x_mmpose.py
and test_family_0x_mmpose_lifting.py show them predicting as 0.x did); every other 0.x config must stop with one
``ConfigConversionError`` that names what is not converted yet, or what MMPose 1.x has no
counterpart for at all — never another exception, never a half conversion. The configs are the real 0.29.0 package's (MMDetection 2.28.2's environment,
tests/family0x_support.py), loaded by stock MMEngine as the toolbox's loading path reads them.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from family0x_support import configs_0x
from mmfix._configs import ConfigConversionError, convert

pytestmark = pytest.mark.slow

#: the official configs of MMPose 0.29.0 (its configs/ less _base_)
OFFICIAL = 416
#: how many convert today (2026-12-06: top-down heatmap models with COCO-style mAP, then PCK, PCKh,
#: AUC, EPE, NME, then heads that merged feature maps and ViPNAS's, then DeepPose's regression heads, UDP, AdaptiveWing and multi-stage heads;
#: 2026-12-07: MSPN's and RSN's multi-stage multi-unit heads and Megvii's targets, the photometric
#: distortion, UDP's combined targets, MPII-TRB with 0.29's boxes and PCKh, Human3.6M's lifting
#: models): a fall is a regression
CONVERTED = 339
#: official configs of what MMPose 1.x has no counterpart for (NO_1X), refused as such
NOT_IN_1X = 30
#: the 1.x evaluators converted configs name (mmfix's 0x copies where 0.x normalised otherwise)
METRICS = {
    "CocoMetric",
    "PCKAccuracy",
    "PCKAccuracy0x",
    "MpiiPCKAccuracy",
    "JhmdbPCKAccuracy0x",
    "AUC",
    "EPE",
    "NME",
    "NME0x",
    "MpiiTrbPCKh0x",
}
#: the 3D lifting models' (PoseLifter) evaluator: 1.x's MPJPE with 0.29's per-action errors
LIFTING_METRICS = {"MPJPE0x"}


def test_every_official_0x_config_converts_or_says_what_is_not_converted_yet(mmdet2_python: Path) -> None:
    from mmengine.config import Config

    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)  # stock: the merged 0.x dict
    files = sorted(p for p in configs_0x(mmdet2_python, "mmpose").rglob("*.py") if "_base_" not in p.parts)
    assert len(files) == OFFICIAL
    converted, reasons, absent = [], Counter(), Counter()
    for path in files:
        old = fromfile(str(path)).to_dict()
        try:
            out, _ = convert(old, "mmpose")
        except ConfigConversionError as exc:
            message = str(exc)
            assert "\n" not in message and "MMDetection" not in message, (path, message)
            gone = re.search(r"MMPose 1\.x has no (.+?) at all, so this is not a conversion to wait for", message)
            if gone:  # nothing in MMPose 1.x to convert to
                absent[gone.group(1)] += 1
                continue
            found = re.search(r"so far; (.+?) is not converted yet", message)
            assert found, (path, message)
            reasons[found.group(1).split(" '")[0]] += 1
            continue
        converted.append(path)
        assert out["default_scope"] == "mmpose", path
        if old["model"]["type"] == "PoseLifter":
            _check_lifting(path, old, out)
            continue
        assert out["model"]["type"] == "TopdownPoseEstimator", path
        head = out["model"]["head"]
        assert head["type"] in ("HeatmapHead", "ViPNASHead", "CPMHead", "MSPNHead", "RegressionHead", "RLEHead"), path
        if head["type"] == "MSPNHead":  # Megvii's targets, one per level; the decoder blurs by modulate_kernel
            assert [e["type"] for e in out["codec"]] == ["MegviiHeatmap"] * (max(head["level_indices"]) + 1), path
            assert head["decoder"]["type"] == "MegviiHeatmap", path
        else:
            assert head["decoder"] == out["codec"], path
        for split in ("train", "val", "test"):
            assert out[f"{split}_dataloader"]["dataset"]["data_mode"] == "topdown", (path, split)
        evaluators = out["val_evaluator"] if isinstance(out["val_evaluator"], list) else [out["val_evaluator"]]
        kinds = {evaluator["type"] for evaluator in evaluators}
        assert kinds <= METRICS and (kinds == {"CocoMetric"}) == (old["evaluation"]["metric"] in ("mAP", ["mAP"])), path
        best = out.get("default_hooks", {}).get("checkpoint", {}).get("save_best")
        if best is not None:  # a key the metrics report, with the rule 0.x inferred
            assert best.startswith("coco/") == (kinds == {"CocoMetric"}), (path, best)
            assert out["default_hooks"]["checkpoint"]["rule"] == ("less" if best in ("NME", "EPE") else "greater")
        assert not any(key in out for key in ("data", "lr_config", "total_epochs", "evaluation")), path
    assert len(converted) >= CONVERTED, (len(converted), reasons.most_common())
    # gesture (4), VoxelPose (5), HMR (1), HigherHRNet (18), Hourglass-AE (1), TCFormer (1): MMPose 1.x
    # has none (TCFormer converted, and 1.x's registry refused it: benchmarks/family_zoo.py found it)
    assert sum(absent.values()) == NOT_IN_1X and len(absent) == 6, absent.most_common()
    # what stops, stops for the kinds of config the rules do not cover yet (not for a slip)
    assert reasons and all(
        any(
            word in reason
            for word in ("metric", "dataset", "transform", "head", "encoding", "loss", "model", "lifting")
        )
        for reason in reasons
    ), reasons.most_common()


def _check_lifting(path: Path, old: dict, out: dict) -> None:
    """A converted 3D lifting config: 1.x's lifter, its head decoding with the pipelines' codec, the
    data sets' sequences as 0.x's data_cfg set them, 0.29's metrics and best-checkpoint rule."""
    model = out["model"]
    assert model["type"] == "PoseLifter" and model["head"]["type"] == "TemporalRegressionHead", path
    assert model["head"]["decoder"] == out["codec"], path
    assert out["codec"]["type"] in ("ImagePoseLifting", "VideoPoseLifting"), path
    for split in ("train", "val", "test"):
        dataset = out[f"{split}_dataloader"]["dataset"]
        data_cfg = old["data"][split]["data_cfg"]
        assert dataset["type"] == "Human36mDataset0x" and dataset["seq_len"] == data_cfg["seq_len"], (path, split)
        assert [t["type"] for t in dataset["pipeline"]][-2:] == ["GenerateTarget", "PackPoseInputs"], (path, split)
        assert dataset["pipeline"][-2]["encoder"] == out["codec"], (path, split)
    kinds = {evaluator["type"] for evaluator in out["val_evaluator"]}
    assert kinds == LIFTING_METRICS, path
    assert out["default_hooks"]["checkpoint"]["rule"] == "less", path
    assert not any(key in out for key in ("data", "lr_config", "total_epochs", "evaluation")), path
