"""Which toolbox a config belongs to (mmfix/_configs/_toolbox.py), on real official configs.

The family's old-format configs are copied unchanged from the MMSegmentation 0.30.0,
MMClassification 0.25.0, MMPose 0.29.0 and MMDetection3D 1.0.0rc6 packages
(tests/data/family_0x_configs); MMDetection's from 2.28.2 (tests/data/mmdet2_configs, and the
whole zoo from the mmdet-2.28.2 wheel of the 2.x environment's wheels folder).
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest

from mmfix._configs import CONVERTERS, ConfigConversionError, Loader, check_toolbox, classify, rules_for
from mmfix._configs._files import config_files
from mmfix._configs._toolbox import DATASET_TYPES, MODEL_TYPES, TOOLBOXES, detect

DATA = Path(__file__).resolve().parents[1] / "data"
FAMILY = DATA / "family_0x_configs"
MMDET2 = DATA / "mmdet2_configs"

# (config, its toolbox, the evidence its contents give)
OLD_CONFIGS = [
    ("mmsegmentation-0.30.0/configs/pspnet/pspnet_r18-d8_512x1024_80k_cityscapes.py", "mmseg", "EncoderDecoder"),
    ("mmsegmentation-0.30.0/configs/deeplabv3/deeplabv3_r50-d8_512x512_80k_ade20k.py", "mmseg", "EncoderDecoder"),
    ("mmclassification-0.25.0/configs/resnet/resnet18_8xb32_in1k.py", "mmpretrain", "ImageClassifier"),
    (
        "mmpose-0.29.0/configs/body/2d_kpt_sview_rgb_img/topdown_heatmap/coco/res50_coco_256x192.py",
        "mmpose",
        "TopDown",
    ),
    (
        "mmdetection3d-1.0.0rc6/configs/pointpillars/hv_pointpillars_secfpn_6x8_160e_kitti-3d-car.py",
        "mmdet3d",
        "VoxelNet",
    ),
    ("mmdetection3d-1.0.0rc6/configs/votenet/votenet_16x8_sunrgbd-3d-10class.py", "mmdet3d", "VoteNet"),
]
NUIMAGES = FAMILY / "mmdetection3d-1.0.0rc6/configs/nuimages/mask_rcnn_r50_fpn_1x_nuim.py"


def load(path: Path | str) -> dict:
    from mmengine.config import Config

    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)  # stock: the merged old dict
    return fromfile(str(path), import_custom_modules=False).to_dict()


@pytest.mark.parametrize(("relative", "toolbox", "model"), OLD_CONFIGS)
def test_official_old_configs_are_their_toolboxs_by_contents_alone(relative, toolbox, model):
    cfg = load(FAMILY / relative)
    assert classify(cfg) == "2.x"
    found = detect(cfg)
    assert found.toolbox == toolbox and f"model type {model}" in found.evidence
    # the folders and a loader of another toolbox do not outweigh the model type
    other = Loader(caller="mmdet.apis.inference", script="/x/mmdet/.mim/tools/train.py", scope="mmdet")
    assert detect(cfg, ["/x/mmdetection/configs/a.py"], other).toolbox == toolbox


@pytest.mark.parametrize(("relative", "toolbox", "model"), [c for c in OLD_CONFIGS if c[1] not in CONVERTERS])
def test_old_config_of_a_toolbox_without_rules_is_one_clear_error_naming_only_it(relative, toolbox, model):
    path = FAMILY / relative
    cfg = load(path)
    with pytest.raises(ConfigConversionError) as info:
        check_toolbox(cfg, "2.x", str(path), config_files(str(path)))
    exc = info.value
    text = str(exc)
    old, new, guide = TOOLBOXES[toolbox]
    assert exc.exit_status == 2 and exc.value == toolbox
    assert f"{path} is an {old} config (model type {model})" in text
    assert "not available in this mmfix version" in text and "Nothing was converted or run" in text
    assert "lr_config" in text and "optimizer_config" in exc.key  # what makes it old-format
    assert f"Use the {new} config" in text and guide in text
    assert "\n" not in text
    if toolbox != "mmdet3d":  # MMDetection3D's own name holds the word
        assert "MMDetection" not in text


def test_nuimages_configs_are_mmdetection3ds_by_their_folder():
    # MMDetection3D 1.0's nuImages configs are MMDetection models and datasets in MMDetection3D's zoo
    cfg = load(NUIMAGES)
    assert detect(cfg).toolbox == "mmdet"
    found = detect(cfg, config_files(str(NUIMAGES)))
    assert found.toolbox == "mmdet3d" and "config tree" in found.evidence
    with pytest.raises(ConfigConversionError, match=r"MMDetection3D 1\.0 config"):
        check_toolbox(cfg, "2.x", str(NUIMAGES), config_files(str(NUIMAGES)))


def test_config_files_follow_base_files_transitively():
    path = FAMILY / OLD_CONFIGS[0][0]
    files = [os.path.relpath(p, FAMILY / "mmsegmentation-0.30.0/configs") for p in config_files(str(path))]
    assert files == [
        "pspnet/pspnet_r18-d8_512x1024_80k_cityscapes.py",
        "pspnet/pspnet_r50-d8_512x1024_80k_cityscapes.py",
        "_base_/models/pspnet_r50-d8.py",
        "_base_/datasets/cityscapes.py",
        "_base_/default_runtime.py",
        "_base_/schedules/schedule_80k.py",
    ]


def test_committed_mmdetection_2x_configs_are_mmdetections_and_convert():
    configs = sorted(p for p in MMDET2.rglob("*.py") if p.relative_to(MMDET2).parts[0] not in ("_base_", "common"))
    assert len(configs) > 20
    for path in configs:
        cfg = load(path)
        found = check_toolbox(cfg, classify(cfg), str(path), config_files(str(path)))
        assert found.toolbox == "mmdet", (path, found)


def _shared_wheel() -> Path:
    from mmdet2_support import WHEELS, _unavailable

    wheel = WHEELS / "mmdet-2.28.2-py3-none-any.whl"
    if not wheel.is_file():
        _unavailable(f"{wheel} not found (set MMFIX_MMCV_WHEELS to the wheels' folder)")
    return wheel


@pytest.mark.slow
def test_every_official_mmdetection_2_28_2_config_is_mmdetections(tmp_path):
    with zipfile.ZipFile(_shared_wheel()) as zf:
        zf.extractall(tmp_path, [n for n in zf.namelist() if n.startswith("mmdet/.mim/configs/")])
    root = tmp_path / "mmdet" / ".mim" / "configs"
    configs = sorted(p for p in root.rglob("*.py") if p.relative_to(root).parts[0] not in ("_base_", "common"))
    assert len(configs) == 628
    wrong = []
    for path in configs:
        cfg = load(path)
        assert classify(cfg) == "2.x", path
        by_contents, by_all = detect(cfg), detect(cfg, config_files(str(path)), Loader(scope="mmseg"))
        if by_contents.toolbox != "mmdet" or by_all.toolbox != "mmdet":
            wrong.append((path.relative_to(root), by_contents, by_all))
    assert not wrong, wrong[:5]


def _custom(**extra: object) -> dict:
    # a user's 2.x config whose model and dataset types no toolbox's table holds
    return {
        "model": {"type": "MyNet"},
        "data": {"samples_per_gpu": 2, "train": {"type": "MyData"}},
        "lr_config": {"policy": "step"},
        **extra,
    }


@pytest.mark.parametrize(
    ("loader", "toolbox"),
    [
        (None, None),
        (Loader(caller="mmseg.apis.inference"), "mmseg"),
        (Loader(caller="mmcls.apis"), "mmpretrain"),
        (Loader(script="/env/lib/python3.11/site-packages/mmpose/.mim/tools/train.py"), "mmpose"),
        (Loader(script="/home/u/mmdetection3d-main/tools/train.py"), "mmdet3d"),
        (Loader(script="/home/u/mmdetection/tools/train.py"), "mmdet"),
        (Loader(scope="mmdet3d"), "mmdet3d"),
        (Loader(caller="my_project.train", script="/home/u/train.py", scope="mmengine"), None),
        # the caller module outranks the script, the script the scope
        (Loader(caller="mmseg.apis", script="/x/mmpose/tools/train.py", scope="mmdet"), "mmseg"),
        (Loader(script="/x/mmpose/tools/train.py", scope="mmdet"), "mmpose"),
    ],
)
def test_loader_tells_only_where_the_contents_do_not(loader, toolbox):
    assert detect(_custom(), ["/home/u/exp/cfg.py"], loader).toolbox == toolbox


@pytest.mark.parametrize(("relative", "toolbox", "model"), [c for c in OLD_CONFIGS if c[1] in CONVERTERS])
def test_old_config_of_a_toolbox_with_rules_goes_on_to_its_own_rules(relative, toolbox, model):
    path = FAMILY / relative
    found = check_toolbox(load(path), "2.x", str(path), config_files(str(path)))
    assert found.toolbox == toolbox and rules_for(found) == toolbox


def test_unknown_toolbox_goes_on_to_mmdetections_conversion_and_another_loaders_stops():
    found = check_toolbox(_custom(), "2.x", "cfg.py")
    assert found.toolbox is None and rules_for(found) == "mmdet"
    with pytest.raises(ConfigConversionError) as info:
        check_toolbox(_custom(), "2.x", "cfg.py", (), Loader(caller="mmdet3d.apis"))
    assert "MMDetection3D 1.0 config (loaded by mmdet3d.apis)" in str(info.value)
    assert not re.search(r"MMDetection(?!3D)", str(info.value))  # never called MMDetection's
    found = check_toolbox(_custom(), "2.x", "cfg.py", (), Loader(caller="mmseg.apis"))
    assert found.toolbox == "mmseg" and rules_for(found) == "mmseg"


def test_current_format_config_of_another_toolbox_is_not_refused():
    # MMSegmentation 1.x configs keep a top-level `optimizer` helper variable ('mixed' by its keys)
    cfg = {
        "model": {"type": "EncoderDecoder", "data_preprocessor": {}},
        "optimizer": {"type": "SGD", "lr": 0.01},
        "optim_wrapper": {"optimizer": {"type": "SGD", "lr": 0.01}},
        "train_dataloader": {},
    }
    assert classify(cfg) == "mixed"
    assert check_toolbox(cfg, "mixed", "cfg.py").toolbox == "mmseg"  # not raised: the caller leaves it


@pytest.mark.parametrize(
    ("dataset", "toolbox"),
    [
        ({"type": "CityscapesDataset", "img_dir": "leftImg8bit", "ann_dir": "gtFine"}, "mmseg"),
        ({"type": "CityscapesDataset", "img_prefix": "leftImg8bit/"}, "mmdet"),
        ({"type": "DeepFashionDataset", "data_cfg": {}}, "mmpose"),
        ({"type": "DeepFashionDataset", "img_prefix": "img/"}, "mmdet"),
        ({"type": "RepeatDataset", "times": 2, "dataset": {"type": "KittiDataset"}}, "mmdet3d"),
        ({"type": "ConcatDataset", "datasets": [{"type": "CustomDataset"}, {"type": "ImageNet"}]}, "mmpretrain"),
        ({"type": "mmpose.MyDataset"}, "mmpose"),
        ({"type": "CustomDataset"}, None),
    ],
)
def test_dataset_rows_tell_shared_names_apart_by_their_keys(dataset, toolbox):
    cfg = {"model": {"type": "MyNet"}, "data": {"train": dataset}}
    assert detect(cfg).toolbox == toolbox


def test_folders_count_only_as_a_toolboxs_config_tree():
    cfg = _custom()
    assert detect(cfg, ["/home/u/mmseg_runs/cfg.py"]).toolbox is None  # a folder name alone is no zoo
    assert detect(cfg, ["/home/u/mmdet2-runs/configs/cfg.py"]).toolbox is None
    assert detect(cfg, ["/x/mmsegmentation-0.30.0/configs/my/cfg.py"]).toolbox == "mmseg"
    assert detect(cfg, ["/env/site-packages/mmcls/.mim/configs/resnet/r.py"]).toolbox == "mmpretrain"
    assert detect(_custom(default_scope="mmpose")).toolbox == "mmpose"


def test_tables_have_one_row_per_type_and_known_toolboxes():
    names = [t for t, _ in MODEL_TYPES]
    assert len(names) == len(set(names))
    assert {tb for _, tb in MODEL_TYPES} == set(TOOLBOXES)
    rows = [(t, key) for t, _, key in DATASET_TYPES]
    assert len(rows) == len(set(rows)) and {tb for _, tb, _ in DATASET_TYPES} == set(TOOLBOXES)
    for name in {t for t, _, _ in DATASET_TYPES}:
        keys = [key for t, _, key in DATASET_TYPES if t == name]
        assert keys.count("") <= 1 and (keys[-1] == "" or "" not in keys), name  # the keyless row comes last
