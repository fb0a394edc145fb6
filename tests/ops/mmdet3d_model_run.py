"""Build one MMDetection3D 1.4 model from its zoo config and run it on tiny synthetic inputs.

Run as ``python mmdet3d_model_run.py CONFIG KIND POINTS FEATURES`` with mmfix active (the
script's first import, as a user's train.py would): the data preprocessor (voxelization),
``mode='tensor'`` and ``mode='loss'`` with a backward pass. Prints one JSON line: the
extension functions called (counted on the stand-in module mmcv's ops hold), the loss
and how many parameters got a gradient; or the error's type and message.
"""

from __future__ import annotations

# isort: off
import mmfix  # noqa: F401 - first, as in a user's script
# isort: on

import json
import os
import sys
from collections import Counter

import torch


def points(kind: str, n: int, features: int) -> torch.Tensor:
    if kind == "lidar":  # KITTI's front range
        xyz = torch.rand(n, 3) * torch.tensor([69.0, 79.0, 4.0]) + torch.tensor([0.0, -39.5, -3.0])
    else:  # an indoor room
        xyz = torch.rand(n, 3) * torch.tensor([6.0, 6.0, 2.5]) - torch.tensor([3.0, 3.0, 0.0])
    return torch.cat([xyz, torch.rand(n, features - 3)], 1)


def sample(kind: str, classes: int, n: int):
    from mmdet3d.structures import DepthInstance3DBoxes, Det3DDataSample, LiDARInstance3DBoxes, PointData
    from mmengine.structures import InstanceData

    data_sample = Det3DDataSample()
    truth = InstanceData()
    if kind == "lidar":
        truth.bboxes_3d = LiDARInstance3DBoxes(
            torch.tensor([[20.0, 0.0, -1.7, 3.9, 1.6, 1.56, 0.3], [35.0, 5.0, -1.6, 4.2, 1.7, 1.5, -1.0]])
        )
    else:
        truth.bboxes_3d = DepthInstance3DBoxes(
            torch.tensor([[0.5, 0.5, 0.0, 1.0, 1.0, 1.0, 0.0], [-1.0, 1.0, 0.2, 0.8, 1.5, 0.9, 0.0]]), with_yaw=False
        )
    truth.labels_3d = torch.tensor([0, min(1, classes - 1)])
    data_sample.gt_instances_3d = truth
    masks = PointData()
    masks.pts_semantic_mask = torch.randint(0, classes, (n,))
    masks.pts_instance_mask = torch.randint(0, 3, (n,))
    data_sample.gt_pts_seg = masks
    data_sample.set_metainfo({"box_type_3d": type(truth.bboxes_3d), "sample_idx": 0})
    return data_sample


def main() -> None:
    config, kind, n, features = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    modes = sys.argv[5].split(",") if len(sys.argv) > 5 else ["tensor", "loss"]
    import mmcv.ops  # noqa: F401
    import mmdet3d
    from mmdet3d.registry import MODELS
    from mmdet3d.utils import register_all_modules
    from mmengine.config import Config

    register_all_modules()
    calls: Counter[str] = Counter()
    ext = sys.modules["mmcv._ext"]
    assert getattr(ext, "__mmfix__", False), "mmfix's stand-in is not mmcv._ext here"
    for name in list(ext.__mmfix_families__):
        original = getattr(ext, name)

        def counted(*args, __original=original, __name=name, **kwargs):
            calls[__name] += 1
            return __original(*args, **kwargs)

        setattr(ext, name, counted)

    torch.manual_seed(0)
    cfg = Config.fromfile(os.path.join(os.path.dirname(mmdet3d.__file__), ".mim", "configs", config))
    model = MODELS.build(cfg.model).train()
    head = cfg.model.get("bbox_head") or cfg.model.get("decode_head") or cfg.model.get("rpn_head") or {}
    classes = head.get("num_classes", 3)
    result: dict = {"calls": calls}
    try:
        inputs = {"points": [points(kind, n, features)]}
        data = model.data_preprocessor({"inputs": inputs, "data_samples": [sample(kind, classes, n)]}, True)
        if "tensor" in modes:
            model(**data, mode="tensor")
        if "loss" in modes:
            losses = model(**data, mode="loss")
            total = sum(
                v.sum() if isinstance(v, torch.Tensor) else sum(x.sum() for x in v)
                for k, v in losses.items()
                if "loss" in k
            )
            total.backward()
            result["loss"] = float(total)
            result["params_with_grad"] = sum(1 for p in model.parameters() if p.grad is not None)
            result["params"] = sum(1 for p in model.parameters() if p.requires_grad)
    except Exception as exc:  # reported, not raised: the test reads it
        result["error"] = f"{type(exc).__name__}: {exc}"
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
