"""MMDetection 2.x configs on the real MMDetection 3.3.0 tools (train.py / test.py), on CPU.

Every run uses the tools shipped inside the installed mmdet package and a synthetic
COCO set written here; what the run really used is read back from the config MMEngine
dumps into the work dir and from its log.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from conftest import clean_env, run, run_tool_warm
from mmdet_support import (
    require_mmdet,
    user_config_2x,
    user_config_3x,
    user_config_open_images_2x,
    write_coco,
    write_open_images,
)

pytestmark = pytest.mark.slow  # real MMDetection 3.3.0 tools

MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")


@pytest.fixture(scope="module")
def mmdet_dir() -> Path:
    return require_mmdet()


@pytest.fixture(scope="module")
def coco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_coco(tmp_path_factory.mktemp("coco"))


def tool(mmdet_dir: Path, name: str) -> str:
    return str(mmdet_dir / ".mim" / "tools" / name)


def mmfix_run(*args: str, timeout: float = 400) -> tuple[int, str]:
    """``mmfix-run python TOOL …``: a legacy launch (``--gpus N``) for real, a one-process run in a
    fork of the warm interpreter (what the converted config trains, not how the run starts)."""
    env = clean_env(OMP_NUM_THREADS="1")
    if "--gpus" in args:
        proc = run([MMFIX_RUN, sys.executable, *map(str, args)], env=env, timeout=timeout)
    else:
        proc = run_tool_warm(*map(str, args), env=env, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def dumped(work: Path, config: Path) -> dict:
    """The config MMEngine wrote into the work dir, loaded by plain MMEngine (no mmfix)."""
    code = (
        "import json,sys; from mmengine.config import Config; "
        "print(json.dumps(Config.fromfile(sys.argv[1]).to_dict(), default=str))"
    )
    proc = run([sys.executable, "-c", code, str(work / config.name)], env=clean_env(MMFIX_DISABLE="1"), check=True)
    import json

    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_2x_config_trains_with_gpus_2_evaluates_and_tests_with_eval_bbox(mmdet_dir, coco, tmp_path):
    config = user_config_2x(tmp_path / "faster_rcnn_tiny_2x.py", coco)
    work = tmp_path / "work"
    code, out = mmfix_run(tool(mmdet_dir, "train.py"), config, "--gpus", "2", "--work-dir", work, "--seed", "0")
    assert code == 0, out[-4000:]
    assert "is an MMDetection 2.x config: converted to MMDetection 3.x in memory" in out
    assert out.count("is an MMDetection 2.x config") == 1, "the notice is for rank 0 only"
    assert re.search(r"world_size: 2|World size: 2|GPU number: 2|distributed training: True", out, re.I), out[-3000:]
    assert "coco/bbox_mAP" in out  # the 2.x `evaluation` ran after the epoch
    assert (work / "epoch_1.pth").is_file()
    cfg = dumped(work, config)
    assert cfg["train_dataloader"]["batch_size"] == 2
    assert cfg["train_cfg"] == {"type": "EpochBasedTrainLoop", "max_epochs": 1, "val_interval": 1}
    assert cfg["optim_wrapper"]["optimizer"]["lr"] == 0.01
    assert cfg["model"]["data_preprocessor"]["pad_size_divisor"] == 32

    code, out = mmfix_run(
        tool(mmdet_dir, "test.py"), config, work / "epoch_1.pth", "--eval", "bbox", "--work-dir", tmp_path / "test_work"
    )
    assert code == 0, out[-4000:]
    assert "coco/bbox_mAP" in out


def test_iter_based_cosine_config_and_2x_cfg_options(mmdet_dir, coco, tmp_path):
    config = user_config_2x(
        tmp_path / "iter_cosine_2x.py",
        coco,
        extra="""
runner = dict(_delete_=True, type='IterBasedRunner', max_iters=4)
lr_config = dict(_delete_=True, policy='CosineAnnealing', min_lr=0.0, by_epoch=False)
checkpoint_config = dict(by_epoch=False, interval=2)
evaluation = dict(interval=4, metric='bbox')
""",
    )
    work = tmp_path / "work"
    # 2.x keys on the command line keep their 2.x meaning (merged before conversion).
    code, out = mmfix_run(
        tool(mmdet_dir, "train.py"),
        config,
        "--work-dir",
        work,
        "--cfg-options",
        "data.samples_per_gpu=1",
        "optimizer.lr=0.005",
        "runner.max_iters=3",
        "evaluation.interval=3",
        "checkpoint_config.interval=3",
    )
    assert code == 0, out[-4000:]
    assert (work / "iter_3.pth").is_file() and not (work / "iter_4.pth").exists()
    assert "Iter(train) [3/3]" in out and "coco/bbox_mAP" in out
    cfg = dumped(work, config)
    assert cfg["train_cfg"] == {"type": "IterBasedTrainLoop", "max_iters": 3, "val_interval": 3}
    assert cfg["train_dataloader"]["batch_size"] == 1
    assert cfg["optim_wrapper"]["optimizer"]["lr"] == 0.005
    assert cfg["param_scheduler"] == [
        {"type": "CosineAnnealingLR", "T_max": 3, "begin": 0, "end": 3, "by_epoch": False, "eta_min": 0.0}
    ]
    assert cfg["default_hooks"]["checkpoint"]["interval"] == 3
    lrs = [float(v) for v in re.findall(r"Iter\(train\) \[\d/3\]\s+lr: ([0-9.e+-]+)", out)]
    assert len(lrs) == 3 and lrs[0] == pytest.approx(0.005) and lrs[2] < lrs[1] < lrs[0]


def test_3x_config_with_2x_keys_uses_them(mmdet_dir, coco, tmp_path):
    config = user_config_3x(
        tmp_path / "mixed_3x.py",
        mmdet_dir,
        coco,
        extra="""
data = dict(samples_per_gpu=4, workers_per_gpu=0)
optimizer = dict(type='SGD', lr=0.004, momentum=0.9, weight_decay=0.0001)
optimizer_config = dict(grad_clip=dict(max_norm=7, norm_type=2))
""",
    )
    work = tmp_path / "work"
    code, out = mmfix_run(tool(mmdet_dir, "train.py"), config, "--work-dir", work)
    assert code == 0, out[-4000:]
    assert "2.x keys in a 3.x config" in out and "data.samples_per_gpu -> train_dataloader.batch_size" in out
    cfg = dumped(work, config)
    assert cfg["train_dataloader"]["batch_size"] == 4
    assert cfg["optim_wrapper"]["clip_grad"] == {"max_norm": 7, "norm_type": 2}
    assert cfg["optim_wrapper"]["optimizer"]["lr"] == 0.004
    assert "data" not in cfg and "optimizer" not in cfg and "optimizer_config" not in cfg
    # 8 training images at 4 per batch: the run really used the 2.x batch size.
    assert "Epoch(train) [1][2/2]" in out, out[-3000:]
    assert "grad_norm" in out  # clipping on: MMEngine logs the gradient norm


@pytest.mark.parametrize(
    "extra, key, fragment",
    [
        ("lr_config = dict(policy='Bogus', step=[1])", "lr_config.policy", "'Bogus'"),
        ("runner = dict(_delete_=True, type='MyRunner', max_epochs=1)", "runner.type", "'MyRunner'"),
        (
            "lr_config = dict(_delete_=True, policy='step', step=[1], warmup='exp', warmup_iters=1, warmup_by_epoch=True)",
            "lr_config.warmup",
            "warmup_by_epoch=False",
        ),
        ("lr_config = dict(_delete_=True, policy='cyclic', target_ratio=(10, 1e-4))", "lr_config.policy", "OneCycleLR"),
        ("log_config = dict(hooks=[dict(type='NeptuneLoggerHook')])", "log_config.hooks", "NeptuneLoggerHook"),
    ],
)
def test_unconvertible_2x_key_is_one_clear_error(mmdet_dir, coco, tmp_path, extra, key, fragment):
    config = user_config_2x(tmp_path / "bad_2x.py", coco, extra=extra)
    code, out = mmfix_run(tool(mmdet_dir, "train.py"), config, "--work-dir", tmp_path / "work")
    assert code == 2, out[-3000:]
    assert f"`{key}`" in out and fragment in out and "3.x" in out
    assert "Traceback" not in out
    assert not (tmp_path / "work").exists() or not list((tmp_path / "work").rglob("*.pth"))


def test_conflicting_2x_and_3x_keys_are_one_clear_error(mmdet_dir, coco, tmp_path):
    config = user_config_3x(
        tmp_path / "conflict_3x.py",
        mmdet_dir,
        coco,
        extra="""
data = dict(samples_per_gpu=4)
train_dataloader = dict(batch_size=2)
""",
    )
    code, out = mmfix_run(tool(mmdet_dir, "train.py"), config, "--work-dir", tmp_path / "work")
    assert code == 2, out[-3000:]
    assert "`data.samples_per_gpu` = 4" in out and "`train_dataloader.batch_size` = 2" in out
    assert "Traceback" not in out


def test_convert_config_file_loads_in_plain_mmengine_like_the_automatic_path(mmdet_dir, coco, tmp_path):
    config = user_config_2x(tmp_path / "user_2x.py", coco)
    new = tmp_path / "user_3x.py"
    proc = run([sys.executable, "-m", "mmfix", "convert-config", str(config), "-o", str(new)], check=True)
    assert "wrote" in proc.stderr
    text = new.read_text()
    assert text.startswith("# MMDetection 3.x config converted by mmfix") and "_base_ =" not in text
    assert "dropped:   img_norm_cfg" in text
    code = (
        "import json,sys; from mmengine.config import Config; "
        "print(json.dumps(Config.fromfile(sys.argv[1]).to_dict(), default=repr, sort_keys=True))"
    )
    plain = run([sys.executable, "-c", code, str(new)], env=clean_env(MMFIX_DISABLE="1"), check=True).stdout
    auto = run([sys.executable, "-c", "import mmfix; " + code, str(config)], check=True).stdout
    assert plain.strip().splitlines()[-1] == auto.strip().splitlines()[-1]
    diff = run([sys.executable, "-m", "mmfix", "convert-config", str(config), "--diff"], check=True).stdout
    assert "~ " in diff or "+ train_dataloader.batch_size = 2" in diff
    assert "+ train_dataloader.batch_size = 2" in diff and "- data.samples_per_gpu = 2" in diff


def test_3x_config_is_untouched(mmdet_dir, tmp_path):
    official = mmdet_dir / ".mim" / "configs" / "faster_rcnn" / "faster-rcnn_r50_fpn_1x_coco.py"
    code = (
        "import json,sys; from mmengine.config import Config; "
        "print(json.dumps(Config.fromfile(sys.argv[1]).to_dict(), default=repr, sort_keys=True))"
    )
    plain = run([sys.executable, "-c", code, str(official)], env=clean_env(MMFIX_DISABLE="1"), check=True)
    auto = run([sys.executable, "-c", "import mmfix; " + code, str(official)], check=True)
    assert plain.stdout == auto.stdout
    assert "2.x" not in auto.stderr


def test_unconvertible_config_stops_gpus_2_before_any_worker_starts(mmdet_dir, coco, tmp_path):
    config = user_config_2x(tmp_path / "bad_2x.py", coco, extra="lr_config = dict(policy='Bogus')")
    code, out = mmfix_run(tool(mmdet_dir, "train.py"), config, "--gpus", "2", "--work-dir", tmp_path / "work")
    assert code == 2, out[-3000:]
    assert "`lr_config.policy` = 'Bogus'" in out
    assert "torch.distributed" not in out and "ChildFailedError" not in out and "Traceback" not in out
    assert "command line translated" not in out  # nothing was launched


def test_switching_the_patch_off_loads_the_2x_config_as_stock_mmengine_does(mmdet_dir, coco, tmp_path):
    config = user_config_2x(tmp_path / "user_2x.py", coco)
    code = f"""
import mmfix
from mmengine.config import Config
assert "train_dataloader" in Config.fromfile({str(config)!r})
mmfix.disable(["legacy_config"])
assert "data" in Config.fromfile({str(config)!r}) and "train_dataloader" not in Config.fromfile({str(config)!r})
print("ok")
"""
    assert run([sys.executable, "-c", code], check=True).stdout.strip().endswith("ok")
    off = run(
        [
            sys.executable,
            "-c",
            "import mmfix; from mmengine.config import Config; import sys; print(sorted(Config.fromfile(sys.argv[1])))",
            str(config),
        ],
        env=clean_env(MMFIX_DISABLED_PATCHES="legacy_config"),
        check=True,
    )
    assert "'data'" in off.stdout and "train_dataloader" not in off.stdout


def test_open_images_2x_config_trains_and_evaluates_after_mmfix_image_metas(mmdet_dir, tmp_path):
    # 2.x read a training image's size from the image; 3.x's OpenImagesDataset reads all of them from
    # meta_file, which 2.x configs name only for evaluation. The converter names the training one as
    # 3.x's configs do, the run says how to make it, and `mmfix image-metas` makes it.
    import pickle

    root = write_open_images(tmp_path / "OpenImages")
    config = user_config_open_images_2x(tmp_path / "faster_rcnn_tiny_openimages_2x.py", root)
    train_metas = root / "annotations" / "train-image-metas.pkl"

    code, out = mmfix_run(tool(mmdet_dir, "train.py"), config, "--work-dir", tmp_path / "work0")
    assert code != 0
    assert f"train_dataloader.dataset.meta_file {train_metas} does not exist" in out, out[-3000:]
    assert f"mmfix image-metas {config}" in out

    mmfix_cli = Path(sys.executable).parent / "mmfix"
    # --nproc 2: the images are read by a process pool, as on a many-core machine by default
    proc = run([str(mmfix_cli), "image-metas", str(config), "--nproc", "2"], env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {train_metas} (6 images" in proc.stderr
    assert "validation-image-metas.pkl exists, kept" in proc.stderr  # the user's own file is not rewritten
    with open(train_metas, "rb") as fh:
        metas = pickle.load(fh)
    assert [m["ori_shape"] for m in metas] == [(48, 64, 3)] * 6  # (height, width, channels), as 2.x read them
    assert [Path(m["filename"]).name for m in metas] == [f"t{i:05d}.jpg" for i in range(6)]

    work = tmp_path / "work"
    code, out = mmfix_run(tool(mmdet_dir, "train.py"), config, "--work-dir", work, "--seed", "0")
    assert code == 0, out[-4000:]
    assert "does not exist" not in out
    assert "openimages/mAP" in out  # the 2.x `evaluation = dict(metric='mAP')` ran as OpenImagesMetric
    cfg = dumped(work, config)
    assert cfg["train_dataloader"]["dataset"]["meta_file"] == str(train_metas)
    assert cfg["val_evaluator"]["type"] == "OpenImagesMetric"


def test_mmfix_image_metas_errors_are_one_clear_paragraph(mmdet_dir, coco, tmp_path):
    mmfix_cli = str(Path(sys.executable).parent / "mmfix")
    # a config without Open Images sets
    proc = run([mmfix_cli, "image-metas", str(user_config_2x(tmp_path / "coco_2x.py", coco))], env=clean_env())
    assert proc.returncode == 2 and "names no OpenImagesDataset" in proc.stderr and "Traceback" not in proc.stderr
    # an image the annotation file lists is missing
    root = write_open_images(tmp_path / "OpenImages")
    (root / "OpenImages" / "train" / "t00003.jpg").unlink()
    config = user_config_open_images_2x(tmp_path / "oi_2x.py", root)
    proc = run([mmfix_cli, "image-metas", str(config), "--nproc", "2"], env=clean_env())
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot read the image" in proc.stderr and "t00003.jpg" in proc.stderr
    assert not (root / "annotations" / "train-image-metas.pkl").exists()  # nothing half-written


def test_inheritance_base_references_and_custom_imports_work_through_conversion(mmdet_dir, coco, tmp_path):
    # Conversion sees the config MMEngine merged: {{_base_.x}} and _delete_ are resolved first, and
    # custom_imports are imported after conversion (a 2.x name such as mmcls must be renamed first).
    (tmp_path / "user_hooks.py").write_text(
        "from pathlib import Path\n"
        "from mmengine.hooks import Hook\n"
        "from mmdet.registry import HOOKS\n"
        "Path(__file__).with_name('imported.txt').write_text('yes')\n"
        "@HOOKS.register_module()\n"
        "class UserMarkerHook(Hook):\n"
        "    pass\n"
    )
    config = user_config_2x(
        tmp_path / "inherits_2x.py",
        coco,
        extra="\n".join(
            (
                "train_pipeline = {{_base_.train_pipeline}}",
                "data = dict(samples_per_gpu=1, train=dict(pipeline=train_pipeline))",
                "lr_config = dict(step={{_base_.lr_config.step}})",
                "evaluation = dict(interval=2, metric=['bbox'])",
                # _delete_: the base's SGD momentum and weight decay must not reach AdamW
                "optimizer = dict(_delete_=True, type='AdamW', lr=0.001)",
                "custom_imports = dict(imports=['user_hooks'], allow_failed_imports=False)",
                "custom_hooks = [dict(type='UserMarkerHook')]",
            )
        ),
    )
    code = (
        "import json, sys, mmfix; from mmengine.config import Config; "
        "print(json.dumps(Config.fromfile(sys.argv[1]).to_dict(), default=str))"
    )
    proc = run(
        [sys.executable, "-c", code, str(config)], env=clean_env(PYTHONPATH=str(tmp_path)), cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    cfg = json.loads(proc.stdout.strip().splitlines()[-1])
    train = cfg["train_dataloader"]
    assert train["batch_size"] == 1
    # the official base's 2.x pipeline, converted (img_scale=(1333, 800) -> Resize(scale=...))
    resize = next(t for t in train["dataset"]["pipeline"] if t["type"] == "Resize")
    assert sorted(resize["scale"]) == [800, 1333] and resize["keep_ratio"] is True
    assert [t["type"] for t in train["dataset"]["pipeline"]][-1] == "PackDetInputs"
    steps = [s for s in cfg["param_scheduler"] if s["type"] == "MultiStepLR"]
    assert steps and steps[0]["milestones"] == [8, 11]  # the base's step, through {{_base_.lr_config.step}}
    assert cfg["optim_wrapper"]["optimizer"] == {"type": "AdamW", "lr": 0.001}
    assert cfg["train_cfg"]["val_interval"] == 2
    assert cfg["val_evaluator"]["metric"] == ["bbox"]
    assert cfg["custom_hooks"] == [{"type": "UserMarkerHook"}]
    assert cfg["custom_imports"]["imports"] == ["user_hooks"]
    assert (tmp_path / "imported.txt").read_text() == "yes"  # imported, as stock Config.fromfile does
