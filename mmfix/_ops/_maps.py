"""What the RoI ops share: checking feature maps and RoIs, and a channel-last copy of the maps."""

from __future__ import annotations

import torch
from torch import Tensor


def check_rois(op: str, features: Tensor, rois: Tensor, pooled_height: int, pooled_width: int) -> None:
    """Feature maps (N, C, H, W), RoIs (K, 5) of the same dtype, finite, with valid batch indices."""
    if features.dim() != 4:
        raise ValueError(f"mmcv op `{op}` takes feature maps of shape (N, C, H, W), got {tuple(features.shape)}.")
    if rois.dim() != 2 or rois.shape[1] != 5:
        raise ValueError(
            f"mmcv op `{op}` takes RoIs of shape (K, 5) as (batch_index, x1, y1, x2, y2), got {tuple(rois.shape)}."
        )
    if rois.dtype != features.dtype:
        raise TypeError(
            f"mmcv op `{op}`: the RoIs ({rois.dtype}) must have the feature maps' dtype ({features.dtype}), as "
            "mmcv's kernel reads both as one type. Convert the RoIs with `.to(features.dtype)`."
        )
    if pooled_height <= 0 or pooled_width <= 0:
        raise ValueError(f"mmcv op `{op}`: the output size must be positive, got {pooled_height}x{pooled_width}.")
    if not rois.numel():
        return
    if not bool(torch.isfinite(rois).all()):
        raise ValueError(
            f"mmcv op `{op}` got RoIs with NaN or infinite coordinates, for which mmcv's kernel reads memory "
            "outside the feature maps. Filter such boxes out before pooling."
        )
    batch = rois[:, 0].long()  # the kernel's int(roi[0]): truncation
    if bool((batch < 0).any()) or bool((batch >= features.shape[0]).any()):
        raise ValueError(
            f"mmcv op `{op}`: a RoI's batch index (column 0) is outside the {features.shape[0]} feature maps "
            f"(indices {int(batch.min())}..{int(batch.max())})."
        )


def channels_last(features: Tensor, dtype: torch.dtype) -> Tensor:
    """(N, H, W, C) maps in ``dtype``: the maps themselves when already laid out so, else a copy
    made one blocked 2-D transpose per map (torch's fast path for that copy)."""
    n, c, h, w = features.shape
    if features.dtype == dtype and features.is_contiguous(memory_format=torch.channels_last):
        return features.permute(0, 2, 3, 1)
    out = torch.empty(n, h * w, c, dtype=dtype, device=features.device)
    for i in range(n):
        out[i].copy_(features[i].reshape(c, h * w).t())
    return out.view(n, h, w, c)
