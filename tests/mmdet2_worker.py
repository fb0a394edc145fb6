"""One model, one image, two MMDetections: run by tests/mmdet2_support.py in a child process.

    python tests/mmdet2_worker.py 2x CONFIG IMAGE.npy OUT_DIR --seed N
        (in the real MMDetection 2.28.2 environment) builds CONFIG's model with 2.x's own code,
        seeded ``init_weights()`` (pretrained weights stripped: nothing is downloaded), writes
        OUT_DIR/state_dict.pth (the 2.x layout, as a 2.x training would save it) and
        OUT_DIR/result.pt (the 2.x prediction on the image, through the config's test pipeline).
    python tests/mmdet2_worker.py 3x CONFIG IMAGE.npy OUT_DIR --weights STATE_DICT --load MODE
        (in the test environment, mmfix active) loads the same 2.x CONFIG through mmfix's
        conversion, builds the 3.x model, loads the 2.x weights and writes OUT_DIR/result.pt.
        With ``--tta config`` (or ``--tta TYPE``), predicts as ``tools/test.py --tta`` does: the
        config's ``tta_model`` (its type replaced by TYPE) and ``tta_pipeline``.
        MODE ``upgrade``: ``mmfix._configs._layouts2x.upgrade`` then ``load_state_dict(strict=True)``
        (the rename table itself); ``mmengine``: MMEngine's ``load_checkpoint`` (the path users
        take, with mmfix's loader patch); ``none``: the model as built, no weights.
        OUT_DIR/load.json says which keys were renamed.

    python tests/mmdet2_worker.py batch JOBS.json
        runs each job of JOBS.json (a list of argument lists, one side throughout) in this one
        process, one after the other: a test file pays one interpreter start and one import of
        each MMDetection for all its cases (issue 29). A job that fails writes its traceback to
        OUT_DIR/error.txt and the next job runs.

Both sides write the same plain format (tensors in dicts, loadable with ``weights_only``):
``{"bboxes": N×4, "scores": N, "labels": N, "masks": N×H×W bool (if any), "mask_scores": N (Mask
Scoring R-CNN), "panoptic": H×W (if any)}``.
Only the standard library is imported at the top: each mode imports its own MMDetection.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from pretrained_free import strip_pretrained


def _run_2x(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch
    from mmcv import Config
    from mmdet.apis import inference_detector
    from mmdet.models import build_detector

    cfg = Config.fromfile(args.config)
    model_cfg = cfg.model.to_dict() if hasattr(cfg.model, "to_dict") else dict(cfg.model)
    strip_pretrained(model_cfg)
    cfg.model = model_cfg
    cfg.model["train_cfg"] = None
    torch.manual_seed(args.seed)
    model = build_detector(cfg.model, test_cfg=cfg.get("test_cfg"))
    model.init_weights()
    for rule in args.scale_params:  # PATTERN=FACTOR: a seeded model kept out of a chaotic regime
        pattern, factor = rule.rsplit("=", 1)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if re.search(pattern, name):
                    param.mul_(float(factor))
    model.cfg = cfg
    model.eval()
    torch.save(model.state_dict(), Path(args.out) / "state_dict.pth")
    image = np.load(args.image)
    with torch.no_grad():
        result = inference_detector(model, image)
    return _normalise_2x(result)


def _normalise_2x(result: Any) -> dict[str, Any]:
    import numpy as np
    import torch

    out: dict[str, Any] = {}
    if isinstance(result, dict):  # panoptic models: {"pan_results": H×W, "ins_results": (bbox, segm)?}
        if "pan_results" in result:
            out["panoptic"] = torch.as_tensor(np.asarray(result["pan_results"]).astype(np.int64))
        result = result.get("ins_results")
        if result is None:
            return out
    bbox, segm = result if isinstance(result, tuple) else (result, None)
    rows = [np.asarray(b, dtype=np.float32).reshape(-1, 5) for b in bbox]
    out["labels"] = torch.as_tensor(np.concatenate([np.full(len(r), i) for i, r in enumerate(rows)]).astype(np.int64))
    stacked = np.concatenate(rows) if rows else np.zeros((0, 5), np.float32)
    out["bboxes"] = torch.as_tensor(stacked[:, :4])
    out["scores"] = torch.as_tensor(stacked[:, 4])
    if isinstance(segm, tuple):  # Mask Scoring R-CNN: (masks per class, mask scores per class)
        segm, mask_scores = segm
        out["mask_scores"] = torch.as_tensor(
            np.concatenate([np.asarray(s, dtype=np.float32).reshape(-1) for s in mask_scores])
        )
    if segm is not None:
        masks = [np.asarray(m, dtype=bool) for per_class in segm for m in per_class]
        if masks:
            out["masks"] = torch.as_tensor(np.stack(masks))
    return out


def _run_3x(args: argparse.Namespace) -> dict[str, Any]:
    import mmfix  # noqa: F401, I001  (first, the automatic path, as in a user's script)
    import numpy as np
    import torch
    from mmdet.apis import inference_detector, init_detector
    from mmengine.runner.checkpoint import load_checkpoint

    model = init_detector(args.config, checkpoint=None, device="cpu")
    report: dict[str, Any] = {}
    if args.load == "upgrade":
        from mmfix._configs._layouts2x import upgrade

        state_dict = torch.load(args.weights, map_location="cpu", weights_only=True)
        done = upgrade(state_dict, model.state_dict().keys())
        report["renamed"] = {layout.name: n for layout, n in done.applied}
        model.load_state_dict(done.state_dict, strict=True)
    elif args.load == "mmengine":
        load_checkpoint(model, args.weights, map_location="cpu")
    (Path(args.out) / "load.json").write_text(json.dumps(report))
    image = np.load(args.image)
    with torch.no_grad():
        sample = _tta_predict(model, image, args.tta) if args.tta else inference_detector(model, image)
    return _normalise_3x(sample)


def _tta_predict(model: Any, image: Any, tta_type: str) -> Any:
    """What ``tools/test.py --tta`` does with one image: the config's tta_model around the model
    (its type replaced by ``tta_type`` unless that is "config"), the tta_pipeline's augmentations."""
    import copy

    from mmdet.registry import MODELS
    from mmengine.dataset import Compose, pseudo_collate

    cfg = copy.deepcopy(model.cfg.tta_model)
    if tta_type != "config":
        cfg["type"] = tta_type
    tta = MODELS.build({**cfg, "module": model})
    pipeline = copy.deepcopy(model.cfg.tta_pipeline)
    pipeline[0] = {"type": "mmdet.LoadImageFromNDArray"}
    data = Compose(pipeline)({"img": image, "img_id": 0})
    return tta.test_step(pseudo_collate([data]))[0]


def _normalise_3x(sample: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "pred_panoptic_seg" in sample:
        out["panoptic"] = sample.pred_panoptic_seg.sem_seg[0].long().cpu()
    if "pred_instances" in sample:
        pred = sample.pred_instances
        out["bboxes"] = pred.bboxes.float().cpu()
        out["scores"] = pred.scores.float().cpu()
        out["labels"] = pred.labels.long().cpu()
        if "masks" in pred:
            out["masks"] = pred.masks.bool().cpu()
        if "mask_scores" in pred:
            out["mask_scores"] = pred.mask_scores.float().cpu()
    return out


def _batch(jobs_file: str) -> int:
    import traceback

    for job in json.loads(Path(jobs_file).read_text()):
        out = Path(job[3])
        (out / "error.txt").unlink(missing_ok=True)
        try:
            main(job)
        except BaseException:  # the job's failure is its test's to report
            (out / "error.txt").write_text(traceback.format_exc())
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["batch"]:
        return _batch(argv[1])
    parser = argparse.ArgumentParser()
    parser.add_argument("side", choices=("2x", "3x"))
    parser.add_argument("config")
    parser.add_argument("image")
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale-params", action="append", default=[], help="2x: PATTERN=FACTOR after init")
    parser.add_argument("--weights")
    parser.add_argument("--load", choices=("upgrade", "mmengine", "none"), default="upgrade")
    parser.add_argument("--tta", help='3x: predict as `--tta` does, with tta_model ("config") or this type')
    args = parser.parse_args(argv)
    result = _run_2x(args) if args.side == "2x" else _run_3x(args)
    import torch

    torch.save(result, Path(args.out) / "result.pt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
