"""MMPose 0.x 3D pose lifting configs and checkpoints on MMPose 1.3.2 through mmfix: the same numbers.

For MMPose 0.29.0's Human3.6M lifting zoo (SimpleBaseline3D: one frame, its input and target
normalised per joint, its root removed; VideoPose3D: 1, 27 and 243 frames, the 2D input
normalised by the image size, from the ground truth and from CPN's detections; the 81-frame config
differs from these in its length only), the real MMPose
0.29.0 (tests/family0x_support.py) runs each official config from a working folder holding a
tiny Human3.6M (``write_h36m_data``): the model as it initialises itself from a seed, the seeded
model saved as a 0.x checkpoint, the test set through the config's pipeline and model and 0.29's
own ``evaluate``, the training set's samples with its random flip from a seed. On the current
side, the same official 0.x config file is loaded with mmfix active in MMPose 1.3.2's process: the
model must initialise to 0.29's tensors from the same seed, load the 0.x checkpoint strictly,
feed the model 0.29's inputs, predict 0.29's 3D keypoints, and ``Runner.test`` (tools/test.py's
path) must report 0.29's metrics, every key (the per-action errors included); the training set
must draw 0.29's flips (the test data's cameras differ in width: a flip about a fixed column would
show) and give 0.29's inputs and targets; the converted data set must hold a fraction of what
1.x's own holds (its frames, not every sequence's arrays); and the 27-frame config trains an epoch
from scratch with tools/train.py's Runner, evaluated and its best checkpoint kept by 0.29's rule.

These run in the version matrix's ``mmpose`` cell (MMPose 1.x's data sets import xtcocotools,
whose wheels need numpy 1), and skip elsewhere unless REQUIRE_TOOLBOXES names mmpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from family0x_support import configs_0x, predict_0x, predict_current, write_h36m_data

pytestmark = pytest.mark.slow  # in the version matrix's `mmpose` cell (scripts/matrix.sh), by name

LIFT = "body/3d_kpt_sview_rgb_img/pose_lift/h36m"
VIDEO = "body/3d_kpt_sview_rgb_vid/video_pose_lift/h36m"
#: configs under MMPose 0.29.0's configs/
CASES = [
    f"{LIFT}/simplebaseline3d_h36m.py",
    f"{VIDEO}/videopose3d_h36m_1frame_fullconv_supervised_cpn_ft.py",
    f"{VIDEO}/videopose3d_h36m_27frames_fullconv_supervised.py",
    f"{VIDEO}/videopose3d_h36m_243frames_fullconv_supervised.py",
    f"{VIDEO}/videopose3d_h36m_243frames_fullconv_supervised_cpn_ft.py",
]

# The current side, in a process of its own with mmfix active as a user's script has it (the test
# process stays stock), from the data's working folder as 0.x ran.
_CURRENT = r"""
import copy, json, os, sys, numpy as np, torch
import mmfix
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from mmengine.registry import init_default_scope
from mmengine.runner import Runner, load_checkpoint

# MMEngine formats the whole config with yapf for each log, dump, visualizer and checkpoint save:
# 3-4 s of CPU a call for these configs (about 50 KB of text, as the stock 0.x config's own: the
# data sets' metadata written out four times), 27 calls here. The same text, once per content.
_format = Config.pretty_text.fget
_formatted = {}
def _pretty_text(self):
    key = repr(self._cfg_dict.to_dict())
    if key not in _formatted:
        _formatted[key] = _format(self)
    return _formatted[key]
Config.pretty_text = property(_pretty_text)

jobs = json.load(open(sys.argv[1]))
for job in jobs:
    report = {}
    try:
        os.chdir(job["cwd"])
        cfg = Config.fromfile(job["config"])
        init_default_scope("mmpose")
        from mmpose.registry import DATASETS, MODELS
        report["scope"] = cfg.get("default_scope")
        report["types"] = [cfg.model.type, cfg.model.backbone.type, cfg.model.head.type,
                           cfg.model.head.decoder.type, cfg.test_dataloader.dataset.type]
        torch.manual_seed(job["seed"])
        model = MODELS.build(cfg.model)
        model.init_weights()
        # copies: loading the checkpoint below writes into these tensors
        out = {f"init/{k}": v.detach().numpy().copy() for k, v in model.state_dict().items() if v.is_floating_point()}
        saved = torch.load(job["checkpoint"], map_location="cpu", weights_only=True)["state_dict"]
        missing, unexpected = model.load_state_dict(saved, strict=False)  # 1.x's own hook renames the head
        report["missing"], report["unexpected"] = list(missing), list(unexpected)
        load_checkpoint(model, job["checkpoint"], strict=True, logger="silent")
        model.eval()
        dataset = DATASETS.build(cfg.test_dataloader.dataset)
        samples = [dataset[i] for i in range(len(dataset))]
        preds = []
        with torch.no_grad():
            for start in range(0, len(samples), 16):
                batch = model.data_preprocessor(pseudo_collate(samples[start:start + 16]), False)
                preds += [s.pred_instances.keypoints[0] for s in model(**batch, mode="predict")]
        out["input"] = np.stack([s["inputs"].numpy() for s in samples])
        out["preds"] = np.stack(preds)
        report["paths"] = [str(s["data_samples"].metainfo["target_img_path"][0]) for s in samples]
        # tools/test.py's path: the Runner, the 0.x checkpoint, the config's evaluators (and N-MPJPE)
        test = copy.deepcopy(cfg)
        test.work_dir = job["work_dir"]
        test.load_from = job["checkpoint"]
        test.test_evaluator = list(test.test_evaluator) + [dict(type="MPJPE0x", mode="n-mpjpe")]
        # in this process (0.x's workers_per_gpu forked workers whose shutdown cost ~2 s each)
        test.test_dataloader.num_workers, test.test_dataloader.persistent_workers = 0, False
        report["metrics"] = {k: float(v) for k, v in Runner.from_cfg(test).test().items()}
        np.random.seed(job["flip_seed"])
        train = DATASETS.build(cfg.train_dataloader.dataset)
        drawn = [train[i] for i in range(len(train))]
        out["train_input"] = np.stack([s["inputs"].numpy() for s in drawn])
        out["train_target"] = np.stack([s["data_samples"].gt_instance_labels.lifting_target_label.numpy()[0] for s in drawn])
        report["train_paths"] = [str(s["data_samples"].metainfo["target_img_path"][0]) for s in drawn]
        unflipped = copy.deepcopy(cfg.train_dataloader.dataset)
        unflipped.pipeline = [t for t in unflipped.pipeline if not t["type"].startswith("RandomFlip")]
        plain = DATASETS.build(unflipped)
        out["train_plain"] = np.stack([plain[i]["inputs"].numpy() for i in range(len(plain))])
        # what the data set holds: 1.x's own Human36mDataset on the same arguments, against mmfix's
        # (every array either keeps: the serialised samples and, for mmfix's, the frames' arrays)
        stock = copy.deepcopy(cfg.test_dataloader.dataset)
        stock.type = "Human36mDataset"
        held = lambda ds: sum(int(v.nbytes) for v in vars(ds).values() if isinstance(v, np.ndarray))
        report["held"] = [held(DATASETS.build(stock)), held(dataset)]
        if job["train"]:  # tools/train.py's path: one epoch from scratch, evaluated at its end
            trained = copy.deepcopy(cfg)
            trained.work_dir = job["work_dir"] + "-train"
            trained.train_cfg.max_epochs, trained.train_cfg.val_interval = 1, 1
            for loader in ("train_dataloader", "val_dataloader"):
                trained[loader].num_workers, trained[loader].persistent_workers = 0, False
            runner = Runner.from_cfg(trained)
            runner.train()
            hub = runner.message_hub
            report["trained"] = {
                "loss": float(hub.get_scalar("train/loss").current()),
                "lr": float(hub.get_scalar("train/lr").current()),
                "val": sorted(k for k in hub.log_scalars if k.startswith("val/")),
                "best": sorted(p.name for p in __import__("pathlib").Path(trained.work_dir).glob("best_*.pth")),
            }
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
    """Every case's 0.x run (one 0.x process), then the current side's (one process)."""
    folder = tmp_path_factory.mktemp("lift0x")
    cwd = write_h36m_data(folder / "work")
    configs = configs_0x(mmdet2_python, "mmpose")
    jobs = [
        {
            "toolbox": "mmpose-lift",
            "config": str(configs / name),
            "cwd": str(cwd),
            "seed": 70 + index,
            "flip_seed": 7 + index,
            "checkpoint": str(folder / f"case{index}.pth"),
            "out": str(folder / f"case{index}.npz"),
            "current": str(folder / f"current{index}.npz"),
            "report": str(folder / f"current{index}.json"),
            "work_dir": str(folder / f"runner{index}"),
            "train": "27frames" in name,
        }
        for index, name in enumerate(CASES)
    ]
    predict_0x(mmdet2_python, jobs, folder)
    predict_current(_CURRENT, jobs, folder, torchvision_path)
    return jobs


@pytest.mark.parametrize("index", range(len(CASES)), ids=[Path(c).stem for c in CASES])
def test_0x_lifting_config_and_checkpoint_compute_on_mmpose_1x_as_on_0x(made: list[dict], index: int) -> None:
    job = made[index]
    report = json.loads(Path(job["report"]).read_text())
    assert "error" not in report, report.get("error")
    reference = json.loads(Path(job["out"] + ".json").read_text())
    expected, current = np.load(job["out"]), np.load(job["current"])
    # converted as MMPose's config, into 1.x's lifter with mmfix's 0.29 copies where 1.x computes otherwise
    assert report["scope"] == "mmpose"
    codec = "ImagePoseLifting" if "simplebaseline" in job["config"] else "VideoPoseLifting"
    assert report["types"] == ["PoseLifter", "TCN0x", "TemporalRegressionHead", codec, "Human36mDataset0x"]
    # 0.29's own initialisation from the same seed, tensor for tensor (the head renamed as 1.x names it)
    initial = {
        k[len("init/") :].replace("keypoint_head.", "head."): expected[k] for k in expected if k.startswith("init/")
    }
    assert initial and sorted(initial) == sorted(k[len("init/") :] for k in current if k.startswith("init/"))
    for name, tensor in initial.items():
        np.testing.assert_array_equal(current[f"init/{name}"], tensor, err_msg=name)
    assert np.all(initial["backbone.expand_conv.bn.weight"] == 1)  # as initialised, not yet seeded
    # the 0.x checkpoint fits key for key; the same samples in the same order, fed and predicted alike
    assert report["missing"] == [] and report["unexpected"] == [], report
    assert report["paths"] == reference["paths"] and len(report["paths"]) > 100
    np.testing.assert_allclose(current["input"], expected["input"], atol=1e-6)
    assert expected["preds"].shape[1:] == (17, 3)
    np.testing.assert_allclose(current["preds"], expected["preds"], rtol=1e-5, atol=1e-5)
    # tools/test.py's Runner reports 0.29's metrics: every key, the per-action errors included
    assert set(report["metrics"]) == set(reference["metrics"]), (
        sorted(report["metrics"]),
        sorted(reference["metrics"]),
    )
    assert any(key.startswith("P-MPJPE_") for key in reference["metrics"])
    for key, value in reference["metrics"].items():
        assert report["metrics"][key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    # training: the same samples, 0.29's flips (drawn from the same seed), inputs and targets
    assert report["train_paths"] == reference["train_paths"]
    np.testing.assert_allclose(current["train_input"], expected["train_input"], atol=1e-5)
    np.testing.assert_allclose(current["train_target"], expected["train_target"], atol=1e-5)
    if "simplebaseline" not in job["config"]:  # (its config does not flip)
        flipped = np.abs(current["train_input"] - current["train_plain"]).max(axis=(1, 2)) > 1e-3
        assert 0.25 < flipped.mean() < 0.75, flipped.mean()
    if "trained" in report:  # one epoch of tools/train.py's Runner: 0.29's loss, its metrics, the best kept
        trained = report["trained"]
        assert np.isfinite(trained["loss"]) and trained["lr"] == pytest.approx(1e-3)
        assert {"val/MPJPE", "val/P-MPJPE", "val/MPJPE_Walking"} <= set(trained["val"]), trained
        assert trained["best"] == ["best_MPJPE_epoch_1.pth"], trained
    # the converted data set holds frame numbers, 1.x's every sequence's arrays (T frames each)
    stock, held = report["held"]
    frames = int(job["config"].split("_h36m_")[-1].split("frame")[0]) if "frame" in job["config"] else 1
    if frames >= 27:
        assert held * 5 < stock, report["held"]
