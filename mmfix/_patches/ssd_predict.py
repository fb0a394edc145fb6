"""MMDetection 3.3.0's SSD heads predict again.

``BaseDenseHead._predict_by_feat_single`` reads ``self.loss_cls`` (whether the classification loss
asks for custom channels), but ``SSDHead`` computes its classification loss itself and never sets
``loss_cls``: every SSD model of 3.3.0 (``ssd300``, ``ssd512``, SSDLite, the Ascend SSD) stops at
prediction with ``AttributeError: 'SSDHead' object has no attribute 'loss_cls'`` — validation,
``tools/test.py`` and ``inference_detector`` alike, on 3.x configs and converted 2.x ones
(open-mmlab/mmdetection#11063, #11780; the fix of PR #11524 is not released).

After ``SSDHead.__init__``, a head that has no ``loss_cls`` gets ``loss_cls = None``: a plain
attribute (no module, no parameter, nothing in the state dict), for which the one reader takes
its default ("no custom channels"), so the head scores as SSD does in 2.x and in its own loss: a
softmax over ``num_classes + 1`` channels, background last. A head that sets ``loss_cls`` itself
(a release with the fix, a subclass) is left as it is.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import _wrapping

_swaps = _wrapping.SwapSet()


def apply() -> str | None:
    from mmdet.models.dense_heads.ssd_head import SSDHead

    _swaps.wrap(SSDHead, "__init__", _init)
    return None


def remove() -> None:
    _swaps.undo_all()


def _init(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    wrapped(*args, **kwargs)
    if not hasattr(instance, "loss_cls"):  # nn.Module's lookup: attributes, modules, parameters
        instance.loss_cls = None
