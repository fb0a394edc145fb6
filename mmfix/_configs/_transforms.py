"""MMCV-level transforms whose legacy form the toolboxes share: MMDetection 2.x's and MMSegmentation
0.x's ``Resize`` (``img_scale``, ``multiscale_mode``, ``ratio_range``, ``keep_ratio`` True by
default) and every loader's ``file_client_args``. Pure functions on one transform dict."""

from __future__ import annotations

from typing import Any

from .._errors import ConfigConversionError
from ._report import Report


def resize(t: dict[str, Any], report: Report, scale_from_aug: Any = None) -> dict[str, Any] | None:
    img_scale = t.pop("img_scale", None)
    if img_scale is None:
        img_scale = scale_from_aug
    mode = t.pop("multiscale_mode", "range")
    ratio = t.pop("ratio_range", None)
    keep = t.pop("keep_ratio", True)  # 2.x default True; 3.x's Resize defaults to False
    t.pop("override", None)
    extra: dict[str, Any] = {k: t[k] for k in ("bbox_clip_border", "backend", "interpolation") if k in t}
    if img_scale is None:
        if "scale_factor" in t:
            return {"type": "Resize", "scale_factor": t["scale_factor"], "keep_ratio": keep, **extra}
        return None  # inside a MultiScaleFlipAug that gave scale_factor instead
    scales = img_scale if isinstance(img_scale, list) else [img_scale]
    scales = [tuple(s) if isinstance(s, (list, tuple)) else s for s in scales]
    if ratio is not None:
        return {"type": "RandomResize", "scale": scales[0], "ratio_range": tuple(ratio), "keep_ratio": keep, **extra}
    if len(scales) == 1:
        return {"type": "Resize", "scale": scales[0], "keep_ratio": keep, **extra}
    if mode == "value":
        return {"type": "RandomChoiceResize", "scales": scales, "keep_ratio": keep, **extra}
    if mode == "range":
        if len(scales) != 2:
            raise ConfigConversionError(
                "Resize.img_scale",
                img_scale,
                "multiscale_mode='range' takes exactly two scales (3.x RandomResize(scale=[low, high]))",
            )
        return {"type": "RandomResize", "scale": scales, "keep_ratio": keep, **extra}
    raise ConfigConversionError(
        "Resize.multiscale_mode", mode, "3.x offers RandomResize ('range') and RandomChoiceResize ('value')."
    )


def backend(t: dict[str, Any]) -> None:
    args = t.pop("file_client_args", None)
    if args and args.get("backend", "disk") != "disk":
        t["backend_args"] = args
