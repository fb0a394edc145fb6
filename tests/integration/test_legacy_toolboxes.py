"""2.x-era commands of MMSegmentation, MMClassification, MMPose and MMDetection3D, end to end.

Each toolbox's real 3.x-era ``tools/train.py`` / ``tools/test.py`` (from the installed
package's ``.mim/tools``) runs on CPU (gloo), started with the legacy command line through
``mmfix-run``. One legacy ``--gpus 2`` training per toolbox (module-scoped) feeds the resume and
test checks. MMSegmentation's, MMClassification's and MMPose's are real 0.x configs
(tests/family0x_support.py: a real segmentor / classifier / top-down pose model, 0.x pipelines and
schedule, a tiny data set on disk) started from a 0.x checkpoint made by MMSegmentation 0.30.0 /
MMClassification 0.25.0 / MMPose 0.29.0 themselves (``--load-from``, ``--cfg-options load_from=``);
MMDetection3D, whose 1.0 configs mmfix does not convert yet, trains a tiny model registered with
MMEngine from a current-format config. MMPretrain's and MMPose's models import torchvision: the 0.x
environment's is put on their runs' PYTHONPATH (tests/family0x_support.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from conftest import clean_env, run
from family0x_support import (
    configs_0x,
    predict_0x,
    write_cls_config_0x,
    write_cls_data,
    write_pose_config_0x,
    write_pose_data,
    write_seg_config_0x,
    write_seg_data,
)
from toolbox_support import TOOLBOXES, Toolbox, toolbox_env, tools_dir, write_config

pytestmark = pytest.mark.slow  # real 3.x-era tools of each toolbox, launched

MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")
MMFIX = str(Path(sys.executable).parent / "mmfix")
NAMES = ["mmseg", "mmpretrain", "mmpose", "mmdet3d"]

# The legacy training command's toolbox-specific flags (besides --gpus 2 --work-dir).
TRAIN_FLAGS = {
    "mmseg": ["--load-from", "{pre}", "--diff_seed", "--seed", "0"],
    "mmpretrain": ["--device", "cpu", "--diff-seed", "--seed", "0", "--cfg-options", "load_from={pre}"],
    "mmpose": ["--autoscale-lr", "--diff_seed", "--deterministic", "--cfg-options", "load_from={pre}"],
    "mmdet3d": ["--autoscale-lr", "--diff-seed", "--options", "train_cfg.val_interval=1"],
}
# The legacy test command's flags, and what its evaluation must print.
TEST_FLAGS = {
    "mmseg": (["--eval", "mIoU", "mDice", "--opacity", "0.4"], ["mIoU:", "mDice:"]),
    "mmpretrain": (
        ["--metrics", "accuracy", "--metric-options", "topk=1,2", "--out-items", "none", "--out", "{work}/results.pkl"],
        ["accuracy/top1:", "accuracy/top2:"],
    ),
    "mmpose": (["--eval", "mAP", "--gpu-collect"], ["coco/AP:"]),
    "mmdet3d": (["--eval", "mse", "--eval-options", "tol=5.0", "--deterministic"], ["toy/mse:"]),
}


def env(toolbox: Toolbox, extra_path: Path | None = None, **extra: str) -> dict[str, str]:
    variables = toolbox_env(toolbox)
    if extra_path is not None:
        variables["PYTHONPATH"] = os.pathsep.join([str(extra_path), variables["PYTHONPATH"]])
    return clean_env(**variables, **extra)


def mmfix_python(toolbox: Toolbox, *args: object, timeout: float = 300, extra_path: Path | None = None):
    proc = run([MMFIX_RUN, sys.executable, *map(str, args)], env=env(toolbox, extra_path), timeout=timeout)
    return proc, proc.stdout + proc.stderr


#: The toolboxes trained from a real 0.x config: (the 0.x worker's job, the config's unit, its 0.x
#: key that makes the run longer, the log line a resume prints, the metric its evaluation prints).
LEGACY_0X = {
    "mmseg": ("mmseg", "iter", "runner.max_iters=6", "resumed epoch: 0, iter: 2", "mIoU:"),
    "mmpretrain": ("mmcls", "epoch", "runner.max_epochs=3", "resumed epoch: 2", "accuracy/top1:"),
    "mmpose": ("mmpose", "epoch", "total_epochs=3", "resumed epoch: 2", "coco/AP:"),
}
RELEASES = {
    "mmseg": ("MMSegmentation 0.x", "MMSegmentation 1.x"),
    "mmpretrain": ("MMClassification 0.x", "MMPretrain 1.x"),
    "mmpose": ("MMPose 0.x", "MMPose 1.x"),
}


class Trained:
    def __init__(
        self, toolbox: Toolbox, config: Path, work: Path, log: str, legacy: bool, extra_path: Path | None
    ) -> None:
        self.toolbox, self.config, self.work, self.log = toolbox, config, work, log
        self.tools = tools_dir(toolbox.package)
        self.legacy = legacy  # a 0.x config (LEGACY_0X), else a 1.x one (2 epochs)
        self.unit = LEGACY_0X[toolbox.name][1] if legacy else "epoch"
        self.extra_path = extra_path  # a torchvision for MMPretrain's models

    def python(self, *args: object, timeout: float = 300):
        return mmfix_python(self.toolbox, *args, timeout=timeout, extra_path=self.extra_path)


@pytest.fixture(scope="module", params=NAMES)
def trained(request, tmp_path_factory) -> Trained:
    """One legacy `--gpus 2` training with toolbox-specific flags, shared by the checks below."""
    toolbox = TOOLBOXES[request.param]
    tools = tools_dir(toolbox.package)
    root = tmp_path_factory.mktemp(toolbox.name)
    work = root / "work"
    pre = root / "pretrained.pth"
    legacy = toolbox.name in LEGACY_0X
    extra_path = request.getfixturevalue("torchvision_path") if toolbox.name in ("mmpretrain", "mmpose") else None
    if legacy:
        python = request.getfixturevalue("mmdet2_python")
        if toolbox.name == "mmseg":
            config = write_seg_config_0x(root / "cfg.py", write_seg_data(root / "data"))
        elif toolbox.name == "mmpose":
            configs = configs_0x(python, "mmpose")
            config = write_pose_config_0x(root / "cfg.py", write_pose_data(root / "data"), configs)
        else:
            config = write_cls_config_0x(root / "cfg.py", write_cls_data(root / "data"))
        # the config's model with weights from the 0.x toolbox's own code: a 0.x checkpoint
        job = {"toolbox": LEGACY_0X[toolbox.name][0], "config": str(config), "seed": 5, "images": []}
        predict_0x(python, [{**job, "checkpoint": str(pre), "out": str(root / "none.npz")}], root)
    else:
        config = write_config(root / "cfg.py", toolbox)
        head = {"seg": 32, "cls": 3, "pose": 4, "box": 4}[toolbox.task]
        torch.save({"state_dict": {"head.weight": torch.full((head, 8), 0.01), "head.bias": torch.zeros(head)}}, pre)
    flags = [f.format(pre=pre) for f in TRAIN_FLAGS[toolbox.name]]
    proc, log = mmfix_python(
        toolbox,
        tools / "train.py",
        config,
        "--work-dir",
        work,
        "--gpus",
        "2",
        *flags,
        timeout=600,
        extra_path=extra_path,
    )
    assert proc.returncode == 0, log[-4000:]
    return Trained(toolbox, config, work, log, legacy, extra_path)


def test_legacy_gpus_2_trains_with_world_size_2(trained: Trained) -> None:
    log = trained.log
    assert log.count("command line translated:") == 1 and "--nproc_per_node 2" in log
    assert trained.toolbox.name.replace("mm", "").lower()[:3] in log.lower()  # the rules line names the toolbox
    if trained.legacy:
        old, new = RELEASES[trained.toolbox.name]
        assert log.count(f"is an {old} config: converted to {new} in memory") == 1, log[-4000:]
        assert "Distributed training: True" in log
        assert LEGACY_0X[trained.toolbox.name][4] in log  # the 0.x evaluation's metric, validated during training
        # the 0.x checkpoint loaded into the converted model, every key
        assert f"Load checkpoint from {trained.work.parent / 'pretrained.pth'}" in log
        assert "missing keys" not in log and "unexpected key" not in log, log[-4000:]
    else:
        ranks = [torch.load(p) for p in sorted(trained.work.glob("probe_rank*.pth"))]
        assert [p["world_size"] for p in ranks] == [2, 2]
    assert (trained.work / f"{trained.unit}_2.pth").exists()
    assert "randomness.diff_rank_seed=True" in log
    if trained.toolbox.name == "mmseg":
        assert "load_from=" in log and "Load checkpoint from" in log
    if trained.toolbox.name == "mmpretrain":
        assert "CUDA_VISIBLE_DEVICES=" in log


def test_resume_from_continues_from_its_epoch(trained: Trained) -> None:
    # A 0.x config is extended by its 0.x key (runner.max_iters / max_epochs), merged before the conversion.
    longer = LEGACY_0X[trained.toolbox.name][2] if trained.legacy else "train_cfg.max_epochs=3"
    proc, log = trained.python(
        trained.tools / "train.py",
        trained.config,
        "--work-dir",
        trained.work,
        "--resume-from",
        trained.work / f"{trained.unit}_2.pth",
        "--cfg-options",
        longer,
    )
    assert proc.returncode == 0, log[-4000:]
    resumed = LEGACY_0X[trained.toolbox.name][3] if trained.legacy else "resumed epoch: 2"
    last = 6 if trained.unit == "iter" else 3
    assert resumed in log and (trained.work / f"{trained.unit}_{last}.pth").exists(), log[-3000:]


def test_legacy_test_command_evaluates(trained: Trained) -> None:
    flags, expected = TEST_FLAGS[trained.toolbox.name]
    flags = [f.format(work=trained.work) for f in flags]
    proc, log = trained.python(
        trained.tools / "test.py",
        trained.config,
        trained.work / f"{trained.unit}_2.pth",
        "--work-dir",
        trained.work / "test",
        *flags,
    )
    assert proc.returncode == 0, log[-4000:]
    assert log.count("command line translated:") == 1
    for key in expected:
        assert key in log, log[-3000:]
    if trained.toolbox.name == "mmpretrain":
        assert (trained.work / "results.pkl").exists()


@pytest.mark.parametrize("name", NAMES)
def test_unknown_flag_is_refused_once_before_launch(name: str, tmp_path: Path) -> None:
    toolbox = TOOLBOXES[name]
    config = write_config(tmp_path / "cfg.py", toolbox)
    proc, log = mmfix_python(
        toolbox, tools_dir(toolbox.package) / "train.py", config, "--gpus", "2", "--work_dir", tmp_path, "--bogus"
    )
    assert proc.returncode == 2, log[-3000:]
    assert log.count("error:") == 1 and log.count("usage: train.py") == 1
    assert "unrecognized arguments: --work_dir" in log and "--work_dir is spelled --work-dir" in log
    assert "torch.distributed" not in log and "ChildFailedError" not in log and "Traceback" not in log
    assert not list(tmp_path.glob("*/*.log"))  # nothing ran


def test_unknown_flag_of_an_in_place_command_is_refused_at_parse_time_with_the_3x_spelling(tmp_path: Path) -> None:
    # No --gpus: nothing is launched, so the parse-time hook (the real parser) decides.
    config = write_config(tmp_path / "cfg.py", TOOLBOXES["mmpretrain"])
    proc, log = mmfix_python(
        TOOLBOXES["mmpretrain"],
        tools_dir("mmpretrain") / "train.py",
        config,
        "--work-dir",
        tmp_path / "w",
        "--autoscale-lr",
        "--seed",
        "0",
    )
    assert proc.returncode == 2, log[-3000:]
    assert log.count("usage: train.py") == 1 and log.count("error:") == 1 and "Traceback" not in log
    assert "unrecognized arguments: --autoscale-lr" in log and "--autoscale-lr is spelled --auto-scale-lr" in log
    assert not (tmp_path / "w").exists()


def test_metric_the_config_does_not_compute_is_refused_before_running(tmp_path: Path) -> None:
    config = write_config(tmp_path / "cfg.py", TOOLBOXES["mmpose"])
    proc, log = mmfix_python(
        TOOLBOXES["mmpose"],
        tools_dir("mmpose") / "test.py",
        config,
        tmp_path / "none.pth",
        "--eval",
        "PCK",
        "--gpu-id",
        "0",
    )
    assert proc.returncode == 2, log[-3000:]
    assert "--eval PCK asks for a metric this config's test_evaluator (EPE) does not compute" in log
    assert "PCKAccuracy" in log and "Traceback" not in log


def test_translate_shows_which_toolboxs_rules_applied() -> None:
    proc = run(
        [
            MMFIX,
            "translate",
            "python",
            str(tools_dir("mmseg") / "train.py"),
            "cfg.py",
            "--gpus",
            "2",
            "--resume-from",
            "w/epoch_2.pth",
        ],
        env=env(TOOLBOXES["mmseg"]),
    )
    assert proc.returncode == 0, proc.stderr
    assert "rules:       MMSegmentation 0.x -> 1.x (the script's path (mmseg/))" in proc.stdout
    assert "--resume --cfg-options load_from=w/epoch_2.pth" in proc.stdout


def test_mmdet3d_dist_train_sh_refuses_an_unknown_flag_once_before_any_worker(tmp_path: Path) -> None:
    # MMDetection3D's own dist_train.sh: `python -m torch.distributed.launch ... train.py CONFIG
    # --launcher pytorch ${@:3}`, where multi-node users start.
    config = write_config(tmp_path / "cfg.py", TOOLBOXES["mmdet3d"])
    script = tools_dir("mmdet3d") / "dist_train.sh"
    environment = clean_env(**toolbox_env(TOOLBOXES["mmdet3d"]), PORT=str(29500 + (abs(hash(str(tmp_path))) % 1000)))
    proc = run(
        [MMFIX_RUN, "bash", str(script), str(config), "2", "--work-dir", str(tmp_path / "w"), "--bogus"],
        env=environment,
        timeout=300,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 2, log[-3000:]
    assert log.count("error:") == 1 and log.count("usage: train.py") == 1, log[-3000:]
    assert "unrecognized arguments: --bogus" in log
    assert "ChildFailedError" not in log and "Traceback" not in log
    assert not (tmp_path / "w").exists()


PSPNET_0X = (
    Path(__file__).resolve().parents[1]
    / "data/family_0x_configs/mmsegmentation-0.30.0/configs/pspnet/pspnet_r18-d8_512x1024_80k_cityscapes.py"
)
# MMSegmentation 1.2.2's own config (its schedule keeps a top-level `optimizer` helper variable),
# loaded and given an --cfg-options-style `optimizer.lr` with mmfix active, against stock MMEngine.
_STOCK_1X = r"""
import os, mmseg
from mmengine.config import Config
path = os.path.join(os.path.dirname(mmseg.__file__), '.mim/configs/pspnet/pspnet_r50-d8_4xb2-40k_cityscapes-512x1024.py')
ours, stock = Config.fromfile(path), Config.fromfile.__wrapped__(path)
assert 'optimizer' in stock and ours.to_dict() == stock.to_dict(), 'a 1.x config was changed'
ours.merge_from_dict({'optimizer.lr': 0.5})
assert ours.optimizer.lr == 0.5 and ours.optim_wrapper.optimizer.lr == stock.optim_wrapper.optimizer.lr, ours.optim_wrapper
print('STOCK')
"""


POSE_0X = (
    Path(__file__).resolve().parents[1]
    / "data/family_0x_configs/mmpose-0.29.0/configs/body/2d_kpt_sview_rgb_img/topdown_heatmap/coco/res50_coco_256x192.py"
)


def test_mmsegmentation_0x_config_is_written_out_converted_and_its_1x_configs_stay_stock(tmp_path: Path) -> None:
    toolbox = TOOLBOXES["mmseg"]
    out = tmp_path / "converted.py"
    convert = run([MMFIX, "convert-config", str(PSPNET_0X), "-o", str(out)], env=env(toolbox))
    assert convert.returncode == 0, convert.stderr[-3000:]
    text = out.read_text()
    assert text.startswith(
        "# MMSegmentation 1.x config converted by mmfix from the MMSegmentation 0.x config "
        "pspnet_r18-d8_512x1024_80k_cityscapes.py"
    )
    assert "default_scope = 'mmseg'" in text and "SegDataPreProcessor" in text and "DetDataPreprocessor" not in text
    assert "IoUMetric" in text and "PackSegInputs" in text and "mmdet" not in text  # no MMDetection rule touched it
    proc, log = mmfix_python(toolbox, "-c", _STOCK_1X)
    assert proc.returncode == 0 and "STOCK" in proc.stdout, log[-4000:]
    assert "2.x keys in a 3.x config" not in log


RESNET_0X = (
    Path(__file__).resolve().parents[1]
    / "data/family_0x_configs/mmclassification-0.25.0/configs/resnet/resnet18_8xb32_in1k.py"
)


def test_mmclassification_0x_config_is_written_out_converted_with_mmpretrains_rules(tmp_path: Path) -> None:
    out = tmp_path / "converted.py"
    convert = run([MMFIX, "convert-config", str(RESNET_0X), "-o", str(out)], env=env(TOOLBOXES["mmpretrain"]))
    assert convert.returncode == 0, convert.stderr[-3000:]
    text = out.read_text()
    assert text.startswith(
        "# MMPretrain 1.x config converted by mmfix from the MMClassification 0.x config resnet18_8xb32_in1k.py"
    ), text[:300]
    assert "default_scope = 'mmpretrain'" in text and "ClsDataPreprocessor" in text and "PackInputs" in text
    assert "ResizeEdge" in text and "Accuracy" in text and "mmdet" not in text  # no MMDetection rule touched it


def test_mmpose_0x_config_is_written_out_converted_with_mmposes_rules(tmp_path: Path) -> None:
    out = tmp_path / "converted.py"
    convert = run([MMFIX, "convert-config", str(POSE_0X), "-o", str(out)], env=env(TOOLBOXES["mmpose"]))
    assert convert.returncode == 0, convert.stderr[-3000:]
    text = out.read_text()
    assert text.startswith("# MMPose 1.x config converted by mmfix from the MMPose 0.x config res50_coco_256x192.py"), (
        text[:300]
    )
    assert "default_scope = 'mmpose'" in text and "TopdownPoseEstimator" in text and "HeatmapHead" in text
    assert "MSRAHeatmap0x" in text and "CocoMetric" in text and "PackPoseInputs" in text
    assert "mmdet" not in text  # no MMDetection rule touched it


def test_mmpose_0x_config_not_converted_yet_stops_with_one_clear_error(tmp_path: Path) -> None:
    # a bottom-up model, as MMPose 0.29's associative_embedding configs write it (not converted yet;
    # MMPose 1.x has an associative-embedding head, but no HigherHRNet's: that one is refused as such)
    config = tmp_path / "ae_hrnet_0x.py"
    config.write_text(
        "model = dict(type='AssociativeEmbedding', backbone=dict(type='HRNet'), keypoint_head=dict(\n"
        "    type='AESimpleHead', in_channels=32, num_joints=17))\n"
        "data = dict(samples_per_gpu=24, workers_per_gpu=2, train=dict(type='BottomUpCocoDataset',\n"
        "    ann_file='a.json', img_prefix='img/', data_cfg=dict(), pipeline=[]))\n"
        "optimizer = dict(type='Adam', lr=0.0015)\nlr_config = dict(policy='step', step=[200, 260])\n"
        "total_epochs = 300\nevaluation = dict(interval=50, metric='mAP', save_best='AP')\n"
    )
    convert = run([MMFIX, "convert-config", str(config)], env=env(TOOLBOXES["mmpose"]))
    assert convert.returncode == 2 and convert.stdout == "", convert.stderr[-3000:]
    message = convert.stderr.strip()
    assert "cannot convert the MMPose 0.x config" in message and "is not converted yet" in message, message
    assert "\n" not in message and "Traceback" not in message and "MMDetection" not in message, message


MMDET3D_0X = (
    Path(__file__).resolve().parents[1]
    / "data/family_0x_configs/mmdetection3d-1.0.0rc6/configs/pointpillars/hv_pointpillars_secfpn_6x8_160e_kitti-3d-car.py"
)


def test_0x_config_of_a_toolbox_without_rules_stops_with_one_clear_error() -> None:
    if not MMDET3D_0X.is_file():
        pytest.fail(f"{MMDET3D_0X} missing from the repository's test data")
    convert = run([MMFIX, "convert-config", str(MMDET3D_0X)], env=env(TOOLBOXES["mmdet3d"]))
    assert convert.returncode == 2 and convert.stdout == "", convert.stderr[-3000:]
    assert convert.stderr.count(f"{MMDET3D_0X} is an MMDetection3D 1.0 config (model type VoxelNet)") == 1, (
        convert.stderr
    )
    assert "legacy-format conversion is not available in this mmfix version" in convert.stderr
    assert "Traceback" not in convert.stderr
