"""Mask R-CNN (and friends) on mmfix's ops against mmcv's compiled ops: time per image, same run.

    python benchmarks/model_ops_speed.py [--config mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py ...]
                                         [--config mmseg:psanet/psanet_r50-d8_4xb2-40k_cityscapes-512x1024.py ...]
                                         [--family] [--repeat 5] [--threads N] [--size 800 1333]
                                         [--device cuda]

For each config (default: MMDetection's Mask R-CNN, Faster R-CNN, RetinaNet and Faster R-CNN
with DCN; ``toolbox:config`` names one of MMSegmentation's, MMPretrain's or MMPose's zoo,
``--family`` times the models of tests/integration/test_toolbox_zoo_ops.py), one model (seeded
random weights, score thresholds at 0 so every detection stage has work) runs inference on one
image (MMDetection 1333x800, MMSegmentation 1024x512, MMPretrain 224x224, MMPose its codec's
input size; ``--size`` for all) and one training step on a batch of 2, alternately with mmcv
2.1.0's compiled extension and with mmfix's (tests/zoo_support.py swaps the extension the real
mmcv.ops modules call). MMPose's inference is its ``tensor`` mode (tests/zoo_support.py).
Prints the median time of each and the ratio mmfix / compiled. Goals (issue 20, CPU):
inference <= 1.5x, training step <= 2x. ``--device cuda`` is the GPU variant (model and inputs
on the GPU, each step timed to torch.cuda.synchronize()); where compiled mmcv is missing or has
no CUDA kernels (the wheel in ../shared/wheels is a CPU build), it prints mmfix's times alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

DEFAULT = [
    "mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py",
    "faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py",
    "retinanet/retinanet_r50_fpn_1x_coco.py",
    "dcn/faster-rcnn_r50-dconv-c3-c5_fpn_1x_coco.py",
]
#: the other toolboxes' image (height, width) when --size is not given; MMPose: the codec's
SIZES = {"mmseg": (512, 1024), "mmpretrain": (224, 224)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", help="config path relative to mmdet's configs/, or toolbox:path")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--family", action="store_true", help="also the MMSeg/MMPretrain/MMPose test models")
    parser.add_argument("--size", type=int, nargs=2, default=None, metavar=("H", "W"))
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda: the GPU variant")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import zoo_support
    from mmengine.logging import MMLogger

    # init_weights logs one INFO record per parameter (hundreds of lines per model): keep the table readable
    MMLogger.get_instance("mmengine").setLevel("WARNING")

    from mmfix._ops import _ext
    from ops_support import compiled_ext_or_none, import_mmcv_ops, swap_ext

    zoo_support.IMAGE_HW = tuple(args.size or (800, 1333))
    zoo_support.POSE_MAX_SIDE = 1 << 30  # the codec's own input size, not the tests' smaller one
    mmfix_ext = _ext.build()
    import_mmcv_ops(mmfix_ext)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch sees no CUDA device here (torch.cuda.is_available() is False)")
    compiled = compiled_ext_or_none("times")
    exts = {"mmfix": mmfix_ext} if compiled is None else {"compiled": compiled, "mmfix": mmfix_ext}
    threads = f"{torch.get_num_threads()} threads" if device.type == "cpu" else torch.cuda.get_device_name(device)
    print(f"torch {torch.__version__}, {device.type}, {threads}; median of {args.repeat}")
    print(f"{'config':52} {'':10} {'compiled s':>10} {'mmfix s':>9} {'ratio':>6}")
    chosen = args.config or ([] if args.family else DEFAULT)
    if args.family:
        chosen += [f"{package}:{relative}" for package, relative in sorted(zoo_support.TOOLBOX_MODELS)]
    for name in chosen:
        package, relative = name.split(":", 1) if ":" in name else ("mmdet", name)
        model = zoo_support.build_model(zoo_support.configs_root(package) / relative).to(device)
        size = tuple(args.size) if args.size else SIZES.get(package)
        one = zoo_support.synthetic_batch(batch=1, model=model, image_hw=size)
        two = zoo_support.synthetic_batch(batch=2, model=model, image_hw=size)
        mode = zoo_support.PREDICT_MODE.get(package, "predict")
        shape = tuple(one["inputs"][0].shape[-2:])

        def infer(ext, model=model, one=one, mode=mode):
            model.eval()
            with swap_ext(ext), torch.no_grad():
                model(**model.data_preprocessor(one, False), mode=mode)

        def train_step(ext, model=model, two=two):
            model.train()
            with swap_ext(ext):
                zoo_support.seed_everything(3)
                losses = model(**model.data_preprocessor(two, True), mode="loss")
                total = sum(
                    v.sum()
                    for k, vs in losses.items()
                    if "loss" in k
                    for v in (vs if isinstance(vs, (list, tuple)) else [vs])
                )
                model.zero_grad(set_to_none=True)
                total.backward()

        for label, step in (("inference", infer), ("train step", train_step)):
            timed = dict(exts)
            note = ""
            for ext_name in list(timed):  # warm-up; a CPU-only compiled build refuses CUDA tensors
                try:
                    step(timed[ext_name])
                except RuntimeError as exc:
                    if ext_name == "mmfix":
                        raise
                    del timed[ext_name]
                    note = f"  compiled: {str(exc).splitlines()[0][:60]}"
            times: dict[str, list[float]] = {ext_name: [] for ext_name in timed}
            for _ in range(args.repeat):
                for ext_name, ext in timed.items():
                    synchronize(device)
                    start = time.perf_counter()
                    step(ext)
                    synchronize(device)
                    times[ext_name].append(time.perf_counter() - start)
            m = statistics.median(times["mmfix"])
            if "compiled" in times:
                c = statistics.median(times["compiled"])
                cells = f"{c:10.2f} {m:9.2f} {m / c:6.2f}"
            else:
                cells = f"{'-':>10} {m:9.2f} {'-':>6}"
            print(f"{relative:52} {label:10} {cells}  ({shape[1]}x{shape[0]}){note}", flush=True)


def synchronize(device) -> None:
    """Wait for the device's queued kernels, so that a CUDA step is timed to its end."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


if __name__ == "__main__":
    main()
