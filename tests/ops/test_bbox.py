"""bbox_overlaps: the values of compiled mmcv 2.1.0, directly and through mmcv.ops.bbox_overlaps."""

from __future__ import annotations

import pytest
import torch
from box_samples import detections

from ops_support import assert_same_call, import_mmcv_ops, swap_ext


def _boxes(n: int, seed: int, degenerate: bool = False) -> torch.Tensor:
    boxes, _, _ = detections(n, objects=max(1, n // 8), seed=seed, image=(200, 120))
    if degenerate and n >= 4:
        boxes[0, 2:] = boxes[0, :2]  # zero area
        boxes[1, 2:] = boxes[1, :2] - 2  # negative
        boxes[2] = boxes[3]  # duplicate
    return boxes


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize(
    ("rows", "cols", "aligned"),
    [(1, 1, False), (1, 1, True), (5, 5, True), (40, 40, False), (40, 40, True), (37, 300, False)],
)
@pytest.mark.parametrize("degenerate", [False, True])
def test_bbox_overlaps_as_compiled(compiled_ext, mmfix_ext, mode, offset, aligned, rows, cols, degenerate):
    a = _boxes(rows, seed=rows, degenerate=degenerate)
    b = _boxes(cols, seed=cols + 1000, degenerate=degenerate)
    ious = torch.zeros(rows) if aligned else torch.zeros(rows, cols)
    assert_same_call(mmfix_ext, compiled_ext, "bbox_overlaps", a, b, ious, mode=mode, aligned=aligned, offset=offset)


def test_float64(compiled_ext, mmfix_ext):
    a, b = _boxes(20, 1).double(), _boxes(30, 2).double()
    assert_same_call(
        mmfix_ext,
        compiled_ext,
        "bbox_overlaps",
        a,
        b,
        torch.zeros(20, 30, dtype=torch.float64),
        mode=0,
        aligned=False,
        offset=0,
    )


@pytest.mark.parametrize("mode", ["iou", "iof"])
@pytest.mark.parametrize("aligned", [False, True])
def test_mmcv_bbox_overlaps(compiled_ext, mmfix_ext, mode, aligned):
    ops = import_mmcv_ops(mmfix_ext)
    a, b = _boxes(64, 3), _boxes(64, 4)
    for offset in (0, 1):
        with swap_ext(compiled_ext):
            expected = ops.bbox_overlaps(a, b, mode=mode, aligned=aligned, offset=offset)
        with swap_ext(mmfix_ext):
            actual = ops.bbox_overlaps(a, b, mode=mode, aligned=aligned, offset=offset)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def test_bad_input_is_refused_clearly(mmfix_ext):
    a, b = _boxes(4, 1), _boxes(5, 2)
    with pytest.raises(ValueError, match="row by row"):
        mmfix_ext.bbox_overlaps(a, b, torch.zeros(4), 0, True, 0)
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        mmfix_ext.bbox_overlaps(a[:, :3], b, torch.zeros(4, 5), 0, False, 0)
    with pytest.raises(ValueError, match="writes 20 values"):
        mmfix_ext.bbox_overlaps(a, b, torch.zeros(4), 0, False, 0)
    with pytest.raises(ValueError, match="mode must be"):
        mmfix_ext.bbox_overlaps(a, b, torch.zeros(4, 5), 2, False, 0)
