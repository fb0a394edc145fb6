"""Which functions of mmcv's extension the OpenMMLab toolboxes' models run (on CPU).

    MMFIX_DISABLE=1 python scripts/survey_toolbox_ops.py [--size 128] [config …]

Builds each config's model (random weights), runs it forward on a small random batch and
backward from the sum of its outputs, with a recording stand-in for ``mmcv._ext`` (mmfix's
functions, each call counted by name). Without arguments it runs the configs below: the models
of MMSegmentation 1.2.2, MMPose 1.3.2 and MMPretrain 1.2.0 whose code imports ``mmcv.ops``, and
a few plain ones. Paths CUDA alone takes (mmdet's FocalLoss → ``sigmoid_focal_loss_*``,
MultiScaleDeformableAttention → ``ms_deform_attn_*``) cannot show here: they are found by
reading the code (the ``is_cuda`` tests) and listed in the report.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import importlib.util
import os
import sys
import traceback
import types
from pathlib import Path
from typing import Any, Callable

import torch

#: (toolbox, config under the package's .mim/configs, input (H, W), what to look at)
CONFIGS = [
    ("mmseg", "psanet/psanet_r50-d8_4xb2-40k_cityscapes-512x1024.py", (128, 128), "PSAHead: PSAMask"),
    ("mmseg", "ccnet/ccnet_r50-d8_4xb2-40k_cityscapes-512x1024.py", (128, 128), "CrissCrossAttention"),
    ("mmseg", "point_rend/pointrend_r50_4xb2-80k_cityscapes-512x1024.py", (128, 128), "point_sample"),
    ("mmseg", "maskformer/maskformer_r50-d32_8xb2-160k_ade20k-512x512.py", (128, 128), "mmdet FocalLoss"),
    ("mmseg", "mask2former/mask2former_r50_8xb2-90k_cityscapes-512x1024.py", (128, 128), "MSDeformAttn"),
    ("mmseg", "deeplabv3/deeplabv3_r50-d8_4xb2-40k_cityscapes-512x1024.py", (128, 128), "plain"),
    ("mmseg", "segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py", (128, 128), "plain"),
    ("mmpose", "body_2d_keypoint/dekr/coco/dekr_hrnet-w32_8xb10-140e_coco-512x512.py", (128, 128), "DeformConv2d"),
    ("mmpose", "body_2d_keypoint/rtmpose/coco/rtmpose-s_8xb256-420e_coco-256x192.py", (256, 192), "plain"),
    ("mmpose", "body_2d_keypoint/rtmo/coco/rtmo-s_8xb32-600e_coco-640x640.py", (128, 128), "plain"),
    ("mmpose", "body_2d_keypoint/topdown_heatmap/coco/td-hm_hrnet-w32_8xb64-210e_coco-256x192.py", (256, 192), "plain"),
    ("mmpretrain", "resnet/resnet50_8xb32_in1k.py", (64, 64), "plain"),
    ("mmpretrain", "convnext/convnext-tiny_32xb128_in1k.py", (64, 64), "plain"),
    ("mmpretrain", "swin_transformer/swin-tiny_16xb64_in1k.py", (224, 224), "plain"),
    ("mmpretrain", "mobilenet_v2/mobilenet-v2_8xb32_in1k.py", (64, 64), "plain"),
    ("mmpretrain", "vision_transformer/vit-base-p16_64xb64_in1k.py", (224, 224), "plain"),
]

PACKAGES = {"mmseg": "mmseg", "mmpose": "mmpose", "mmpretrain": "mmpretrain"}


class Recorder(types.ModuleType):
    """``mmcv._ext`` that counts calls by name and forwards them to mmfix's functions."""

    def __init__(self, ext: types.ModuleType) -> None:
        super().__init__("mmcv._ext")
        self.calls: collections.Counter[str] = collections.Counter()
        for name in dir(ext):
            if not name.startswith("__"):
                setattr(self, name, self._wrap(name, getattr(ext, name)))

    def _wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return function(*args, **kwargs)

        return recorded


def _install() -> Recorder:
    from mmfix._ops import _ext

    recorder = Recorder(_ext.build())
    sys.modules["mmcv._ext"] = recorder
    import mmcv.ops  # noqa: F401  (every ops module now holds the recorder)

    return recorder


def _outputs(value: Any) -> list[torch.Tensor]:
    """Every floating tensor that requires grad in a (nested) model output."""
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() and value.requires_grad else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _outputs(v)]
    return []


def _stub_torchvision() -> None:
    """MMPretrain's visual-grounding metric imports torchvision.ops.boxes at import time; torch 2.13's
    only torchvision build (CUDA) cannot load beside a CPU torch. The survey builds models only."""
    if importlib.util.find_spec("torchvision") is not None:
        return
    torchvision = types.ModuleType("torchvision")
    ops = types.ModuleType("torchvision.ops")
    boxes = types.ModuleType("torchvision.ops.boxes")
    torchvision.ops, ops.boxes = ops, boxes  # type: ignore[attr-defined]
    sys.modules.update({"torchvision": torchvision, "torchvision.ops": ops, "torchvision.ops.boxes": boxes})


def survey(toolbox: str, config: str, size: tuple[int, int]) -> str:
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    package = importlib.import_module(PACKAGES[toolbox])
    path = Path(package.__file__).parent / ".mim" / "configs" / config
    cfg = Config.fromfile(str(path))
    init_default_scope(toolbox)
    registry = importlib.import_module(f"{toolbox}.registry").MODELS
    model_cfg = cfg.model
    model_cfg.pop("pretrained", None)
    if model_cfg.get("backbone", {}).get("init_cfg"):
        model_cfg.backbone.init_cfg = None
    model = registry.build(model_cfg)
    model.train()
    height, width = size
    inputs = torch.randn(2, 3, height, width)  # 2: batch norm in training mode needs more than one value
    if toolbox == "mmseg":  # the loss too: MaskFormer's and PointRend's heads only run with targets
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample

        samples = []
        for _ in range(2):
            shape = (height, width)
            sample = SegDataSample(metainfo=dict(img_shape=shape, ori_shape=shape, pad_shape=shape))
            sample.gt_sem_seg = PixelData(data=torch.randint(0, 19, (1, height, width)))
            samples.append(sample)
        losses = model(inputs, samples, mode="loss")
        tensors = _outputs(losses)
    else:
        tensors = _outputs(model(inputs, None, mode="tensor"))
    if tensors:
        torch.stack([t.float().sum() for t in tensors]).sum().backward()
    return "ok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", help="toolbox:config (default: the built-in list)")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--verbose", action="store_true", help="print the traceback of a config that fails")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.environ["MMFIX_OPS_TORCHVISION"] = "0"
    _stub_torchvision()
    recorder = _install()
    size = (args.size, args.size)
    chosen = [(c.split(":", 1)[0], c.split(":", 1)[1], size, "") for c in args.configs] or CONFIGS
    print(f"{'toolbox':10} {'config':70} extension calls")
    for toolbox, config, input_size, _ in chosen:
        recorder.calls.clear()
        torch.manual_seed(0)
        try:
            status = survey(toolbox, config, input_size)
        except Exception as exc:  # the survey goes on; the failure is part of the result
            status = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            if args.verbose:
                traceback.print_exc()
        calls = ", ".join(f"{name}×{count}" for name, count in sorted(recorder.calls.items())) or "none"
        print(f"{toolbox:10} {config:70} {calls}   [{status}]", flush=True)


if __name__ == "__main__":
    main()
