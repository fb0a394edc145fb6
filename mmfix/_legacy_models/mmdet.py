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

``DetTTAModel2x``: test-time augmentation (``tools/test.py --tta``) merged as 2.28.2's ``aug_test``
merged it, for a converted 2.x config whose test pipeline was a multi-scale / flip
``MultiScaleFlipAug``. 3.3.0's ``DetTTAModel`` merges each augmentation's final detections (after
its NMS and ``max_per_img``) and runs NMS again; 2.x merged earlier, so on the same weights the two
keep other boxes (0–3 of the top 50 in common, measured on the issue's model). Reproduced here:
single-stage detectors (2.x ``aug_test_bboxes``: every augmentation's boxes before NMS, mapped back
to the original image, one ``batched_nms`` with the head's ``test_cfg``), two-stage detectors with
an ``RPNHead`` and a ``StandardRoIHead`` (2.x ``aug_test_rpn``: the augmentations' proposals
merged by one NMS; ``aug_test_bboxes``: each augmentation's class boxes and scores for the same
proposals averaged, one ``multiclass_nms``; ``aug_test_mask``: the augmentations' mask
probabilities, flipped back, averaged, pasted once). Any other detector's 2.x ``aug_test`` is
not reproduced: building this model for it is one clear error (test without ``--tta``, or
choose 3.x's merging with ``tta_model.type=DetTTAModel``), never a silently different result.
Images are merged one at a time, as 2.x's ``aug_test`` (one image per batch) did.

tests/integration/test_mmdet2_prediction_parity.py compares each with real 2.28.2.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn.functional as F
from mmcv.ops import batched_nms, nms
from mmdet.models.detectors.single_stage import SingleStageDetector
from mmdet.models.detectors.two_stage import TwoStageDetector
from mmdet.models.layers import multiclass_nms
from mmdet.models.roi_heads.htc_roi_head import HybridTaskCascadeRoIHead
from mmdet.models.roi_heads.mask_heads.maskiou_head import MaskIoUHead
from mmdet.registry import MODELS
from mmdet.structures import DetDataSample
from mmdet.structures.bbox import bbox2roi, bbox_flip
from mmengine.model import BaseTTAModel
from mmengine.structures import InstanceData

__all__ = ["DetTTAModel2x", "HybridTaskCascadeRoIHead2x", "MaskIoUHead2x"]


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


#: The 3.x classes whose 2.x counterparts ran the ``aug_test`` reproduced here. Exact types: a
#: subclass (Cascade, HTC, PointRend, TridentNet, CornerNet, CenterNet …) had an ``aug_test`` of
#: its own in 2.x, or none.
_SINGLE_STAGE_EXCLUDED = ("CornerNet", "CenterNet")
_RPN_HEADS = ("RPNHead",)
_ROI_HEADS = ("StandardRoIHead", "DynamicRoIHead")
_MASK_HEADS = ("FCNMaskHead",)


class TTANotReproducedError(ValueError):
    """A converted 2.x config's ``--tta`` for a detector whose 2.x ``aug_test`` mmfix does not reproduce."""


def _tta_kind(module: Any) -> str:
    """'single' or 'two', or raise: which 2.x aug_test ``module`` (a built 3.x detector) ran."""
    name = type(module).__name__
    if isinstance(module, SingleStageDetector) and name not in _SINGLE_STAGE_EXCLUDED:
        head = getattr(module, "bbox_head", None)
        if head is not None and "with_nms" in inspect.signature(head.predict_by_feat).parameters:
            return "single"
    if isinstance(module, TwoStageDetector) and getattr(module, "rpn_head", None) is not None:
        roi_head = module.roi_head
        mask_head = getattr(roi_head, "mask_head", None)
        if (
            type(module.rpn_head).__name__ in _RPN_HEADS
            and type(roi_head).__name__ in _ROI_HEADS
            and (mask_head is None or type(mask_head).__name__ in _MASK_HEADS)
        ):
            return "two"
    parts = [name]
    for attribute in ("bbox_head", "rpn_head", "roi_head"):
        if getattr(module, attribute, None) is not None:
            parts.append(f"{attribute} {type(getattr(module, attribute)).__name__}")
    raise TTANotReproducedError(
        f"mmfix: --tta on this converted MMDetection 2.x config needs 2.x's test-time augmentation of a "
        f"{', '.join(parts)}, which mmfix does not reproduce (it does single-stage detectors and two-stage "
        "ones with an RPNHead and a StandardRoIHead), and MMDetection 3.x's DetTTAModel merges differently "
        "(each augmentation's final detections, NMS again), so the results would not be those the config "
        "gave on 2.x. Test without --tta (the config's first scale, no flip), or, to accept 3.x's merging, "
        "add --cfg-options tta_model.type=DetTTAModel."
    )


def _to_original(bboxes: torch.Tensor, meta: dict[str, Any]) -> torch.Tensor:
    """2.x's bbox_mapping_back: boxes (n, 4k) of an augmented image back to the original image."""
    if meta.get("flip", False):
        bboxes = bbox_flip(bboxes, meta["img_shape"], meta["flip_direction"])
    scale = bboxes.new_tensor(meta["scale_factor"]).repeat(2)
    return (bboxes.reshape(-1, 4) / scale).reshape(bboxes.shape)


def _to_augmented(bboxes: torch.Tensor, meta: dict[str, Any]) -> torch.Tensor:
    """2.x's bbox_mapping: original-image boxes (n, 4) into an augmented image."""
    bboxes = bboxes * bboxes.new_tensor(meta["scale_factor"]).repeat(2)
    if meta.get("flip", False):
        bboxes = bbox_flip(bboxes, meta["img_shape"], meta["flip_direction"])
    return bboxes


def _flip_mask_back(mask: torch.Tensor, meta: dict[str, Any]) -> torch.Tensor:
    """2.x's merge_aug_masks: an augmentation's mask probabilities (n, c, h, w) unflipped."""
    if not meta.get("flip", False):
        return mask
    dims = {"horizontal": [3], "vertical": [2], "diagonal": [2, 3]}[meta["flip_direction"]]
    return torch.flip(mask, dims)


@MODELS.register_module()
class DetTTAModel2x(BaseTTAModel):
    """See the module's docstring. ``tta_cfg`` is accepted and unused (2.x merged with the
    detector's own ``test_cfg``); it is there for ``tta_model.type=DetTTAModel``."""

    def __init__(self, module: Any, tta_cfg: Any = None, data_preprocessor: Any = None) -> None:
        super().__init__(module=module, data_preprocessor=data_preprocessor)
        self.tta_cfg = tta_cfg
        self._kind = _tta_kind(self.module)

    def merge_preds(self, data_samples_list: Any) -> Any:  # abstract in BaseTTAModel; test_step merges
        raise NotImplementedError("DetTTAModel2x merges inside test_step (2.x merged before NMS)")

    def test_step(self, data: Any) -> list[DetDataSample]:
        inputs, samples = data["inputs"], data["data_samples"]
        results = []
        for index in range(len(inputs[0])):
            augs = [
                self.module.data_preprocessor({"inputs": [aug[index]], "data_samples": [aug_s[index]]}, False)
                for aug, aug_s in zip(inputs, samples)
            ]
            feats = [self.module.extract_feat(aug["inputs"]) for aug in augs]
            metas = [aug["data_samples"][0].metainfo for aug in augs]
            merge = self._single if self._kind == "single" else self._two
            sample = augs[0]["data_samples"][0]
            sample.pred_instances = merge(feats, metas)
            results.append(sample)
        return results

    def _single(self, feats: list[Any], metas: list[dict[str, Any]]) -> InstanceData:
        head = self.module.bbox_head
        boxes, scores, labels = [], [], []
        for x, meta in zip(feats, metas):
            found = head.predict_by_feat(*head(x), batch_img_metas=[meta], rescale=False, with_nms=False)[0]
            boxes.append(_to_original(found.bboxes, meta))
            scores.append(found.scores)
            labels.append(found.labels)
        merged = InstanceData(bboxes=torch.cat(boxes), scores=torch.cat(scores), labels=torch.cat(labels))
        if merged.bboxes.numel() == 0:
            return merged
        cfg = head.test_cfg
        dets, keep = batched_nms(merged.bboxes, merged.scores, merged.labels, cfg.nms)
        out = merged[keep][: cfg.max_per_img]
        out.scores = dets[: cfg.max_per_img, -1]
        return out

    def _two(self, feats: list[Any], metas: list[dict[str, Any]]) -> InstanceData:
        proposals = self._merged_proposals(feats, metas)
        roi_head = self.module.roi_head
        cfg = roi_head.test_cfg
        aug_boxes, aug_scores = [], []
        for x, meta in zip(feats, metas):
            rois = bbox2roi([_to_augmented(proposals, meta)])
            out = roi_head._bbox_forward(x, rois)
            found = roi_head.bbox_head._predict_by_feat_single(
                rois, out["cls_score"], out["bbox_pred"], img_meta=meta, rescale=False, rcnn_test_cfg=None
            )
            aug_boxes.append(_to_original(found.bboxes, meta))
            aug_scores.append(found.scores)
        boxes = torch.stack(aug_boxes).mean(dim=0)
        scores = torch.stack(aug_scores).mean(dim=0)
        if boxes.shape[0] == 0:
            dets, labels = boxes.new_zeros(0, 5), boxes.new_zeros((0,), dtype=torch.long)
        else:
            dets, labels = multiclass_nms(boxes, scores, cfg.score_thr, cfg.nms, cfg.max_per_img)
        results = InstanceData(bboxes=dets[:, :4], scores=dets[:, 4], labels=labels)
        if getattr(roi_head, "with_mask", False):
            results.masks = self._merged_masks(feats, metas, results)
        return results

    def _merged_proposals(self, feats: list[Any], metas: list[dict[str, Any]]) -> torch.Tensor:
        """2.x's aug_test_rpn + merge_aug_proposals: boxes (n, 4) in the original image."""
        rpn = self.module.rpn_head
        recovered = []
        for x, meta in zip(feats, metas):
            found = rpn.predict_by_feat(*rpn(x), batch_img_metas=[meta], rescale=False)[0]
            boxes = _to_original(found.bboxes, meta)
            recovered.append(torch.cat([boxes, found.scores[:, None]], dim=1))
        merged = torch.cat(recovered)
        dets, _ = nms(merged[:, :4].contiguous(), merged[:, 4].contiguous(), rpn.test_cfg.nms.iou_threshold)
        order = dets[:, 4].sort(0, descending=True)[1][: min(rpn.test_cfg.max_per_img, dets.shape[0])]
        return dets[order, :4]

    def _merged_masks(self, feats: list[Any], metas: list[dict[str, Any]], results: InstanceData) -> torch.Tensor:
        """2.x's aug_test_mask: each augmentation's mask probabilities, unflipped, averaged, pasted."""
        roi_head = self.module.roi_head
        height, width = metas[0]["ori_shape"][:2]
        if results.bboxes.shape[0] == 0:
            return results.bboxes.new_zeros((0, height, width), dtype=torch.bool)
        aug_masks = []
        for x, meta in zip(feats, metas):
            mask_rois = bbox2roi([_to_augmented(results.bboxes, meta)])
            preds = roi_head._mask_forward(x, mask_rois)["mask_preds"]
            aug_masks.append(_flip_mask_back(preds.sigmoid(), meta))
        merged = torch.stack(aug_masks).mean(dim=0)
        # pasted at the original size from boxes already there (2.x: scale_factor ones, rescale=False)
        meta = {"ori_shape": (height, width), "scale_factor": (1.0, 1.0), "img_shape": (height, width)}
        return roi_head.mask_head._predict_by_feat_single(
            merged, results.bboxes.clone(), results.labels, meta, roi_head.test_cfg, rescale=True, activate_map=True
        )
