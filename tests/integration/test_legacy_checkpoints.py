"""2.x checkpoints on MMDetection 3.3.0: renamed where 3.x moved layers, strict where a run came from 2.x.

The 2.x side is real MMDetection 2.28.2 (tests/mmdet2_support.py): its YOLACT writes the state
dict and predicts; mmfix + 3.3.0 load that state dict into the converted model and must predict
the same. The strictness tests run the real 3.3.0 tools (train.py / test.py) through mmfix-run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import clean_env, run, run_python, run_tool_warm
from mmdet2_support import assert_same_detections, job_3x, load_report, predict_2x, result_of, run_batch, seeded_image
from mmdet_support import require_mmdet, user_config_2x, user_config_3x, write_coco

pytestmark = pytest.mark.slow  # real MMDetection 2.28.2 and 3.3.0

YOLACT_2X = Path(__file__).resolve().parents[1] / "data" / "mmdet2_configs" / "yolact" / "yolact_r50_1x8_coco.py"
MMFIX = [sys.executable, "-m", "mmfix"]


@pytest.fixture(scope="module")
def mmdet_dir() -> Path:
    return require_mmdet()


@pytest.fixture(scope="module")
def yolact(mmdet2_python: Path, mmdet_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A user's 2.x YOLACT config (every detection kept), 2.28.2's state dict of it and its
    prediction; 3.3.0's with mmfix (both load paths: ``upgrade/``, ``mmengine/``, one process)."""
    root = tmp_path_factory.mktemp("yolact")
    config = root / "yolact_user_2x.py"
    config.write_text(f"_base_ = '{YOLACT_2X}'\nmodel = dict(test_cfg=dict(score_thr=0.0, max_per_img=50))\n")
    image = root / "image.npy"
    np.save(image, seeded_image(0))
    result = predict_2x(mmdet2_python, config, image, root / "2x")
    weights = root / "2x" / "state_dict.pth"
    run_batch([job_3x(config, image, weights, root / load, load) for load in ("upgrade", "mmengine")])
    return {"root": root, "config": config, "image": image, "weights": root / "2x" / "state_dict.pth", "result": result}


def test_real_2x_yolact_state_dict_predicts_as_in_2x_after_the_rename_table(yolact) -> None:
    result, report = result_of(yolact["root"] / "upgrade"), load_report(yolact["root"] / "upgrade")
    # upgrade() then load_state_dict(strict=True): every key found its place
    assert report["renamed"] == {"YOLACT (MMDetection 2.x)": 2}
    assert len(yolact["result"]["scores"]) == 50
    assert_same_detections(yolact["result"], result)


def test_mmengine_load_checkpoint_renames_a_2x_yolact_in_memory(yolact) -> None:
    result = result_of(yolact["root"] / "mmengine")
    assert_same_detections(yolact["result"], result)
    # The semantic branch (training only, so predictions cannot show it): loaded with mmfix,
    # left at random without its patch -- stock 3.3.0 on a 2.x YOLACT checkpoint.
    probe = f"""
import json, torch, mmfix
from mmdet.apis import init_detector
from mmengine.runner.checkpoint import load_checkpoint
model = init_detector({str(yolact["config"])!r}, checkpoint=None, device='cpu')
load_checkpoint(model, {str(yolact["weights"])!r})
saved = torch.load({str(yolact["weights"])!r}, weights_only=True)['segm_head.segm_conv.weight']
print('PROBE', json.dumps(torch.equal(model.mask_head.segm_branch.segm_conv.weight, saved)))
"""
    on = run([sys.executable, "-c", probe], env=clean_env(), timeout=300)
    off = run([sys.executable, "-c", probe], env=clean_env(MMFIX_DISABLED_PATCHES="legacy_checkpoint"), timeout=300)
    assert "PROBE true" in on.stdout, on.stdout[-2000:] + on.stderr[-3000:]
    assert "key(s) renamed to the 3.x layout in memory" in on.stdout + on.stderr
    assert "PROBE false" in off.stdout, off.stdout[-2000:] + off.stderr[-3000:]
    assert "missing keys in source state_dict: mask_head.segm_branch.segm_conv" in off.stdout + off.stderr


def test_convert_checkpoint_writes_a_file_plain_mmengine_loads_strictly(yolact, tmp_path) -> None:
    new = tmp_path / "yolact_3x.pth"
    proc = run(
        [*MMFIX, "convert-checkpoint", str(yolact["weights"]), str(new), "--config", str(yolact["config"])],
        env=clean_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"wrote {new}: YOLACT (MMDetection 2.x): 2 key(s) renamed" in proc.stderr
    config_3x = tmp_path / "yolact_3x.py"
    run([*MMFIX, "convert-config", str(yolact["config"]), "-o", str(config_3x)], env=clean_env(), check=True)
    # Without mmfix's conversions (only its ops, mmcv-lite here): the written files are plain 3.x files.
    check = f"""
import copy, torch, mmfix
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmdet.registry import MODELS
init_default_scope('mmdet')
model = MODELS.build(Config.fromfile({str(config_3x)!r}).model)
model.load_state_dict(torch.load({str(new)!r}, weights_only=True), strict=True)
print('STRICT OK')
"""
    plain = clean_env(MMFIX_DISABLED_PATCHES="legacy_config,legacy_checkpoint,torch_load,mmengine_checkpoint")
    proc = run([sys.executable, "-c", check], env=plain, timeout=300)
    assert "STRICT OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]

    again = run([*MMFIX, "convert-checkpoint", str(new), str(tmp_path / "again.pth")], env=clean_env())
    assert again.returncode == 0 and "loads into 3.x as it is; nothing written" in again.stderr
    assert not (tmp_path / "again.pth").exists()
    exists = run([*MMFIX, "convert-checkpoint", str(yolact["weights"]), str(new)], env=clean_env())
    assert exists.returncode == 2 and "exists; give another path, or --force" in exists.stderr


def test_convert_checkpoint_refuses_a_state_dict_that_does_not_fit_the_config(yolact, tmp_path) -> None:
    script = f"""
import torch
sd = torch.load({str(yolact["weights"])!r}, weights_only=True)
del sd['bbox_head.conv_cls.weight']
sd['bbox_head.stray.weight'] = torch.zeros(1)
torch.save(sd, {str(tmp_path / "bad.pth")!r})
"""
    run([sys.executable, "-c", script], env=clean_env(), check=True)
    new = tmp_path / "out.pth"
    proc = run(
        [*MMFIX, "convert-checkpoint", str(tmp_path / "bad.pth"), str(new), "--config", str(yolact["config"])],
        env=clean_env(),
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "1 parameter(s) of the model are not in the checkpoint (bbox_head.conv_cls.weight)" in proc.stderr
    assert "1 key(s) of the checkpoint are not in the model (bbox_head.stray.weight)" in proc.stderr
    assert not new.exists()


# --- a 2.x run's checkpoint that does not fit: one error, not random layers -------------------


@pytest.fixture(scope="module")
def coco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_coco(tmp_path_factory.mktemp("coco"))


def _tool(mmdet_dir: Path, name: str) -> str:
    return str(mmdet_dir / ".mim" / "tools" / name)


def _mmfix_run(*args: object, **env: str) -> tuple[int, str]:
    """``mmfix-run python TOOL …`` (one process) in a fork of the warm interpreter: how the tool
    loads the checkpoint is under test, not how it starts."""
    proc = run_tool_warm(*map(str, args), env=clean_env(OMP_NUM_THREADS="1", **env), timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def _checkpoints_of(config: Path, variants: dict[Path, dict]) -> list[Path]:
    """Checkpoints of ``config``'s model (built with mmfix, so a 2.x config is converted), one per
    variant: ``meta_version`` the MMDetection version its meta names, ``drop`` a parameter dropped
    and a stray key added, ``num_classes`` the class layer resized. The model is built once for all
    of them, in a fork of the warm interpreter (what is tested is how they load, not how they are
    made; issue 29)."""
    script = f"""
import copy, torch, mmfix
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmdet.registry import MODELS
init_default_scope('mmdet')
built = MODELS.build(Config.fromfile({str(config)!r}).model).state_dict()
for path, variant in {[(str(path), variant) for path, variant in variants.items()]!r}:
    sd = copy.copy(built)  # its _metadata (the modules' versions) kept, as a saved state dict has it
    if variant.get('drop'):
        del sd[variant['drop']]
        sd['roi_head.stray.weight'] = torch.zeros(1)
    if variant.get('num_classes'):
        n = variant['num_classes'] + 1
        sd['roi_head.bbox_head.fc_cls.weight'] = torch.zeros(n, sd['roi_head.bbox_head.fc_cls.weight'].shape[1])
        sd['roi_head.bbox_head.fc_cls.bias'] = torch.zeros(n)
    torch.save({{'state_dict': sd, 'meta': {{'mmdet_version': variant['meta_version']}}}}, path)
"""
    run_python(script, warm=True, timeout=300)
    return list(variants)


def _checkpoint_of(
    config: Path, path: Path, *, drop: str | None, meta_version: str, num_classes: int | None = None
) -> Path:
    """One checkpoint of ``config``'s model (see _checkpoints_of)."""
    (made,) = _checkpoints_of(config, {path: {"drop": drop, "meta_version": meta_version, "num_classes": num_classes}})
    return made


def test_test_py_on_a_2x_config_with_a_checkpoint_missing_keys_stops_with_one_error(mmdet_dir, coco, tmp_path) -> None:
    config = user_config_2x(tmp_path / "faster_rcnn_2x.py", coco)
    bad = _checkpoint_of(config, tmp_path / "bad.pth", drop="roi_head.bbox_head.fc_cls.weight", meta_version="3.3.0")
    code, out = _mmfix_run(_tool(mmdet_dir, "test.py"), config, bad, "--work-dir", tmp_path / "work")
    assert code != 0, out[-3000:]
    assert "mmfix: the checkpoint does not fit the FasterRCNN model" in out
    assert "(roi_head.bbox_head.fc_cls.weight)" in out and "(roi_head.stray.weight)" in out
    assert "built from an MMDetection 2.x config" in out and "MMFIX_PARTIAL_LOAD=1" in out
    assert "coco/bbox_mAP" not in out  # nothing was evaluated on random layers
    assert "Traceback" not in out

    code, out = _mmfix_run(
        _tool(mmdet_dir, "test.py"), config, bad, "--work-dir", tmp_path / "work2", MMFIX_PARTIAL_LOAD="1"
    )
    assert code == 0, out[-3000:]
    assert "missing keys in source state_dict: roi_head.bbox_head.fc_cls.weight" in out  # MMEngine's warning
    assert "coco/bbox_mAP" in out


def test_test_py_tta_on_a_2x_multi_scale_flip_config_with_a_2x_checkpoint(mmdet_dir, coco, tmp_path) -> None:
    """Issue 36: ``tools/test.py CFG CKPT --tta`` on a 2.x config tested at two scales with flip and
    a checkpoint saved by 2.x: the converted tta_model (DetTTAModel2x) wraps the model, the 2.x
    checkpoint loads strictly into it, and the test set is evaluated."""
    tta = """
data['test']['pipeline'] = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiScaleFlipAug', img_scale=[(64, 64), (96, 96)], flip=True,
         transforms=[dict(type='Resize', keep_ratio=True), dict(type='RandomFlip'),
                     dict(type='Normalize', **img_norm_cfg), dict(type='Pad', size_divisor=32),
                     dict(type='ImageToTensor', keys=['img']), dict(type='Collect', keys=['img'])])]
"""
    config = user_config_2x(tmp_path / "faster_rcnn_tta_2x.py", coco, extra=tta)
    checkpoint = _checkpoint_of(config, tmp_path / "ckpt2x.pth", drop=None, meta_version="2.28.2")
    code, out = _mmfix_run(_tool(mmdet_dir, "test.py"), config, checkpoint, "--tta", "--work-dir", tmp_path / "w")
    assert code == 0, out[-3000:]
    assert "coco/bbox_mAP" in out and "Traceback" not in out, out[-3000:]
    # the model test.py ran: DetTTAModel2x around the detector (the dumped config, before tta_model)
    dumped = (tmp_path / "w").joinpath(config.stem + ".py").read_text()
    assert dumped.startswith("model = dict(\n    module=dict(") or "\nmodel = dict(\n    module=dict(" in dumped
    assert dumped.index("type='DetTTAModel2x'") < dumped.index("tta_model = dict(")


def test_load_from_a_2x_saved_checkpoint_into_a_3x_config_is_strict_but_fine_tuning_shapes_are_not(
    mmdet_dir, coco, tmp_path
) -> None:
    config = user_config_3x(tmp_path / "faster_rcnn_3x.py", mmdet_dir, coco, extra="")
    work = tmp_path / "work"
    # Saved by 2.x (meta) and by 3.x, missing a layer; and a 2.x COCO model (other classes).
    bad, same_3x, coco_like = _checkpoints_of(
        config,
        {
            tmp_path / "bad2x.pth": {"drop": "rpn_head.rpn_cls.weight", "meta_version": "2.28.2"},
            tmp_path / "bad3x.pth": {"drop": "rpn_head.rpn_cls.weight", "meta_version": "3.3.0"},
            tmp_path / "coco80.pth": {"meta_version": "2.28.2", "num_classes": 80},
        },
    )
    # Saved by 2.x, missing a layer: an error before the first iteration.
    code, out = _mmfix_run(
        _tool(mmdet_dir, "train.py"), config, "--work-dir", work, "--cfg-options", f"load_from={bad}"
    )
    assert code != 0 and "the checkpoint was saved by MMDetection 2.28.2" in out, out[-3000:]
    assert "Epoch(train)" not in out
    # The same file saved by 3.x: stock MMEngine's behaviour (a warning), as 3.x users expect.
    code, out = _mmfix_run(
        _tool(mmdet_dir, "train.py"), config, "--work-dir", work, "--cfg-options", f"load_from={same_3x}"
    )
    assert code == 0 and "missing keys in source state_dict: rpn_head.rpn_cls.weight" in out, out[-3000:]
    # Fine-tuning a 2.x COCO model on other classes: only shapes differ -- MMEngine's warning, the run goes on.
    code, out = _mmfix_run(
        _tool(mmdet_dir, "train.py"), config, "--work-dir", work, "--cfg-options", f"load_from={coco_like}"
    )
    assert code == 0, out[-3000:]
    assert "size mismatch for roi_head.bbox_head.fc_cls.weight" in out
    assert "does not fit" not in out


def test_det_inferencer_is_strict_for_a_2x_saved_checkpoint_as_load_from_is(mmdet_dir, coco, tmp_path) -> None:
    """MMDetection's DetInferencer imports MMEngine's loader by name: its loads follow the
    checkpoint-meta rule too (instead of predicting with a random layer after a warning), also
    where mmdet.apis was imported while the patch was off and it is enabled afterwards."""
    config = user_config_3x(tmp_path / "faster_rcnn_3x.py", mmdet_dir, coco, extra="")
    script = """
import sys, mmfix
if sys.argv[3] == 'late':
    mmfix.disable(['legacy_checkpoint'])
from mmdet.apis import DetInferencer
if sys.argv[3] == 'late':
    mmfix.enable(['legacy_checkpoint'])
try:
    DetInferencer(model=sys.argv[1], weights=sys.argv[2], device='cpu', show_progress=False)
except mmfix.CheckpointMismatchError as exc:
    print('REFUSED', exc)
else:
    print('LOADED')
"""
    outcomes = {}
    versions = ("2.28.2", "3.3.0")
    made = dict(
        zip(
            versions,
            _checkpoints_of(
                config,
                {tmp_path / f"{v}.pth": {"drop": "rpn_head.rpn_cls.weight", "meta_version": v} for v in versions},
            ),
        )
    )
    for version, order in (("2.28.2", "first"), ("2.28.2", "late"), ("3.3.0", "first")):
        ckpt = made[version]
        proc = run([sys.executable, "-c", script, str(config), str(ckpt), order], env=clean_env(), timeout=300)
        out = outcomes[version, order] = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-3000:]
    for order in ("first", "late"):
        out = outcomes["2.28.2", order]
        assert "REFUSED" in out and "the checkpoint was saved by MMDetection 2.28.2" in out, (order, out[-3000:])
        assert "(rpn_head.rpn_cls.weight)" in out
    # Saved by 3.x: stock MMEngine's behaviour (its warning), as 3.x users expect.
    out = outcomes["3.3.0", "first"]
    assert "LOADED" in out and "missing keys in source state_dict: rpn_head.rpn_cls.weight" in out, out[-3000:]
