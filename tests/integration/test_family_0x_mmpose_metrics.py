"""MMPose 0.x evaluation metrics on MMPose 1.3.2 through mmfix: the numbers 0.x reported.

A 0.x config's ``evaluation.metric`` (PCK, PCKh, AUC, EPE, NME; MPII's and MPII-TRB's PCKh; JHMDB's PCK and tPCK)
converts to 1.x evaluators (mmfix/_configs/_mmpose.py). For a spread of MMPose 0.29.0's official
configs — one per way 0.x measured — a small data set in the config's own annotation layout
(``family0x_support.write_keypoint_eval_data``: boxes that cross the image's edges, unlabelled
keypoints; MPII's JSON and ``mpii_gt_val.mat``) and keypoints near its ground truth are scored
twice: by the real MMPose 0.29.0's own ``dataset.evaluate`` (the config's test data set, in the 0.x
environment of tests/family0x_support.py), and on the current side by MMPose 1.3.2's data set and
the converted config's ``test_evaluator``, loaded through mmfix as MMPose 1.x's tools load it. Every
value 0.x reported must come out equal, under the key 1.x gives it (the one ``save_best`` names).

Where 0.x normalised otherwise than 1.x's official configs (PCK's box as annotated where 1.x clips
it to the image, JHMDB's 1-based clipping, AFLW's ``box_size``), the converted config names
mmfix's copies of 1.x's metrics; the 1.x official config's evaluator is scored on the same data as
a control and must differ, so that the copy is shown to matter.

In the version matrix's ``mmpose`` cell (numpy 1 for MMPose 1.x's xtcocotools), by name.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import clean_env, run
from family0x_support import configs_0x, predict_0x, write_keypoint_eval_data
from toolbox_support import tools_dir

pytestmark = pytest.mark.slow

TD = "2d_kpt_sview_rgb_img/topdown_heatmap"
PCK_AUC_EPE = [{"type": "PCKAccuracy", "thr": 0.2}, {"type": "AUC"}, {"type": "EPE"}]
#: (0.29 config, keypoints, layout, crop size, the 1.x official config's evaluator where the
#: converted one is mmfix's copy: it must score otherwise on the same data)
CASES = {
    "horse10-pck": (
        f"animal/{TD}/horse10/res50_horse10_256x256-split1.py",
        22,
        "coco",
        None,
        [{"type": "PCKAccuracy", "thr": 0.2}],
    ),
    "fly-pck-auc-epe": (f"animal/{TD}/fly/res50_fly_192x192.py", 32, "coco", 192, None),
    "locust-pck-auc-epe": (f"animal/{TD}/locust/res50_locust_160x160.py", 35, "coco", 160, None),
    "onehand10k-pck-auc-epe": (f"hand/{TD}/onehand10k/res50_onehand10k_256x256.py", 21, "coco", None, PCK_AUC_EPE),
    "panoptic-pckh-auc-epe": (f"hand/{TD}/panoptic2d/res50_panoptic2d_256x256.py", 21, "coco", None, None),
    "deepfashion-pck": (f"fashion/{TD}/deepfashion/res50_deepfashion_upper_256x192.py", 6, "coco", None, None),
    "300w-nme": (f"face/{TD}/300w/res50_300w_256x256.py", 68, "coco", None, None),
    "aflw-nme": (
        f"face/{TD}/aflw/res50_aflw_256x256.py",
        19,
        "coco",
        None,
        {"type": "NME", "norm_mode": "use_norm_item", "norm_item": "bbox_size"},
    ),
    "mpii-pckh": (f"body/{TD}/mpii/res50_mpii_256x256.py", 16, "mpii", None, None),
    # MPII-TRB's own evaluate (pooled PCKh of the skeleton, the contour and all): mmfix's MpiiTrbPCKh0x
    "mpii-trb-pckh": (f"body/{TD}/mpii_trb/res50_mpii_trb_256x256.py", 40, "mpii_trb", None, None),
    "jhmdb-pck-tpck": (
        f"body/{TD}/jhmdb/res50_2deconv_jhmdb_sub1_256x256.py",
        15,
        "jhmdb",
        None,
        [{"type": "JhmdbPCKAccuracy", "thr": 0.2, "norm_item": ["bbox", "torso"]}],
    ),
}
#: 0.x's result keys as 1.x names them (the rest keep their names)
RENAMED = {
    "mpii-pckh": {"PCKh": "PCK", "PCKh@0.1": "PCK@0.1", "Head": "Head PCK", "Shoulder": "Shoulder PCK"},
    "jhmdb-pck-tpck": {"Mean PCK": "PCK", "Mean tPCK": "tPCK"},
}
#: 0.x keys 1.x's MpiiPCKAccuracy names otherwise still (per joint pair): compared by value
MPII_PAIRS = {"Elbow": "Elbow PCK", "Wrist": "Wrist PCK", "Hip": "Hip PCK", "Knee": "Knee PCK", "Ankle": "Ankle PCK"}

# The current side, in a process of its own with mmfix active as a user's script has it: the 0.x
# config through MMEngine's Config (converted), the converted test data set with the case's files,
# each sample through its test pipeline and the converted test_evaluator with the given keypoints
# as the model's; then the 1.x official evaluator on the same samples (the control).
_CURRENT = r"""
import json, os, sys, numpy as np
import mmfix
from mmengine.config import Config
from mmengine.evaluator import Evaluator
from mmengine.registry import init_default_scope
from mmengine.structures import InstanceData
from mmengine.utils import import_modules_from_strings

def score(job):
    cfg = Config.fromfile(job["config"])
    init_default_scope(cfg.default_scope)
    import_modules_from_strings(**cfg.get("custom_imports", {"imports": []}))
    from mmpose.registry import DATASETS
    dataset_cfg = cfg.test_dataloader.dataset
    dataset_cfg.ann_file = job["ann_file"]
    dataset_cfg.data_prefix = dict(img=job["img_prefix"])
    if "headbox_file" in dataset_cfg:
        dataset_cfg.headbox_file = os.path.join(os.path.dirname(job["ann_file"]), "mpii_gt_val.mat")
    dataset = DATASETS.build(dataset_cfg)
    predictions = np.load(job["predictions"])
    samples = []
    for index in range(len(dataset)):
        sample = dataset[index]["data_samples"]
        points = predictions[os.path.basename(sample.img_path)]
        sample.pred_instances = InstanceData(keypoints=points[None], keypoint_scores=np.ones((1, len(points))))
        samples.append(sample)
    out = {"evaluator": cfg.test_evaluator, "save_best": cfg.default_hooks.checkpoint.get("save_best")}
    for name, evaluator_cfg in (("converted", cfg.test_evaluator), ("official", job["official"])):
        if evaluator_cfg is None:
            continue
        evaluator = Evaluator(evaluator_cfg)
        evaluator.dataset_meta = dataset.metainfo
        for sample in samples:
            evaluator.process(data_samples=[sample.clone()], data_batch=None)
        out[name] = {key: float(value) for key, value in evaluator.evaluate(len(samples)).items()}
    if job.get("boxes"):  # the boxes the data set read (center, scale in pixels)
        infos = [dataset.get_data_info(index) for index in range(len(dataset))]
        out["boxes"] = [
            {"file": os.path.basename(info["img_path"]), "center": info["bbox_center"][0].tolist(),
             "scale": info["bbox_scale"][0].tolist()}
            for info in infos
        ]
    return out


for job in json.load(open(sys.argv[1])):
    try:
        out = score(job)
    except Exception:
        import traceback
        out = {"error": traceback.format_exc()[-3000:]}
    json.dump(out, open(job["out"], "w"))
"""


@pytest.fixture(scope="module")
def scored(mmdet2_python: Path, torchvision_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Each case's 0.x values (one 0.x process for all) and the current side's (one process)."""
    tools_dir("mmpose")  # MMPose 1.x importable, or a skip (a failure under REQUIRE_TOOLBOXES)
    folder = tmp_path_factory.mktemp("pose0x-metrics")
    configs = configs_0x(mmdet2_python, "mmpose")
    jobs_0x, jobs_current = [], []
    for seed, (case, (config, keypoints, layout, crop, official)) in enumerate(CASES.items()):
        root = folder / case
        ann_file, images, predictions = write_keypoint_eval_data(root, layout, keypoints, seed=seed, crop=crop)
        boxes = layout == "mpii_trb"  # 0.29 read its boxes otherwise than 1.x: compared too
        if boxes:  # and skipped an annotation without keypoints (an unlabelled second person) only
            data = json.loads(ann_file.read_text())
            annotations = data["annotations"]
            annotations[1]["iscrowd"] = 1  # fields 0.29 never read (1.x's loader drops or needs them)
            annotations[2]["num_joints"] = 0
            del annotations[3]["iscrowd"], annotations[4]["num_joints"]
            annotations.append({**annotations[0], "id": 999, "keypoints": [0] * (3 * keypoints)})
            ann_file.write_text(json.dumps(data))
        common = {"config": str(configs / config), "ann_file": str(ann_file), "predictions": str(predictions)}
        jobs_0x.append(
            {
                "toolbox": "mmpose-evaluate",
                **common,
                "img_prefix": f"{images}/",
                "res_folder": str(root),
                "out": str(root / "0x.json"),
                **({"boxes_out": str(root / "0x-boxes.json")} if boxes else {}),
            }
        )
        jobs_current.append(
            {**common, "img_prefix": str(images), "official": official, "out": str(root / "1x.json"), "boxes": boxes}
        )
    predict_0x(mmdet2_python, jobs_0x, folder)
    listing = folder / "current.json"
    listing.write_text(json.dumps(jobs_current))
    env = clean_env(PYTHONPATH=os.pathsep.join(filter(None, [str(torchvision_path), os.environ.get("PYTHONPATH")])))
    proc = run([sys.executable, "-c", _CURRENT, str(listing)], env=env, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    scored = {
        case: {
            "0x": json.loads((folder / case / "0x.json").read_text()),
            "1x": json.loads((folder / case / "1x.json").read_text()),
        }
        for case in CASES
    }
    scored["mpii-trb-pckh"]["0x-boxes"] = json.loads((folder / "mpii-trb-pckh" / "0x-boxes.json").read_text())
    scored["mpii-trb-pckh"]["ann_file"] = json.loads((folder / "mpii-trb-pckh" / "keypoints.json").read_text())
    return scored


def test_mpii_trb_boxes_are_read_as_0x_read_them(scored: dict[str, dict]) -> None:
    """0.29's TopDownMpiiTrbDataset took an annotation's ``scale`` as a box of ``image_size / scale``
    pixels and skipped annotations without keypoints; the converted config's ``MpiiTrbDataset0x``
    reads the same boxes (the crops the model sees) and instances — stock 1.x's ``200 x scale`` not."""
    old, new = scored["mpii-trb-pckh"]["0x-boxes"], scored["mpii-trb-pckh"]["1x"]
    assert "error" not in new, new.get("error")
    annotations = scored["mpii-trb-pckh"]["ann_file"]["annotations"]
    assert len(old) == len(annotations) - 1 == len(new["boxes"])  # the keypoint-less one skipped
    old, current = sorted(old, key=lambda b: b["file"]), sorted(new["boxes"], key=lambda b: b["file"])
    for box_0x, box in zip(old, current):
        assert box["file"] == box_0x["file"]
        assert box["center"] == pytest.approx(box_0x["center"], rel=1e-6)
        assert box["scale"] == pytest.approx(box_0x["scale"], rel=1e-6)
    files = {image["id"]: image["file_name"] for image in scored["mpii-trb-pckh"]["ann_file"]["images"]}
    read = {box["file"]: box["scale"][0] for box in current}
    for annotation in annotations[:-1]:  # what stock 1.x reads: other crops
        assert read[files[annotation["image_id"]]] != pytest.approx(200.0 * annotation["scale"], rel=1e-3)


@pytest.mark.parametrize("case", list(CASES))
def test_0x_metrics_score_on_mmpose_1x_as_on_0x(scored: dict[str, dict], case: str) -> None:
    old, new = scored[case]["0x"], scored[case]["1x"]
    assert "error" not in new, new.get("error")
    renamed = {**RENAMED.get(case, {}), **(MPII_PAIRS if case == "mpii-pckh" else {})}
    assert old, case
    for key, value in old.items():
        current = renamed.get(key, key)
        assert current in new["converted"], (case, key, sorted(new["converted"]))
        assert new["converted"][current] == pytest.approx(value, rel=1e-6, abs=1e-9), (case, key, old, new)
    # save_best names a key the converted evaluators report
    assert new["save_best"] in new["converted"], (case, new["save_best"], sorted(new["converted"]))
    # the values lie between the extremes (thresholds split the synthetic errors): a real comparison
    for key in ("PCK", "PCKh", "AUC", "tPCK", "Skeleton_acc", "Contour_acc"):
        if key in new["converted"]:
            assert 0.05 < new["converted"][key] < 95, (case, key, new["converted"][key])


@pytest.mark.parametrize("case", [case for case, row in CASES.items() if row[4] is not None])
def test_1x_official_evaluators_score_otherwise_where_mmfix_keeps_0x_normalisation(
    scored: dict[str, dict], case: str
) -> None:
    new = scored[case]["1x"]
    assert "error" not in new, new.get("error")
    assert any(
        "0x" in e["type"] for e in (new["evaluator"] if isinstance(new["evaluator"], list) else [new["evaluator"]])
    )
    shared = set(new["official"]) & set(new["converted"])
    assert shared, (case, new)
    assert any(new["official"][key] != pytest.approx(new["converted"][key], rel=1e-6) for key in shared), (case, new)
