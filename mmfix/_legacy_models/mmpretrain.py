"""MMClassification 0.x components for converted 0.x configs, registered in MMPretrain 1.x's registry.

``T2T_ViT0x``: MMPretrain 1.2's ``T2T_ViT`` with 0.25's attention. Every ``T2TTransformerLayer``
(the tokens-to-token module's two and the encoder's) gives its attention
``qk_scale = qk_scale or (input_dims // num_heads) ** -0.5``, which 0.25 multiplied the query-key
products by. 1.2's ``MultiheadAttention``, given a ``qk_scale``, drops it and hands
``head_dims ** -0.5`` to an attention function that divides by its ``scale``: the products are
multiplied by ``head_dims ** 0.5`` instead (8 instead of 1/8 in the T2T-ViT-t encoders, instead of
1/sqrt(147) and 1/sqrt(576) in the tokens-to-token layers). The weights are the same tensors;
only that factor differs, so a 0.x checkpoint would predict other scores. This class builds 1.2's
model and gives each of those attentions 0.25's factor; tests/integration/test_family_0x_mmcls.py
compares its scores with 0.25's own model.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from mmpretrain.models.backbones import T2T_ViT
from mmpretrain.models.backbones.t2t_vit import T2TTransformerLayer
from mmpretrain.models.utils.attention import scaled_dot_product_attention_pyimpl
from mmpretrain.registry import MODELS

__all__ = ["T2T_ViT0x"]


def _scale_as_given(layer: T2TTransformerLayer, scale: float) -> None:
    # scaled_dot_product_attention_pyimpl divides the products by its ``scale``: 1 / the multiplier
    layer.attn.scaled_dot_product_attention = partial(scaled_dot_product_attention_pyimpl, scale=1.0 / scale)


@MODELS.register_module()
class T2T_ViT0x(T2T_ViT):
    def __init__(self, *args: Any, layer_cfgs: Any = None, **kwargs: Any) -> None:
        layer_cfgs = {} if layer_cfgs is None else layer_cfgs
        super().__init__(*args, layer_cfgs=layer_cfgs, **kwargs)
        encoder = {id(layer): index for index, layer in enumerate(self.encoder)}
        for layer in self.modules():
            if not isinstance(layer, T2TTransformerLayer):
                continue
            given = None
            if id(layer) in encoder:  # the encoder's layers take layer_cfgs (one dict, or one per layer)
                cfg = layer_cfgs[encoder[id(layer)]] if isinstance(layer_cfgs, (list, tuple)) else layer_cfgs
                given = cfg.get("qk_scale") if isinstance(cfg, dict) else None
            _scale_as_given(layer, given or (layer.attn.input_dims // layer.attn.num_heads) ** -0.5)
