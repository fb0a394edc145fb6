"""MaskFormer and Mask2Former: 2.x's mmcv transformer configs → 3.x's fixed layer configs.

2.x built the heads' transformers from mmcv's generic ``TransformerLayerSequence`` /
``BaseTransformerLayer`` configs (``transformerlayers=dict(attn_cfgs=..., ffn_cfgs=...,
operation_order=...)``, a ``type`` on every part); 3.x rebuilt them as fixed classes
(``DetrTransformerDecoder``, ``Mask2FormerTransformerDecoder``, ``DetrTransformerEncoder``,
``Mask2FormerTransformerEncoder``) that take ``num_layers`` and one
``layer_cfg=dict(self_attn_cfg=..., cross_attn_cfg=..., ffn_cfg=..., norm_cfg=...)`` and run
their operations in a fixed order. The rules below rewrite the one into the other keeping what
2.x built: each attention's and FFN's arguments as 2.x passed them (dropouts spelled as 2.x
spelled them), 2.x defaults written out where 3.x's differ, and an operation order 3.x's layer
cannot run refused with one error. Pure: a dict in, a dict out, a report.
"""

from __future__ import annotations

import copy
from typing import Any

from .._errors import ConfigConversionError
from ._report import Report

# Head type -> the decoder layer's operation order its 3.x layer class runs (hard-coded in
# DetrTransformerDecoderLayer.forward / Mask2FormerTransformerDecoderLayer.forward).
DECODER_ORDERS: dict[str, tuple[str, ...]] = {
    "MaskFormerHead": ("self_attn", "norm", "cross_attn", "norm", "ffn", "norm"),
    "Mask2FormerHead": ("cross_attn", "norm", "self_attn", "norm", "ffn", "norm"),
}

# Pixel decoder type -> the attention its 3.x encoder layer builds (DetrTransformerEncoderLayer /
# DeformableDetrTransformerEncoderLayer); PixelDecoder has no encoder.
ENCODER_ATTENTIONS: dict[str, str | None] = {
    "TransformerEncoderPixelDecoder": "MultiheadAttention",
    "MSDeformAttnPixelDecoder": "MultiScaleDeformableAttention",
    "PixelDecoder": None,
}
ENCODER_ORDER = ("self_attn", "norm", "ffn", "norm")

# 2.x's sequence and layer classes these configs may name (each is what 3.x's fixed class replaces).
DECODER_TYPES = frozenset({"DetrTransformerDecoder"})
ENCODER_TYPES = frozenset({"DetrTransformerEncoder"})
LAYER_TYPES = frozenset({"BaseTransformerLayer", "DetrTransformerDecoderLayer"})

# mmcv 1.x's BaseTransformerLayer took these layer-level arguments as deprecated spellings of FFN
# arguments and wrote them over ffn_cfgs: (layer argument, FFN argument).
FFN_LAYER_ARGUMENTS = (
    ("feedforward_channels", "feedforward_channels"),
    ("ffn_dropout", "ffn_drop"),
    ("ffn_num_fcs", "num_fcs"),
)
# 2.x's DetrTransformerDecoderLayer always passed two of them, with these defaults, so a decoder
# layer's ffn_cfgs.ffn_drop / num_fcs never counted (MaskFormer's ffn_drop=0.1 built 0.0).
DECODER_LAYER_FFN_DEFAULTS = {"ffn_dropout": 0.0, "ffn_num_fcs": 2}
# mmcv 1.x's BaseTransformerLayer default ffn_cfgs (3.x's layers default to other values).
MMCV1_FFN_DEFAULT: dict[str, Any] = {
    "type": "FFN",
    "embed_dims": 256,
    "feedforward_channels": 1024,
    "num_fcs": 2,
    "ffn_drop": 0.0,
    "act_cfg": {"type": "ReLU", "inplace": True},
}
# Attention arguments that only chose 2.x's tensor layout: 3.x's layers run batch first (the
# weights are the same) and assert batch_first=True.
LAYOUT_ARGUMENTS = ("batch_first",)


def convert(model: dict[str, Any], report: Report) -> None:
    """Rewrite a 2.x MaskFormer / Mask2Former head's transformer configs in place."""
    head = model.get("panoptic_head")
    if not isinstance(head, dict) or head.get("type") not in DECODER_ORDERS:
        return
    kind = head["type"]
    where = "model.panoptic_head"
    if isinstance(head.get("transformer_decoder"), dict) and "transformerlayers" in head["transformer_decoder"]:
        head["transformer_decoder"] = _sequence(
            head["transformer_decoder"],
            f"{where}.transformer_decoder",
            DECODER_ORDERS[kind],
            "MultiheadAttention",
            report,
        )
        report.moved(f"{where}.transformer_decoder.transformerlayers", f"{where}.transformer_decoder.layer_cfg")
    _positional_encoding(head, where, report)
    decoder = head.get("pixel_decoder")
    if isinstance(decoder, dict):
        pd_where = f"{where}.pixel_decoder"
        pd_type = decoder.get("type")
        if pd_type not in ENCODER_ATTENTIONS:
            raise ConfigConversionError(
                f"{pd_where}.type",
                pd_type,
                f"3.x's {kind} is built with one of {', '.join(sorted(ENCODER_ATTENTIONS))} as its pixel decoder.",
            )
        attention = ENCODER_ATTENTIONS[pd_type]
        if (
            attention is not None
            and isinstance(decoder.get("encoder"), dict)
            and "transformerlayers" in decoder["encoder"]
        ):
            decoder["encoder"] = _sequence(decoder["encoder"], f"{pd_where}.encoder", ENCODER_ORDER, attention, report)
            report.moved(f"{pd_where}.encoder.transformerlayers", f"{pd_where}.encoder.layer_cfg")
        _positional_encoding(decoder, pd_where, report)


def _positional_encoding(node: dict[str, Any], where: str, report: Report) -> None:
    # 3.x's heads and pixel decoders build SinePositionalEncoding(**cfg) themselves: no `type`.
    pe = node.get("positional_encoding")
    if not isinstance(pe, dict) or "type" not in pe:
        return
    pe = dict(pe)
    kind = pe.pop("type")
    if kind != "SinePositionalEncoding":
        raise ConfigConversionError(
            f"{where}.positional_encoding.type",
            kind,
            f"3.x's {where.rsplit('.', 1)[-1]} always builds SinePositionalEncoding (its arguments go in "
            "positional_encoding, without a type).",
        )
    node["positional_encoding"] = pe
    report.drop(f"{where}.positional_encoding.type", "3.x always builds SinePositionalEncoding there")


def _sequence(
    seq: dict[str, Any], where: str, order: tuple[str, ...], attention: str, report: Report
) -> dict[str, Any]:
    """A 2.x TransformerLayerSequence config -> a 3.x encoder / decoder config."""
    seq = copy.deepcopy(seq)
    decoder = "cross_attn" in order
    kind = seq.pop("type", None)
    allowed = DECODER_TYPES if decoder else ENCODER_TYPES
    if kind not in allowed:
        raise ConfigConversionError(
            f"{where}.type",
            kind,
            f"3.x builds this part as its own {'decoder' if decoder else 'encoder'} class, "
            f"converted from 2.x's {' or '.join(sorted(allowed))} only.",
        )
    layers = seq.pop("transformerlayers")
    num_layers = seq.pop("num_layers", None)
    if isinstance(layers, (list, tuple)):
        converted = [
            _layer(dict(layer), f"{where}.transformerlayers[{i}]", order, attention, report)
            for i, layer in enumerate(layers)
        ]
        if any(layer != converted[0] for layer in converted[1:]):
            raise ConfigConversionError(
                f"{where}.transformerlayers",
                layers,
                "3.x builds every layer of the sequence from one layer_cfg; give the layers one config.",
            )
        if num_layers is not None and num_layers != len(layers):
            raise ConfigConversionError(
                f"{where}.num_layers", num_layers, f"2.x required it to equal the {len(layers)} layer configs given."
            )
        num_layers = len(layers)
        layer_cfg = converted[0]
    else:
        if num_layers is None:
            raise ConfigConversionError(f"{where}.num_layers", None, "2.x and 3.x both need the number of layers.")
        layer_cfg = _layer(dict(layers), f"{where}.transformerlayers", order, attention, report)
    out: dict[str, Any] = {"num_layers": num_layers, "layer_cfg": layer_cfg}
    post_norm = seq.pop("post_norm_cfg", {"type": "LN"})
    if decoder:
        if post_norm is None:
            raise ConfigConversionError(
                f"{where}.post_norm_cfg", None, "3.x's decoders always end with a normalisation layer (post_norm_cfg)."
            )
        out["post_norm_cfg"] = post_norm
        # 2.x's DetrTransformerDecoder returned only the last layer by default; 3.x's returns all.
        out["return_intermediate"] = seq.pop("return_intermediate", False)
    elif "post_norm_cfg" in seq or post_norm != {"type": "LN"}:
        report.drop(f"{where}.post_norm_cfg", "2.x's encoder built it only for pre-norm layers, which 3.x has not")
    init_cfg = seq.pop("init_cfg", None)
    if init_cfg is not None:
        out["init_cfg"] = init_cfg
    for key in seq:
        report.drop(f"{where}.{key}", "2.x's layer sequence accepted and ignored it")
    return out


def _layer(layer: dict[str, Any], where: str, order: tuple[str, ...], attention: str, report: Report) -> dict[str, Any]:
    """A 2.x BaseTransformerLayer config -> a 3.x layer_cfg (self_attn_cfg, cross_attn_cfg, ffn_cfg)."""
    kind = layer.pop("type", None)
    if kind not in LAYER_TYPES:
        raise ConfigConversionError(
            f"{where}.type",
            kind,
            f"3.x builds its own fixed layer here, converted from 2.x's {' or '.join(sorted(LAYER_TYPES))} only.",
        )
    operation_order = tuple(layer.pop("operation_order", None) or ())
    if operation_order != order:
        raise ConfigConversionError(
            f"{where}.operation_order",
            operation_order,
            f"3.x's layer here runs the fixed order {order} (post-norm), and nothing else.",
        )
    attn_names = [op for op in order if op in ("self_attn", "cross_attn")]
    attn_cfgs = layer.pop("attn_cfgs", None)
    if isinstance(attn_cfgs, dict):
        attn_cfgs = [attn_cfgs] * len(attn_names)
    if not isinstance(attn_cfgs, (list, tuple)) or len(attn_cfgs) != len(attn_names):
        raise ConfigConversionError(
            f"{where}.attn_cfgs",
            attn_cfgs,
            f"2.x and 3.x both need one attention config (or one per attention: {attn_names}).",
        )
    layer.pop("batch_first", None)  # 2.x passed it to each attention: only the tensor layout
    out: dict[str, Any] = {}
    embed_dims = None
    for name, cfg in zip(attn_names, attn_cfgs):
        cfg = dict(cfg)
        attn_type = cfg.pop("type", None)
        if attn_type != attention:
            raise ConfigConversionError(
                f"{where}.attn_cfgs.type", attn_type, f"3.x's layer here always builds {attention}."
            )
        for key in LAYOUT_ARGUMENTS:
            cfg.pop(key, None)
        cfg["batch_first"] = True
        embed_dims = cfg.get("embed_dims", embed_dims)
        out[f"{name}_cfg"] = cfg
    ffn_cfgs = layer.pop("ffn_cfgs", MMCV1_FFN_DEFAULT)
    if isinstance(ffn_cfgs, (list, tuple)):
        if len(ffn_cfgs) != 1:
            raise ConfigConversionError(f"{where}.ffn_cfgs", ffn_cfgs, "3.x's layers have one FFN; give one config.")
        ffn_cfgs = ffn_cfgs[0]
    ffn = dict(ffn_cfgs)
    if ffn.pop("type", "FFN") != "FFN":
        raise ConfigConversionError(
            f"{where}.ffn_cfgs.type", ffn_cfgs.get("type"), "3.x's layers always build mmcv's FFN."
        )
    given = dict(layer)
    if kind == "DetrTransformerDecoderLayer":
        given = {**DECODER_LAYER_FFN_DEFAULTS, **given}
    for layer_key, ffn_key in FFN_LAYER_ARGUMENTS:
        if layer_key in given:
            layer.pop(layer_key, None)
            if ffn.get(ffn_key) != given[layer_key]:
                if ffn_key in ffn:
                    report.note(
                        f"{where}.ffn_cfgs.{ffn_key}={ffn[ffn_key]!r} never counted in 2.x: its {kind} passed "
                        f"{layer_key}={given[layer_key]!r} over it, and that value is kept"
                    )
                ffn[ffn_key] = given[layer_key]
    if "embed_dims" not in ffn and embed_dims is not None:
        ffn["embed_dims"] = embed_dims  # 2.x took the attention's; 3.x's FFN defaults to 256
    out["ffn_cfg"] = ffn
    if "norm_cfg" in layer:
        out["norm_cfg"] = layer.pop("norm_cfg")
    init_cfg = layer.pop("init_cfg", None)
    if init_cfg is not None:
        out["init_cfg"] = init_cfg
    for key in layer:  # e.g. DetrTransformerDecoderLayer's act_cfg: 2.x took it into **kwargs, unused
        report.drop(f"{where}.{key}", "2.x's layer accepted it and never used it")
    return out
