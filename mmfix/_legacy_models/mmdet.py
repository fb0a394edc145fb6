"""MMDetection 2.x components for converted 2.x configs, registered in MMDetection 3.x's registry.

``MaskIoUHead2x``: Mask Scoring R-CNN's mask IoU head as 2.28.2 scored with it. Both releases
compute the same product, the classification score times the predicted IoU of the detection's
mask (2.x ``MaskIoUHead.get_mask_scores``, 3.x ``MaskIoUHead.predict_by_feat``); 2.x gave it to the
masks only (its COCO evaluation scored each mask by it, each box by the classification score),
while 3.3.0 writes it over ``scores``, so boxes, bbox mAP and every consumer of ``scores`` change.
This head writes the product to ``mask_scores`` and leaves ``scores`` alone: 3.x's ``CocoMetric``
scores segm results by ``mask_scores`` where present, so both evaluations are 2.x's again. The
modules and weights are 3.x's ``MaskIoUHead``'s (a subclass: the same state dict).
tests/integration/test_mmdet2_prediction_parity.py compares with real 2.28.2.
"""

from __future__ import annotations

from typing import Any

from mmdet.models.roi_heads.mask_heads.maskiou_head import MaskIoUHead
from mmdet.registry import MODELS

__all__ = ["MaskIoUHead2x"]


@MODELS.register_module()
class MaskIoUHead2x(MaskIoUHead):
    def predict_by_feat(self, mask_iou_preds: Any, results_list: Any) -> Any:
        assert len(mask_iou_preds) == len(results_list)
        for results, mask_iou_pred in zip(results_list, mask_iou_preds):
            labels = results.labels
            results.mask_scores = results.scores * mask_iou_pred[range(labels.size(0)), labels]
        return results_list
