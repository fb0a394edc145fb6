"""mmcv's 3D point wrappers that assume CUDA run on CPU tensors too.

Four of mmcv 2.x's Python wrappers cannot run on a CPU tensor whatever the
extension: ``furthest_point_sample`` allocates ``torch.cuda.IntTensor`` and
``torch.cuda.FloatTensor``; ``knn`` and ``points_in_boxes_part`` / ``_all`` call
``torch.cuda.current_device()``, which fails on a torch without CUDA. With
compiled mmcv that was moot (no CPU kernels); mmfix's ops have CPU paths, so
VoteNet, PointNet++ heads, 3DSSD and box-point tests in MMDetection3D would stop
in the wrapper instead. For a tensor that is not on CUDA, the wrapped function
does the same call with the tensors allocated beside the input; CUDA tensors take
mmcv's own code unchanged. The outputs are integer indices (not differentiable),
so the CPU path calls the extension directly rather than through the autograd
Function.
"""

from __future__ import annotations

import sys
from typing import Any

from .. import _wrapping

_swaps = _wrapping.SwapSet()


def _ext(module: str) -> Any:
    # Looked up at call time: tests (and users) may swap a module's ext_module.
    return sys.modules[module].ext_module


def _furthest_point_sample(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    points_xyz = _wrapping.argument(args, kwargs, 0, "points_xyz")
    num_points = _wrapping.argument(args, kwargs, 1, "num_points")
    if points_xyz is None or points_xyz.is_cuda:
        return wrapped(*args, **kwargs)
    import torch

    assert points_xyz.is_contiguous()
    batch, n = points_xyz.size()[:2]
    output = points_xyz.new_zeros((batch, num_points), dtype=torch.int32)
    temp = points_xyz.new_full((batch, n), 1e10, dtype=torch.float32)
    _ext("mmcv.ops.furthest_point_sample").furthest_point_sampling_forward(
        points_xyz, temp, output, b=batch, n=n, m=num_points
    )
    return output


def _knn(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    k = _wrapping.argument(args, kwargs, 0, "k")
    xyz = _wrapping.argument(args, kwargs, 1, "xyz")
    center_xyz = _wrapping.argument(args, kwargs, 2, "center_xyz")
    transposed = bool(_wrapping.argument(args, kwargs, 3, "transposed", False))
    if xyz is None or xyz.is_cuda:
        return wrapped(*args, **kwargs)
    assert (k > 0) & (k < 100), "k should be in range(0, 100)"
    if center_xyz is None:
        center_xyz = xyz
    if transposed:
        xyz = xyz.transpose(2, 1).contiguous()
        center_xyz = center_xyz.transpose(2, 1).contiguous()
    assert xyz.is_contiguous()
    assert center_xyz.is_contiguous()
    assert center_xyz.device == xyz.device, "center_xyz and xyz should be put on the same device"
    batch, npoint, _ = center_xyz.shape
    idx = center_xyz.new_zeros((batch, npoint, k)).int()
    dist2 = center_xyz.new_zeros((batch, npoint, k)).float()
    _ext("mmcv.ops.knn").knn_forward(xyz, center_xyz, idx, dist2, b=batch, n=xyz.shape[1], m=npoint, nsample=k)
    return idx.transpose(2, 1).contiguous()


def _check_boxes(points: Any, boxes: Any) -> None:
    # mmcv's own assertions, messages included.
    assert points.shape[0] == boxes.shape[0], (
        f"Points and boxes should have the same batch size, but got {points.shape[0]} and {boxes.shape[0]}"
    )
    assert boxes.shape[2] == 7, f"boxes dimension should be 7, but got unexpected shape {boxes.shape[2]}"
    assert points.shape[2] == 3, f"points dimension should be 3, but got unexpected shape {points.shape[2]}"
    assert points.device == boxes.device, "Points and boxes should be put on the same device"


def _points_in_boxes_part(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    points = _wrapping.argument(args, kwargs, 0, "points")
    boxes = _wrapping.argument(args, kwargs, 1, "boxes")
    if points is None or boxes is None or points.is_cuda:
        return wrapped(*args, **kwargs)
    import torch

    _check_boxes(points, boxes)
    batch, num_points, _ = points.shape
    box_idxs_of_pts = points.new_zeros((batch, num_points), dtype=torch.int).fill_(-1)
    _ext("mmcv.ops.points_in_boxes").points_in_boxes_part_forward(
        boxes.contiguous(), points.contiguous(), box_idxs_of_pts
    )
    return box_idxs_of_pts


def _points_in_boxes_all(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    points = _wrapping.argument(args, kwargs, 0, "points")
    boxes = _wrapping.argument(args, kwargs, 1, "boxes")
    if points is None or boxes is None or points.is_cuda:
        return wrapped(*args, **kwargs)
    import torch

    _check_boxes(points, boxes)
    batch, num_points, _ = points.shape
    box_idxs_of_pts = points.new_zeros((batch, num_points, boxes.shape[1]), dtype=torch.int).fill_(0)
    _ext("mmcv.ops.points_in_boxes").points_in_boxes_all_forward(
        boxes.contiguous(), points.contiguous(), box_idxs_of_pts
    )
    return box_idxs_of_pts


def apply() -> str | None:
    ops = sys.modules["mmcv.ops"]
    needed = ("mmcv.ops.furthest_point_sample", "mmcv.ops.knn", "mmcv.ops.points_in_boxes")
    missing = [name for name in needed if name not in sys.modules]
    if missing:
        return f"{', '.join(missing)} not imported by this mmcv"
    fps_module = sys.modules["mmcv.ops.furthest_point_sample"]
    sampler = sys.modules.get("mmcv.ops.points_sampler")
    grouping = sys.modules.get("mmcv.ops.group_points")
    boxes_module = sys.modules["mmcv.ops.points_in_boxes"]
    fps_aliases: tuple[tuple[Any, str], ...] = ((ops, "furthest_point_sample"),)
    if sampler is not None:
        fps_aliases += ((sampler, "furthest_point_sample"),)
    _swaps.wrap(fps_module, "furthest_point_sample", _furthest_point_sample, aliases=fps_aliases)
    knn_aliases: tuple[tuple[Any, str], ...] = ((ops, "knn"),)
    if grouping is not None:
        knn_aliases += ((grouping, "knn"),)
    _swaps.wrap(sys.modules["mmcv.ops.knn"], "knn", _knn, aliases=knn_aliases)
    _swaps.wrap(boxes_module, "points_in_boxes_part", _points_in_boxes_part, aliases=((ops, "points_in_boxes_part"),))
    _swaps.wrap(boxes_module, "points_in_boxes_all", _points_in_boxes_all, aliases=((ops, "points_in_boxes_all"),))
    return None


def remove() -> None:
    _swaps.undo_all()
