"""RoI point pooling (``mmcv.ops.RoIPointPool3d``, PointRCNN): the points inside each box, with their features.

As mmcv's CUDA kernels (compiled mmcv has no CPU kernel): the first
``num_sampled_points`` points inside each box (the ``points_in_boxes`` test), in point
order, repeated cyclically when fewer are inside (sample k is inside-point
``k % count``); each pooled row is the point's xyz followed by its features. A box
with no point inside gets ``pooled_empty_flag`` 1 and its rows keep the caller's zeros
(as does a box the caller already flagged).
"""

from __future__ import annotations

import torch

from ._points3d import check_float_types, first_indices, points_in_boxes, slabs

_TYPES = (torch.float16, torch.float32, torch.float64)


@torch.no_grad()
def roipoint_pool3d_forward(
    xyz: torch.Tensor,
    boxes3d: torch.Tensor,
    pts_feature: torch.Tensor,
    pooled_features: torch.Tensor,
    pooled_empty_flag: torch.Tensor,
) -> None:
    """``pooled_features`` (B, M, S, 3 + C) and ``pooled_empty_flag`` (B, M) for ``boxes3d`` (B, M, 7)."""
    op = "roipoint_pool3d_forward"
    check_float_types(op, _TYPES, xyz=xyz, boxes3d=boxes3d, pts_feature=pts_feature)
    batch, num_points, _ = xyz.shape
    num_boxes, samples = boxes3d.size(1), pooled_features.size(2)
    channels = pts_feature.size(2)
    if pooled_features.size(3) != 3 + channels or pooled_features.shape[:2] != boxes3d.shape[:2]:
        raise ValueError(
            f"mmcv op `{op}`: pooled_features must be (B, M, samples, 3 + C) = (.., {3 + channels}), "
            f"got {tuple(pooled_features.shape)}."
        )
    if num_boxes == 0 or samples == 0:
        return
    rows = torch.arange(batch, device=xyz.device).view(batch, 1, 1)
    for boxes in slabs(num_boxes, batch * max(num_points, samples * (3 + channels), 1)):
        inside, _, _ = points_in_boxes(xyz, boxes3d[:, boxes])
        positions, found = first_indices(inside, samples)
        count = found.sum(dim=2)
        empty = count == 0
        flags = pooled_empty_flag[:, boxes]
        flags.masked_fill_(empty, 1)
        if positions.size(2) == 0:
            continue
        cycle = torch.arange(samples, device=xyz.device) % count.clamp(min=1).unsqueeze(2)
        chosen = positions.gather(2, cycle).clamp(max=num_points - 1)  # (B, boxes, S); empty boxes: any row, unused
        rows_out = torch.cat([xyz[rows, chosen], pts_feature[rows, chosen]], dim=3)
        keep = (flags == 0).unsqueeze(2).unsqueeze(3)
        target = pooled_features[:, boxes]
        target.copy_(torch.where(keep, rows_out.to(target.dtype), target))
