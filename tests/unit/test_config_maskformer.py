"""MaskFormer / Mask2Former rules on the real official 2.28.2 configs (tests/data/mmdet2_configs).

The 2.x heads built their transformers from mmcv's generic layer configs; 3.x's take one fixed
``layer_cfg``. These tests feed the official files (and variants of them a user could write) to the
pure converter and build the result with MMDetection 3.3.0's registry where the point is what 3.x
builds. Whole-model checks (every official config, hyper-parameters against 3.3.0's own configs and
against the model 2.28.2 builds, weights, predictions) are in
tests/integration/test_rebuilt_families_maskformer.py.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from mmfix._configs import convert
from mmfix._errors import ConfigConversionError

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "mmdet2_configs"
MASKFORMER = "maskformer/maskformer_r50_mstrain_16x1_75e_coco.py"
MASK2FORMER = "mask2former/mask2former_r50_lsj_8x2_50e_coco-panoptic.py"


def loaded(relative: str) -> dict[str, Any]:
    from mmengine.config import Config

    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)  # the stock loader: 2.x dict in
    return fromfile(str(CONFIGS / relative)).to_dict()


def build(model: dict) -> Any:
    from mmdet_support import require_mmdet

    require_mmdet()
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import ConfigDict

    register_all_modules()
    model = copy.deepcopy(model)
    model["backbone"]["init_cfg"] = None
    return MODELS.build(ConfigDict(model))


def test_maskformer_decoder_layers_keep_the_ffn_dropout_2x_built_not_the_one_its_config_wrote():
    cfg = loaded(MASKFORMER)
    written = cfg["model"]["panoptic_head"]["transformer_decoder"]["transformerlayers"]["ffn_cfgs"]["ffn_drop"]
    assert written == 0.1  # the official file says 0.1; 2.x's DetrTransformerDecoderLayer passed 0.0 over it
    out, report = convert(cfg)
    decoder = out["model"]["panoptic_head"]["transformer_decoder"]
    assert decoder["layer_cfg"]["ffn_cfg"]["ffn_drop"] == 0.0
    assert any("ffn_cfgs.ffn_drop=0.1 never counted in 2.x" in note for note in report.notes)
    # The encoder's BaseTransformerLayer passed nothing over its ffn_cfgs: 0.1 stays.
    encoder = out["model"]["panoptic_head"]["pixel_decoder"]["encoder"]
    assert encoder["layer_cfg"]["ffn_cfg"]["ffn_drop"] == 0.1
    model = build(out["model"])
    layer = model.panoptic_head.transformer_decoder.layers[0]
    assert [m.p for m in layer.ffn.modules() if type(m).__name__ == "Dropout"] == [0.0, 0.0]
    enc_layer = model.panoptic_head.pixel_decoder.encoder.layers[0]
    assert [m.p for m in enc_layer.ffn.modules() if type(m).__name__ == "Dropout"] == [0.1, 0.1]


@pytest.mark.parametrize(
    "relative, first, second",
    [(MASKFORMER, "self_attn_cfg", "cross_attn_cfg"), (MASK2FORMER, "cross_attn_cfg", "self_attn_cfg")],
)
def test_per_attention_configs_go_to_the_attention_at_their_place_in_the_operation_order(relative, first, second):
    cfg = loaded(relative)
    layer = cfg["model"]["panoptic_head"]["transformer_decoder"]["transformerlayers"]
    shared = layer["attn_cfgs"]
    layer["attn_cfgs"] = [dict(shared, num_heads=4), dict(shared, num_heads=2)]
    out, _ = convert(cfg)
    layer_cfg = out["model"]["panoptic_head"]["transformer_decoder"]["layer_cfg"]
    assert (layer_cfg[first]["num_heads"], layer_cfg[second]["num_heads"]) == (4, 2)
    built = build(out["model"]).panoptic_head.transformer_decoder.layers[0]
    assert getattr(built, first[: -len("_cfg")]).num_heads == 4
    assert getattr(built, second[: -len("_cfg")]).num_heads == 2


def test_attention_arguments_pass_as_2x_spelled_them_and_run_batch_first():
    out, _ = convert(loaded(MASKFORMER))
    attn = out["model"]["panoptic_head"]["transformer_decoder"]["layer_cfg"]["self_attn_cfg"]
    assert attn == {
        "embed_dims": 256,
        "num_heads": 8,
        "attn_drop": 0.1,
        "proj_drop": 0.1,
        "dropout_layer": None,
        "batch_first": True,
    }
    deform = convert(loaded(MASK2FORMER))[0]["model"]["panoptic_head"]["pixel_decoder"]["encoder"]["layer_cfg"]
    assert deform["self_attn_cfg"]["num_levels"] == 3 and deform["self_attn_cfg"]["num_points"] == 4
    assert "type" not in deform["self_attn_cfg"] and deform["self_attn_cfg"]["batch_first"] is True


def test_decoder_returns_only_its_last_layer_when_2x_said_nothing_as_2x_did():
    cfg = loaded(MASK2FORMER)
    del cfg["model"]["panoptic_head"]["transformer_decoder"]["return_intermediate"]
    out, _ = convert(cfg)
    assert out["model"]["panoptic_head"]["transformer_decoder"]["return_intermediate"] is False
    assert build(out["model"]).panoptic_head.transformer_decoder.return_intermediate is False


def test_equal_per_layer_configs_convert_and_differing_ones_are_refused():
    cfg = loaded(MASKFORMER)
    seq = cfg["model"]["panoptic_head"]["transformer_decoder"]
    seq["transformerlayers"] = [copy.deepcopy(seq["transformerlayers"]) for _ in range(seq["num_layers"])]
    out, _ = convert(copy.deepcopy(cfg))
    assert out["model"]["panoptic_head"]["transformer_decoder"]["num_layers"] == 6
    seq["transformerlayers"][3]["attn_cfgs"]["num_heads"] = 4
    with pytest.raises(ConfigConversionError, match=r"transformer_decoder\.transformerlayers.*one layer_cfg"):
        convert(cfg)


def _set(cfg: dict[str, Any], path: str, value: Any) -> None:
    node = cfg
    *parents, last = path.split(".")
    for key in parents:
        node = node[key]
    node[last] = value


@pytest.mark.parametrize(
    "relative, path, value, key, fragment",
    [
        (
            MASKFORMER,
            "model.panoptic_head.transformer_decoder.transformerlayers.operation_order",
            ("norm", "self_attn", "norm", "cross_attn", "norm", "ffn"),
            "model.panoptic_head.transformer_decoder.transformerlayers.operation_order",
            "fixed order ('self_attn', 'norm', 'cross_attn', 'norm', 'ffn', 'norm')",
        ),
        (
            MASK2FORMER,
            "model.panoptic_head.transformer_decoder.transformerlayers.operation_order",
            ("self_attn", "norm", "cross_attn", "norm", "ffn", "norm"),
            "model.panoptic_head.transformer_decoder.transformerlayers.operation_order",
            "fixed order ('cross_attn', 'norm', 'self_attn', 'norm', 'ffn', 'norm')",
        ),
        (
            MASK2FORMER,
            "model.panoptic_head.positional_encoding",
            {"type": "LearnedPositionalEncoding", "num_feats": 128, "row_num_embed": 50, "col_num_embed": 50},
            "model.panoptic_head.positional_encoding.type",
            "always builds SinePositionalEncoding",
        ),
        (
            MASKFORMER,
            "model.panoptic_head.pixel_decoder.type",
            "FPNPixelDecoder",
            "model.panoptic_head.pixel_decoder.type",
            "MSDeformAttnPixelDecoder, PixelDecoder, TransformerEncoderPixelDecoder",
        ),
        (
            MASKFORMER,
            "model.panoptic_head.transformer_decoder.post_norm_cfg",
            None,
            "model.panoptic_head.transformer_decoder.post_norm_cfg",
            "always end with a normalisation layer",
        ),
        (
            MASK2FORMER,
            "model.panoptic_head.pixel_decoder.encoder.transformerlayers.attn_cfgs.type",
            "MultiheadAttention",
            "model.panoptic_head.pixel_decoder.encoder.transformerlayers.attn_cfgs.type",
            "always builds MultiScaleDeformableAttention",
        ),
    ],
)
def test_what_3x_cannot_build_is_one_error_naming_key_value_and_what_3x_offers(relative, path, value, key, fragment):
    cfg = loaded(relative)
    _set(cfg, path, value)
    with pytest.raises(ConfigConversionError) as caught:
        convert(cfg)
    assert caught.value.key == key
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_panoptic_lsj_batch_pad_pads_masks_and_maps_as_2x_pad_did():
    # 2.x's Pad(size=(1024, 1024)) after Normalize padded image, masks and panoptic map alike; the
    # BatchFixedSizePad it becomes must too, or Mask2Former's point-sampled targets would not line up.
    out, _ = convert(loaded(MASK2FORMER))
    pre = out["model"]["data_preprocessor"]
    assert pre["batch_augments"] == [
        {"type": "BatchFixedSizePad", "size": [1024, 1024], "pad_mask": True, "pad_seg": True}
    ]
    import torch

    model = build(out["model"])
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData, PixelData

    sample = DetDataSample(metainfo={"img_shape": (40, 60), "ori_shape": (40, 60)})
    sample.gt_instances = InstanceData(
        masks=BitmapMasks(torch.ones(1, 40, 60, dtype=torch.uint8).numpy(), 40, 60),
        labels=torch.tensor([0]),
        bboxes=torch.tensor([[0.0, 0.0, 60.0, 40.0]]),
    )
    sample.gt_sem_seg = PixelData(sem_seg=torch.zeros(1, 40, 60, dtype=torch.uint8))
    data = model.data_preprocessor(
        {"inputs": [torch.zeros(3, 40, 60, dtype=torch.uint8)], "data_samples": [sample]}, training=True
    )
    padded = data["data_samples"][0]
    assert tuple(data["inputs"].shape[-2:]) == (1024, 1024)
    assert padded.gt_instances.masks.masks.shape[-2:] == (1024, 1024)
    assert tuple(padded.gt_sem_seg.sem_seg.shape[-2:]) == (1024, 1024)


def test_panoptic_instance_evaluation_moves_from_the_dataset_to_a_coco_metric():
    # 2.x's CocoPanopticDataset evaluated bbox/segm against ins_ann_file; 3.x's dataset refuses the
    # argument, and a CocoMetric beside CocoPanopticMetric evaluates them (as 3.3.0's configs do).
    out, _ = convert(loaded(MASK2FORMER))
    for name in ("val", "test"):
        assert "ins_ann_file" not in out[f"{name}_dataloader"]["dataset"]
        assert out[f"{name}_evaluator"] == [
            {
                "type": "CocoPanopticMetric",
                "ann_file": "data/coco/annotations/panoptic_val2017.json",
                "seg_prefix": "data/coco/annotations/panoptic_val2017/",
            },
            {
                "type": "CocoMetric",
                "ann_file": "data/coco/annotations/instances_val2017.json",
                "metric": ["bbox", "segm"],
                "format_only": False,
            },
        ]
    cfg = loaded(MASK2FORMER)
    del cfg["data"]["val"]["ins_ann_file"]
    with pytest.raises(ConfigConversionError, match="ins_ann_file"):
        convert(cfg)
