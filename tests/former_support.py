"""MaskFormer / Mask2Former tests: a built model's hyper-parameters, read from its modules.

``signature(model)`` works on a model built by MMDetection 2.28.2 or 3.3.0 (it reads only torch
modules and plain attributes both versions have), so one function compares a converted model with
3.3.0's official config of the same model and with the model 2.28.2 built from the 2.x file.
Run as a script it builds configs in a child process and prints their signatures as JSON:

    python former_support.py 3x CONFIG...   # with mmfix active: Config.fromfile + MODELS.build
    python former_support.py 2x CONFIG...   # in MMDetection 2.28.2: mmcv.Config + build_detector
"""

from __future__ import annotations

import json
import sys
from typing import Any

# Module attributes that carry a hyper-parameter (the values, not the weights: the weights' shapes
# are compared separately). `batch_first` is left out on purpose: 2.x's layers ran sequence-first,
# 3.x's run batch-first, with the same weights and results.
ATTRIBUTES = (
    "p",  # nn.Dropout
    "drop_prob",  # mmcv's DropPath
    "dropout",  # nn.MultiheadAttention's attention dropout (a float there)
    "num_heads",
    "embed_dims",
    "num_levels",
    "num_points",
    "im2col_step",
    "eps",
    "num_groups",
    "num_feats",
    "temperature",
    "normalize",
    "scale",
    "offset",
    "feedforward_channels",
    "num_fcs",
    "add_identity",
    "return_intermediate",
)
HEAD_ATTRIBUTES = (
    "num_queries",
    "num_classes",
    "num_things_classes",
    "num_stuff_classes",
    "num_transformer_feat_level",
    "num_points",
    "oversample_ratio",
    "importance_sample_ratio",
)


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return None


def _vars(obj: Any) -> dict[str, Any]:
    """An object's plain settings (a loss's weight, a cost's eps ...), with its class name."""
    out = {k: _plain(v) for k, v in vars(obj).items() if not k.startswith("_") and _plain(v) is not None}
    out.pop("training", None)
    return {"type": type(obj).__name__, **out}


def _out_dropout(module: Any) -> float:
    # mmcv's MultiheadAttention drops its output twice in a row, proj_drop then dropout_layer;
    # 2.x's configs set the one, 3.x's the other: the product is what a forward pass does.
    keep = 1.0
    for child in (getattr(module, "proj_drop", None), getattr(module, "dropout_layer", None)):
        p = getattr(child, "p", getattr(child, "drop_prob", 0.0))
        keep *= 1.0 - float(p)
    return round(1.0 - keep, 9)


def signature(model: Any, rename: Any = None) -> dict[str, Any]:
    """The hyper-parameters of a built MaskFormer / Mask2Former (2.x or 3.x), as plain JSON data.

    ``rename``: maps a 2.x module name to its 3.x name (the state-dict layout), so that a 2.x
    model's signature is keyed as the 3.x model's is.
    """
    name_of = rename or (lambda name: name)
    modules: dict[str, Any] = {}
    attention_parts: set[str] = set()
    for name, module in model.named_modules():
        if hasattr(module, "proj_drop") and hasattr(module, "dropout_layer") and hasattr(module, "attn"):
            modules[name_of(name)] = {
                "type": "MultiheadAttention",
                "num_heads": module.num_heads,
                "embed_dims": module.embed_dims,
                "attn_drop": float(module.attn.dropout),
                "out_drop": _out_dropout(module),
            }
            attention_parts |= {f"{name}.proj_drop", f"{name}.dropout_layer", f"{name}.attn"}
            continue
        if name in attention_parts or any(name.startswith(part + ".") for part in attention_parts):
            continue
        values = {
            a: _plain(getattr(module, a))
            for a in ATTRIBUTES
            if isinstance(getattr(module, a, None), (bool, int, float))
        }
        if values:
            modules[name_of(name)] = values
    head = model.panoptic_head
    assigner = head.assigner
    costs = getattr(assigner, "match_costs", None)
    if costs is None:  # 2.x's MaskHungarianAssigner held its three costs by name
        costs = [assigner.cls_cost, assigner.mask_cost, assigner.dice_cost]
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "shapes": {
            name_of(k.rsplit(".", 1)[0]) + "." + k.rsplit(".", 1)[1]: list(v.shape)
            for k, v in model.state_dict().items()
        },
        "modules": modules,
        "head": {a: _plain(getattr(head, a)) for a in HEAD_ATTRIBUTES if hasattr(head, a)},
        "costs": [_vars(c) for c in costs],
        "losses": {k: _vars(getattr(head, k)) for k in ("loss_cls", "loss_mask", "loss_dice")},
        "test_cfg": _plain(dict(model.panoptic_fusion_head.test_cfg)),
        "pixel_decoder": type(head.pixel_decoder).__name__,
        "backbone": type(model.backbone).__name__,
    }


def _build_3x(path: str) -> Any:
    # First, as a user's train.py would: the automatic path (Config.fromfile converts a 2.x file),
    # and with mmcv 2.2 MMDetection's mmcv bound raised before mmdet is imported.
    import mmfix  # noqa: F401  # isort: skip
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config

    register_all_modules()
    cfg = Config.fromfile(path)
    cfg.model.backbone.init_cfg = None  # no download: the weights are not what is compared
    return MODELS.build(cfg.model)


def _build_2x(path: str) -> Any:
    import mmcv
    from mmdet.models import build_detector

    cfg = mmcv.Config.fromfile(path)
    cfg.model.backbone.init_cfg = None
    return build_detector(cfg.model)


def _layouts() -> Any:
    # The rename table is pure (no mmfix import): loaded by path, the 2.x environment needs no mmfix.
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "mmfix" / "_configs" / "_layouts2x.py"
    spec = importlib.util.spec_from_file_location("_layouts2x", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building the class
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> None:
    side, paths = argv[0], argv[1:]
    out: dict[str, Any] = {}
    layouts = _layouts().LAYOUTS if side == "2x" else ()
    for path in paths:
        try:
            if side == "3x":
                out[path] = signature(_build_3x(path))
                continue
            model = _build_2x(path)
            matching = [layout for layout in layouts if layout.matches(model.state_dict())]

            def rename(name: str, matching: list[Any] = matching) -> str:
                for layout in matching:
                    new = layout.rename(name + ".")[:-1]
                    if new != name:
                        return new
                return name

            out[path] = signature(model, rename)
        except Exception as exc:  # one config's failure is that config's test failure, not all of them
            out[path] = {"error": f"{type(exc).__name__}: {exc}"}
    print("SIGNATURES " + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
