"""DETR, Deformable DETR, Cascade RPN and Ascend-head rules on the real official 2.28.2 configs.

The 2.x files are copied unchanged from the mmdet==2.28.2 wheel (tests/data/mmdet2_configs); each
converted model must build in MMDetection 3.3.0, and where 3.3.0's zoo has the same model, the
converted model config must say what 3.3.0's official config says.
"""

from __future__ import annotations

import copy
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from test_config_models import CONFIGS, build, converted

from mmfix._configs import _mmdet_detr
from mmfix._errors import ConfigConversionError

OFFICIAL_2X = sorted(
    str(p.relative_to(CONFIGS))
    for family in ("detr", "deformable_detr", "cascade_rpn")
    for p in (CONFIGS / family).glob("*.py")
) + ["retinanet/ascend_retinanet_r18_fpn_1x8_1x_coco.py", "ssd/ascend_ssd300_coco.py"]


def test_every_official_config_of_the_families_is_here():
    # The copies are the whole of 2.28.2's folders (9 configs): none left out of the tests below.
    assert len(OFFICIAL_2X) == 9, OFFICIAL_2X


@pytest.mark.parametrize("relative", OFFICIAL_2X)
def test_official_config_converts_and_builds_on_330(relative: str):
    out, _ = converted(relative)
    model = build(out["model"])
    assert type(model).__name__ == out["model"]["type"]
    assert not re.search(r"'type': 'Ascend", repr(out["model"]))


# --- the same model in both zoos -----------------------------------------------------------------------
PAIRS = {
    "detr/detr_r50_8x2_150e_coco.py": "detr/detr_r50_8xb2-150e_coco.py",
    "deformable_detr/deformable_detr_r50_16x2_50e_coco.py": "deformable_detr/deformable-detr_r50_16xb2-50e_coco.py",
    "deformable_detr/deformable_detr_refine_r50_16x2_50e_coco.py": (
        "deformable_detr/deformable-detr-refine_r50_16xb2-50e_coco.py"
    ),
    "deformable_detr/deformable_detr_twostage_refine_r50_16x2_50e_coco.py": (
        "deformable_detr/deformable-detr-refine-twostage_r50_16xb2-50e_coco.py"
    ),
}


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_flat(value, f"{prefix}.{key}" if prefix else key))
        return out
    if isinstance(node, (list, tuple)) and node and all(isinstance(v, dict) for v in node):
        return {k: v for i, value in enumerate(node) for k, v in _flat(value, f"{prefix}[{i}]").items()}
    return {prefix: list(node) if isinstance(node, tuple) else node}


def _constructor_default(model_type: str, key: str) -> Any:
    """What 3.3.0's constructor takes for ``key`` when a config leaves it out."""
    from mmcv.cnn.bricks.transformer import FFN
    from mmdet.models import layers
    from mmdet.registry import MODELS

    deformable = model_type == "DeformableDETR"
    owners = {
        r"^encoder\.layer_cfg\.ffn_cfg\.|^decoder\.layer_cfg\.ffn_cfg\.": FFN,
        r"^encoder\.layer_cfg\.": layers.DeformableDetrTransformerEncoderLayer
        if deformable
        else layers.DetrTransformerEncoderLayer,
        r"^decoder\.layer_cfg\.": layers.DeformableDetrTransformerDecoderLayer
        if deformable
        else layers.DetrTransformerDecoderLayer,
        r"^decoder\.": layers.DeformableDetrTransformerDecoder if deformable else layers.DetrTransformerDecoder,
        r"^bbox_head\.": MODELS.get("DeformableDETRHead" if deformable else "DETRHead"),
    }
    for pattern, owner in owners.items():
        match = re.match(pattern, key)
        if match:
            rest = key[match.end() :].split(".")
            # the first class in the MRO whose constructor names it (subclasses pass **kwargs on)
            value = next(
                inspect.signature(cls.__init__).parameters[rest[0]].default
                for cls in owner.__mro__
                if rest[0] in inspect.signature(cls.__init__).parameters
            )
            for part in rest[1:]:
                value = value[part]
            return value
    raise KeyError(key)


@pytest.mark.parametrize("relative", sorted(PAIRS))
def test_converted_model_equals_330s_official_config_of_the_same_model(relative: str):
    from mmdet_support import require_mmdet

    require_mmdet()
    from mmengine.config import Config

    official = Path(__import__("mmdet").__file__).parent / ".mim" / "configs" / PAIRS[relative]
    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)
    ours, theirs = _flat(converted(relative)[0]["model"]), _flat(fromfile(str(official)).model.to_dict())
    assert set(theirs) <= set(ours), sorted(set(theirs) - set(ours))
    for key in sorted(set(ours) | set(theirs)):
        if key in theirs:
            assert ours[key] == theirs[key], (key, ours[key], theirs[key])
        else:  # written out by the converter: must be what 3.3.0 takes when it is left out
            assert ours[key] == _constructor_default(ours["type"], key), key
    # The hyper-parameters that make the model, said once more by name.
    for key in ("num_queries", "encoder.num_layers", "decoder.num_layers", "positional_encoding.offset"):
        assert ours.get(key) == theirs.get(key), key


# --- rules on variations of the official configs ---------------------------------------------------------
def _model(relative: str) -> dict[str, Any]:
    from mmengine.config import Config

    fromfile = getattr(Config.fromfile, "__wrapped__", Config.fromfile)
    return copy.deepcopy(fromfile(str(CONFIGS / relative)).model.to_dict())


def _convert(model: dict[str, Any]) -> dict[str, Any]:
    from mmfix._configs import convert

    return convert({"model": model})[0]["model"]


def test_detr_input_projection_becomes_a_channel_mapper_neck():
    model = _convert(_model("detr/detr_r50_8x2_150e_coco.py"))
    assert model["neck"] == {
        "type": "ChannelMapper",
        "in_channels": [2048],
        "kernel_size": 1,
        "out_channels": 256,
        "act_cfg": None,
        "norm_cfg": None,
        "num_outs": 1,
    }
    assert "in_channels" not in model["bbox_head"] and "transformer" not in model["bbox_head"]


def test_two_stage_queries_are_2x_two_stage_num_proposals():
    model = _model("deformable_detr/deformable_detr_twostage_refine_r50_16x2_50e_coco.py")
    model["bbox_head"]["num_query"] = 100  # 2.x's two-stage decoder ignored it
    model["bbox_head"]["transformer"]["two_stage_num_proposals"] = 200
    out = _convert(model)
    assert out["num_queries"] == 200 and out["as_two_stage"] is True and out["with_box_refine"] is True


def test_2x_defaults_are_written_out():
    model = _model("detr/detr_r50_8x2_150e_coco.py")
    head = model["bbox_head"]
    head.pop("positional_encoding")
    head["transformer"]["decoder"].pop("return_intermediate")
    head["transformer"]["encoder"]["transformerlayers"].pop("feedforward_channels")
    out = _convert(model)
    # 2.x DETRHead's default encoding; 2.x's decoder default (3.x's is True); mmcv 1.x's FFN width.
    assert out["positional_encoding"] == {"num_feats": 128, "normalize": True}
    assert out["decoder"]["return_intermediate"] is False
    assert out["encoder"]["layer_cfg"]["ffn_cfg"]["feedforward_channels"] == 1024


def test_bbox_l1_cost_keeps_2x_default_box_format():
    model = _model("detr/detr_r50_8x2_150e_coco.py")
    model["train_cfg"]["assigner"]["reg_cost"].pop("box_format")
    costs = _convert(model)["train_cfg"]["assigner"]["match_costs"]
    assert costs[1] == {"type": "BBoxL1Cost", "weight": 5.0, "box_format": "xyxy"}  # 2.x's default


@pytest.mark.parametrize(
    "change, key",
    [
        (
            lambda m: m["bbox_head"]["transformer"]["encoder"]["transformerlayers"].update(
                operation_order=("norm", "self_attn", "norm", "ffn")
            ),
            "operation_order",
        ),
        (lambda m: m["bbox_head"].update(positional_encoding={"type": "LearnedPositionalEncoding"}), "positional"),
        (lambda m: m.update(neck={"type": "FPN"}), "model.neck"),
        (
            lambda m: m["bbox_head"]["transformer"]["encoder"]["transformerlayers"]["attn_cfgs"][0].update(
                type="MultiScaleDeformableAttention"
            ),
            "attn_cfgs",
        ),
    ],
    ids=["pre-norm", "learned-encoding", "neck", "attention-type"],
)
def test_what_3x_detr_cannot_express_is_one_clear_error(change, key):
    model = _model("detr/detr_r50_8x2_150e_coco.py")
    change(model)
    with pytest.raises(ConfigConversionError, match=re.escape(key)) as caught:
        _convert(model)
    assert "3.x" in str(caught.value)


def test_cascade_rpn_gets_num_classes_1():
    out, _ = converted("cascade_rpn/crpn_r50_caffe_fpn_1x_coco.py")
    assert out["model"]["rpn_head"]["num_classes"] == 1
    assert all("sampling" not in stage for stage in out["model"]["rpn_head"]["stages"])


@pytest.mark.parametrize("relative", ["retinanet/ascend_retinanet_r18_fpn_1x8_1x_coco.py", "ssd/ascend_ssd300_coco.py"])
def test_ascend_types_become_the_plain_modules_with_a_note(relative: str):
    original = _model(relative)
    out, report = converted(relative)
    assert out["model"]["bbox_head"]["type"] == _mmdet_detr.ASCEND_TYPES[original["bbox_head"]["type"]]
    assert out["model"]["train_cfg"]["assigner"]["type"] == "MaxIoUAssigner"
    assert any("AscendMaxIoUAssigner became MaxIoUAssigner" in note for note in report.notes)
    assert any(f"{original['bbox_head']['type']} became" in note for note in report.notes)
