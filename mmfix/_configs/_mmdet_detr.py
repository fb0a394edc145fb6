"""MMDetection model rules for the families 3.x rebuilt: DETR, Deformable DETR, Cascade RPN, Ascend heads.

DETR and Deformable DETR: 2.x kept the whole transformer inside the head (``bbox_head.transformer``
with mmcv's generic ``BaseTransformerLayer`` configs, ``bbox_head.positional_encoding``,
``bbox_head.num_query``); 3.0 moved it to the detector (``encoder`` / ``decoder`` /
``positional_encoding`` / ``num_queries``, ``with_box_refine`` / ``as_two_stage``), fixed each layer's
type and order, and runs it batch-first. The rules below rewrite one into the other value for
value, and refuse (one ``ConfigConversionError``) what 3.x's fixed layers cannot express — a layer
order other than post-norm, a learned positional encoding, an attention type 3.x does not build
there — rather than build a model that means something else.

Pure: dict in, dict out, plus the report.
"""

from __future__ import annotations

import copy
from typing import Any

from .._errors import ConfigConversionError
from ._report import Report

# --- Ascend heads: 2.x's NPU variants of plain modules ------------------------------------------------
#: 2.x type -> the 3.x module that computes the same thing. Each Ascend class in MMDetection 2.28.2
#: subclasses the plain one and overrides only target assignment and the loss (batched, with padded
#: ground truth, for static shapes on the NPU): forward and get_bboxes are inherited unchanged, and
#: AscendMaxIoUAssigner takes MaxIoUAssigner's arguments and assigns by the same rules.
ASCEND_TYPES: dict[str, str] = {
    "AscendAnchorHead": "AnchorHead",
    "AscendRetinaHead": "RetinaHead",
    "AscendSSDHead": "SSDHead",
    "AscendMaxIoUAssigner": "MaxIoUAssigner",
}


def _ascend(node: Any, where: str, report: Report) -> None:
    if isinstance(node, dict):
        old = node.get("type")
        if isinstance(old, str) and old in ASCEND_TYPES:
            node["type"] = ASCEND_TYPES[old]
            report.moved(f"{where}.type={old}", f"{where}.type={ASCEND_TYPES[old]}")
            report.note(
                f"{where}: {old} became {ASCEND_TYPES[old]} (3.x has no Ascend variants; 2.x's {old} "
                f"computed the same outputs as {ASCEND_TYPES[old]}, with a batched target assignment "
                "for NPUs)"
            )
        for key, value in node.items():
            _ascend(value, f"{where}.{key}", report)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _ascend(value, f"{where}[{i}]", report)


# --- Cascade RPN ---------------------------------------------------------------------------------------
def _cascade_rpn(model: dict[str, Any], report: Report) -> None:
    rpn = model.get("rpn_head")
    if isinstance(rpn, dict) and rpn.get("type") == "CascadeRPNHead" and "num_classes" not in rpn:
        # 2.x's CascadeRPNHead scored objectness only; 3.x asks for num_classes and accepts only 1.
        # (Two-stage detectors fill it in; the plain RPN detector does not.)
        rpn["num_classes"] = 1
        report.moved("model.rpn_head (CascadeRPNHead, class-agnostic)", "model.rpn_head.num_classes=1")


# --- DETR and Deformable DETR -------------------------------------------------------------------------
_POST_NORM_ENCODER = ("self_attn", "norm", "ffn", "norm")
_POST_NORM_DECODER = ("self_attn", "norm", "cross_attn", "norm", "ffn", "norm")

#: detector -> (2.x transformer type, attention types of 3.x's fixed layers by role)
_DETR_FAMILIES: dict[str, tuple[str, dict[str, str]]] = {
    "DETR": (
        "Transformer",
        {
            "encoder.self_attn": "MultiheadAttention",
            "decoder.self_attn": "MultiheadAttention",
            "decoder.cross_attn": "MultiheadAttention",
        },
    ),
    "DeformableDETR": (
        "DeformableDetrTransformer",
        {
            "encoder.self_attn": "MultiScaleDeformableAttention",
            "decoder.self_attn": "MultiheadAttention",
            "decoder.cross_attn": "MultiScaleDeformableAttention",
        },
    ),
}

#: mmcv 1.x BaseTransformerLayer's FFN default, and its deprecated layer-level FFN arguments.
_FFN_DEFAULT = {
    "embed_dims": 256,
    "feedforward_channels": 1024,
    "num_fcs": 2,
    "ffn_drop": 0.0,
    "act_cfg": {"type": "ReLU", "inplace": True},
}
_FFN_DEPRECATED = {"feedforward_channels": "feedforward_channels", "ffn_dropout": "ffn_drop", "ffn_num_fcs": "num_fcs"}
#: 2.x DETRHead's positional encoding when the config gave none (3.x has no default at all).
_POSITIONAL_DEFAULT = {"type": "SinePositionalEncoding", "num_feats": 128, "normalize": True}


def _refuse(key: str, value: Any, why: str) -> ConfigConversionError:
    return ConfigConversionError(key, value, why)


def _layer(cfg: Any, where: str, kind: str, order: tuple[str, ...], roles: dict[str, str]) -> dict[str, Any]:
    """One 2.x BaseTransformerLayer config -> 3.x's ``layer_cfg`` (self_attn_cfg, cross_attn_cfg, ffn_cfg)."""
    cfg = copy.deepcopy(dict(cfg))
    cfg.pop("type", None)
    got = tuple(cfg.pop("operation_order", ()) or ())
    if got != order:
        raise _refuse(
            f"{where}.operation_order",
            got,
            f"3.x's DETR layers run exactly {order} (post-norm); another order cannot be expressed there.",
        )
    if cfg.pop("batch_first", False):
        raise _refuse(f"{where}.batch_first", True, "2.x's DETR transformers ran sequence-first only.")
    attn = cfg.pop("attn_cfgs")
    names = [op for op in order if op.endswith("attn")]
    attns = [copy.deepcopy(attn) for _ in names] if isinstance(attn, dict) else list(attn)
    if len(attns) != len(names):
        raise _refuse(f"{where}.attn_cfgs", attn, f"the layer runs {len(names)} attention(s): {names}.")
    out: dict[str, Any] = {}
    embed_dims = None
    for name, a in zip(names, attns):
        a = dict(a)
        role = f"{kind}.{name}"
        expected = roles[role]
        if a.pop("type", expected) != expected:
            raise _refuse(f"{where}.attn_cfgs ({role})", attn, f"3.x builds a {expected} there.")
        a["batch_first"] = True  # 3.x's layers pass (batch, queries, dims)
        embed_dims = embed_dims or a.get("embed_dims", 256)
        out[f"{name}_cfg"] = a
    ffn = cfg.pop("ffn_cfgs", None)
    ffn = dict(_FFN_DEFAULT if ffn is None else (ffn[0] if isinstance(ffn, list) else ffn))
    if ffn.pop("type", "FFN") != "FFN":
        raise _refuse(f"{where}.ffn_cfgs", ffn, "3.x's DETR layers build mmcv's FFN.")
    for old, new in _FFN_DEPRECATED.items():
        if old in cfg:
            ffn[new] = cfg.pop(old)
    ffn.setdefault("embed_dims", embed_dims)  # BaseTransformerLayer filled it from the attention
    out["ffn_cfg"] = {**{k: v for k, v in _FFN_DEFAULT.items() if k != "embed_dims"}, **ffn}
    out["norm_cfg"] = cfg.pop("norm_cfg", {"type": "LN"})
    cfg.pop("init_cfg", None)
    if cfg:
        raise _refuse(where, cfg, "3.x's DETR layers take no such arguments.")
    return out


def _coder(
    cfg: Any, where: str, kind: str, order: tuple[str, ...], roles: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One 2.x encoder/decoder config -> (3.x's config of it, the 2.x keys left to the caller)."""
    cfg = dict(cfg)
    cfg.pop("type", None)  # 3.x's detectors build their own stack type
    layers = cfg.pop("transformerlayers")
    num_layers = cfg.pop("num_layers")
    if isinstance(layers, list):
        if any(layer != layers[0] for layer in layers):
            raise _refuse(f"{where}.transformerlayers", layers, "3.x's DETR stacks repeat one layer config.")
        layers = layers[0]
    out: dict[str, Any] = {
        "num_layers": num_layers,
        "layer_cfg": _layer(layers, f"{where}.transformerlayers", kind, order, roles),
    }
    if kind == "decoder":
        # 2.x's default was False; 3.x's is True: written out either way.
        out["return_intermediate"] = cfg.pop("return_intermediate", False)
    return out, cfg


def _detr(model: dict[str, Any], report: Report) -> None:
    family = _DETR_FAMILIES.get(str(model.get("type")))
    head = model.get("bbox_head")
    if family is None or not isinstance(head, dict) or "transformer" not in head:
        return  # not DETR, or already a 3.x config
    transformer_type, roles = family
    deformable = model["type"] == "DeformableDETR"
    transformer = dict(head.pop("transformer"))
    if transformer.pop("type", None) != transformer_type:
        raise _refuse(
            "model.bbox_head.transformer",
            transformer,
            f"3.x's {model['type']} builds its own transformer (2.x's {transformer_type}).",
        )
    encoder, enc_rest = _coder(
        transformer.pop("encoder"), "model.bbox_head.transformer.encoder", "encoder", _POST_NORM_ENCODER, roles
    )
    decoder, dec_rest = _coder(
        transformer.pop("decoder"), "model.bbox_head.transformer.decoder", "decoder", _POST_NORM_DECODER, roles
    )
    # 2.x's encoder added a final norm only for pre-norm layers, which 3.x refuses above.
    enc_rest.pop("post_norm_cfg", None)
    if deformable:
        decoder["post_norm_cfg"] = None  # 2.x's DeformableDetrTransformerDecoder had none
    else:
        # 2.x's DetrTransformerDecoder normed every output with post_norm_cfg (LN by default).
        decoder["post_norm_cfg"] = dec_rest.pop("post_norm_cfg", {"type": "LN"})
    for where, rest in (("encoder", enc_rest), ("decoder", dec_rest)):
        if rest:
            raise _refuse(f"model.bbox_head.transformer.{where}", rest, "3.x's DETR stacks take no such arguments.")

    positional = dict(head.pop("positional_encoding", _POSITIONAL_DEFAULT))
    if positional.pop("type", "SinePositionalEncoding") != "SinePositionalEncoding":
        raise _refuse(
            "model.bbox_head.positional_encoding",
            positional,
            f"3.x's {model['type']} builds a SinePositionalEncoding only.",
        )
    num_queries = head.pop("num_query", 100)
    detector: dict[str, Any] = {}
    if deformable:
        as_two_stage = bool(head.pop("as_two_stage", False))
        with_box_refine = bool(head.pop("with_box_refine", False))
        transformer.pop("as_two_stage", None)  # 2.x's head overwrote it with its own
        num_levels = transformer.pop("num_feature_levels", 4)
        proposals = transformer.pop("two_stage_num_proposals", 300)
        if as_two_stage:
            # 2.x's two-stage decoder took the top two_stage_num_proposals encoder boxes as queries;
            # 3.x takes the top num_queries.
            num_queries = proposals
        detector.update(num_feature_levels=num_levels, with_box_refine=with_box_refine, as_two_stage=as_two_stage)
        if "in_channels" in head:
            head.pop("in_channels")
            report.drop(
                "model.bbox_head.in_channels", "2.x's DeformableDETRHead never used it (the neck maps channels)"
            )
    else:
        in_channels = head.pop("in_channels")
        if model.get("neck") is not None:
            raise _refuse(
                "model.neck",
                model["neck"],
                "2.x's DETRHead ran every neck level through its own input projection; 3.x's DETR "
                "takes the projection as its neck (a ChannelMapper) and one level only.",
            )
        # 2.x's DETRHead projected the last backbone level with a 1x1 conv (with bias): 3.x's is the neck.
        model["neck"] = {
            "type": "ChannelMapper",
            "in_channels": [in_channels],
            "kernel_size": 1,
            "out_channels": encoder["layer_cfg"]["self_attn_cfg"].get("embed_dims", 256),
            "act_cfg": None,
            "norm_cfg": None,
            "num_outs": 1,
        }
        report.moved("model.bbox_head.in_channels (its input_proj)", "model.neck (ChannelMapper)")
    if transformer:
        raise _refuse("model.bbox_head.transformer", transformer, "3.x's DETR transformers take no such arguments.")
    head["embed_dims"] = encoder["layer_cfg"]["self_attn_cfg"].get("embed_dims", 256)
    rebuilt = {"type": model["type"], "num_queries": num_queries, **detector}
    for key, value in model.items():
        if key == "bbox_head":
            rebuilt.update(encoder=encoder, decoder=decoder, positional_encoding=positional)
        if key != "type":
            rebuilt[key] = value
    model.clear()
    model.update(rebuilt)
    report.moved("model.bbox_head.transformer.encoder / decoder", "model.encoder / model.decoder")
    report.moved("model.bbox_head.positional_encoding", "model.positional_encoding")
    report.moved("model.bbox_head.num_query", "model.num_queries")
    if deformable:
        report.moved("model.bbox_head.with_box_refine / as_two_stage", "model.with_box_refine / as_two_stage")


def convert(model: dict[str, Any], report: Report) -> None:
    """Apply this module's rules to one (already copied) 2.x model config, in place."""
    _ascend(model, "model", report)
    _cascade_rpn(model, report)
    _detr(model, report)
