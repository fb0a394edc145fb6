"""MMDetection 2.x components for converted 2.x configs, registered in MMDetection 3.x's registry.

``MaskIoUHead2x``: Mask Scoring R-CNN's mask IoU head as 2.28.2 scored with it. Both releases
compute the same product, the classification score times the predicted IoU of the detection's
mask (2.x ``MaskIoUHead.get_mask_scores``, 3.x ``MaskIoUHead.predict_by_feat``); 2.x gave it to the
masks only (its COCO evaluation scored each mask by it, each box by the classification score),
while 3.3.0 writes it over ``scores``, so boxes, bbox mAP and every consumer of ``scores`` change.
This head writes the product to ``mask_scores`` and leaves ``scores`` alone: 3.x's ``CocoMetric``
scores segm results by ``mask_scores`` where present, so both evaluations are 2.x's again. The
modules and weights are 3.x's ``MaskIoUHead``'s (a subclass: the same state dict).

``HybridTaskCascadeRoIHead2x``: HTC's RoI head as 2.28.2 predicted masks with it: the mask of each
detection is the mean of every stage's mask head (sigmoid probabilities), as 2.x's ``simple_test``
did and 3.3.0's own docstring says. 3.3.0's ``_mask_forward(training=False)`` appends to its list
after the loop over the stages, not inside it, so only the last stage's mask is "merged": other
masks, silently (mean IoU 0.03 against 2.x's on the tests' seeded weights). Only that test-time
step is replaced; training, boxes and weights are 3.3.0's.

tests/integration/test_mmdet2_prediction_parity.py compares both with real 2.28.2.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from mmdet.models.roi_heads.htc_roi_head import HybridTaskCascadeRoIHead
from mmdet.models.roi_heads.mask_heads.maskiou_head import MaskIoUHead
from mmdet.registry import MODELS

__all__ = ["HybridTaskCascadeRoIHead2x", "MaskIoUHead2x"]


@MODELS.register_module()
class MaskIoUHead2x(MaskIoUHead):
    def predict_by_feat(self, mask_iou_preds: Any, results_list: Any) -> Any:
        assert len(mask_iou_preds) == len(results_list)
        for results, mask_iou_pred in zip(results_list, mask_iou_preds):
            labels = results.labels
            results.mask_scores = results.scores * mask_iou_pred[range(labels.size(0)), labels]
        return results_list


@MODELS.register_module()
class HybridTaskCascadeRoIHead2x(HybridTaskCascadeRoIHead):
    def _mask_forward(
        self, stage: int, x: Any, rois: Any, semantic_feat: Any = None, training: bool = True
    ) -> dict[str, Any]:
        if training:
            return super()._mask_forward(stage, x, rois, semantic_feat, training)
        # 3.3.0's test branch, with every stage's mask kept (2.x's simple_test)
        mask_roi_extractor = self.mask_roi_extractor[stage]
        mask_feats = mask_roi_extractor(x[: mask_roi_extractor.num_inputs], rois)
        if self.with_semantic and "mask" in self.semantic_fusion:
            mask_semantic_feat = self.semantic_roi_extractor([semantic_feat], rois)
            if mask_semantic_feat.shape[-2:] != mask_feats.shape[-2:]:
                mask_semantic_feat = F.adaptive_avg_pool2d(mask_semantic_feat, mask_feats.shape[-2:])
            mask_feats = mask_feats + mask_semantic_feat
        aug_masks = []
        last_feat = None
        for i in range(self.num_stages):
            if self.mask_info_flow:
                mask_preds, last_feat = self.mask_head[i](mask_feats, last_feat)
            else:
                mask_preds = self.mask_head[i](mask_feats)
            aug_masks.append(mask_preds)
        return {"mask_preds": aug_masks}
