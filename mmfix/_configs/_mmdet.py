"""MMDetection rules: model, pipelines, datasets and dataloaders, evaluators.

The 2.x pipeline did what 3.x's data preprocessor does (Normalize, Pad, to_rgb) and
what PackDetInputs does (DefaultFormatBundle, Collect, ImageToTensor); those parts
move into ``model.data_preprocessor`` and one packing transform.
"""

from __future__ import annotations

import copy
import posixpath
from typing import Any

from .._errors import ConfigConversionError
from . import _engine, _mmdet_detr, _mmdet_maskformer, _transforms
from ._image_metas import OPEN_IMAGES, raw_sets
from ._report import Report

LEGACY_DATA_KEYS = ("data", "evaluation")

_TEST_META_KEYS = ("img_id", "img_path", "ori_shape", "img_shape", "scale_factor")
_PACKING = (
    "DefaultFormatBundle",
    "Collect",
    "ImageToTensor",
    "ToTensor",
    "Transpose",
    "ToDataContainer",
    "FormatShape",
)
_METRICS = {  # dataset type -> 3.x metric type
    "CocoDataset": "CocoMetric",
    "DeepFashionDataset": "CocoMetric",
    "Objects365V1Dataset": "CocoMetric",
    "Objects365V2Dataset": "CocoMetric",
    "CityscapesDataset": "CocoMetric",
    "LVISV05Dataset": "LVISMetric",
    "LVISV1Dataset": "LVISMetric",
    "LVISDataset": "LVISMetric",
    "VOCDataset": "VOCMetric",
    "WIDERFaceDataset": "VOCMetric",
    "XMLDataset": "VOCMetric",
    "CocoPanopticDataset": "CocoPanopticMetric",
    "OpenImagesDataset": "OpenImagesMetric",
    "OpenImagesChallengeDataset": "OpenImagesMetric",
}
# Anchor heads that sampled with PseudoSampler implicitly in 2.x (sampling=False) and whose 3.x
# configs spell it out; the others (ATSS, GFL, FCOS, ...) still choose it themselves in 3.x.
_PSEUDO_SAMPLER_HEADS = frozenset(
    (
        "RetinaHead",
        "FreeAnchorRetinaHead",
        "GARetinaHead",
        "PISARetinaHead",
        "RetinaSepBNHead",
        "SABLRetinaHead",
        "FSAFHead",
        "SSDHead",
        "PISASSDHead",
        "YOLACTHead",
        "AnchorHead",
        "GuidedAnchorHead",
    )
)
_WRAPPERS = ("RepeatDataset", "ClassBalancedDataset", "ConcatDataset", "MultiImageMixDataset")


class _State:
    """What the pipeline told us that the model section needs."""

    def __init__(self) -> None:
        self.normalize: dict[str, Any] | None = None
        self.pad_divisor: int | None = None
        self.pad_mask = False
        self.pad_seg = False
        self.seg_scale_factor: float | None = None
        self.tta: dict[str, Any] | None = None
        self.batch_pad: Any = None
        self.pad_values: dict[str, Any] = {}


def _pad_values(pad_val: Any) -> dict[str, Any]:
    """2.x Pad's pad_val (img 0, masks 0, seg 255 by default) -> the data preprocessor's non-default values."""
    if pad_val is None:
        return {}
    if not isinstance(pad_val, dict):
        pad_val = {"img": pad_val}
    out: dict[str, Any] = {}
    for key, target, default in (
        ("img", "pad_value", 0),
        ("masks", "mask_pad_value", 0),
        ("seg", "seg_pad_value", 255),
    ):
        if key in pad_val and pad_val[key] != default:
            out[target] = pad_val[key]
    return out


# ----------------------------------------------------------------------------- pipelines
_resize = _transforms.resize
_backend = _transforms.backend


_GEOMETRIC = ("Resize", "RandomResize", "RandomChoiceResize", "RandomFlip")


def _broadcast_proposals(pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """3.x transforms leave proposals alone unless wrapped in ProposalBroadcaster (2.x moved them along)."""
    out: list[dict[str, Any]] = []
    for t in pipeline:
        if t.get("type") in _GEOMETRIC:
            if out and out[-1].get("type") == "ProposalBroadcaster":
                out[-1]["transforms"].append(t)
            else:
                out.append({"type": "ProposalBroadcaster", "transforms": [t]})
        else:
            out.append(t)
    return out


def convert_pipeline(
    pipeline: list[dict[str, Any]],
    report: Report,
    state: _State,
    *,
    test: bool,
    where: str,
    annotations: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    out = _convert_pipeline(
        pipeline,
        report,
        state,
        test=test,
        where=where,
        annotations=None if any(t.get("type") == "LoadProposals" for t in pipeline) else annotations,
    )
    if any(t.get("type") == "LoadProposals" for t in out):
        out = _broadcast_proposals(out)
        report.note(f"{where}: proposals follow Resize/RandomFlip through ProposalBroadcaster, as they did in 2.x")
    return out


def _convert_pipeline(
    pipeline: list[dict[str, Any]],
    report: Report,
    state: _State,
    *,
    test: bool,
    where: str,
    annotations: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    packed = False
    for t in copy.deepcopy(list(pipeline)):
        kind = t.get("type")
        if kind == "MultiScaleFlipAug":
            out.extend(_flip_aug(t, report, state, where, annotations))
            packed = True
            continue
        converted = _transform(t, report, state, test=test, where=where)
        if converted is None:
            continue
        if converted.get("type") == "PackDetInputs":
            if packed:
                continue
            packed = True
        out.append(converted)
    return out


def _transform(t: dict[str, Any], report: Report, state: _State, *, test: bool, where: str) -> dict[str, Any] | None:
    kind = t.get("type")
    if kind == "Normalize":
        state.normalize = {"mean": list(t["mean"]), "std": list(t["std"]), "bgr_to_rgb": bool(t.get("to_rgb", True))}
        report.moved(f"{where}: Normalize", "model.data_preprocessor (mean, std, bgr_to_rgb)")
        return None
    if kind == "Pad":
        if "size_divisor" in t and "size" not in t and not t.get("pad_to_square"):
            state.pad_divisor = t["size_divisor"]
            values = _pad_values(t.get("pad_val"))
            image_value = values.pop("pad_value", None)
            if not test:  # masks and maps are padded for training; the test pipeline has none
                state.pad_values = values
            report.moved(f"{where}: Pad(size_divisor)", "model.data_preprocessor.pad_size_divisor")
            if image_value is None:
                return None
            # The data preprocessor pads normalised images with one number; an image pad value such as
            # (128, 128, 128) applied before Normalize stays a Pad transform (the preprocessor's
            # padding is then a no-op on these already divisible images).
            return {"type": "Pad", "size_divisor": t["size_divisor"], "pad_val": {"img": image_value}}
        if (
            "size" in t
            and not test
            and not t.get("pad_to_square")
            and isinstance(t.get("pad_val", 0), (int, float))
            and not t.get("pad_val", 0)
        ):
            # A fixed-size zero pad after Normalize: 3.x pads the normalised batch to that size.
            state.batch_pad = list(t["size"])
            report.moved(f"{where}: Pad(size)", "model.data_preprocessor.batch_augments (BatchFixedSizePad)")
            return None
        t.pop("size_divisor", None) if "size" in t else None
        if isinstance(t.get("pad_val"), (int, float)):
            t["pad_val"] = {"img": t["pad_val"]}
        return t
    if kind in _PACKING:
        if kind == "Collect":
            report.moved(f"{where}: DefaultFormatBundle/Collect/ImageToTensor", "PackDetInputs")
            if test:
                return {"type": "PackDetInputs", "meta_keys": _TEST_META_KEYS}
            return {"type": "PackDetInputs"}
        return None
    if kind == "Resize":
        return _resize(t, report)
    if kind == "RandomFlip":
        ratio = t.pop("flip_ratio", None)
        if ratio is None:
            return None  # 2.x: no ratio means no flip (the MultiScaleFlipAug case)
        target = {"type": "RandomFlip", "prob": ratio}
        if "direction" in t:
            target["direction"] = t["direction"]
        return target
    if kind in (
        "LoadImageFromFile",
        "LoadAnnotations",
        "LoadPanopticAnnotations",
        "LoadProposals",
        "LoadMultiChannelImageFromFiles",
        "LoadImageFromWebcam",
    ):
        _backend(t)
        if kind == "LoadAnnotations":
            state.pad_mask = state.pad_mask or bool(t.get("with_mask"))
            state.pad_seg = state.pad_seg or bool(t.get("with_seg"))
        if kind == "LoadPanopticAnnotations":
            state.pad_mask = state.pad_mask or bool(t.get("with_mask", True))
            state.pad_seg = state.pad_seg or bool(t.get("with_seg", True))
        return t
    if kind == "SegRescale":
        state.seg_scale_factor = t.get("scale_factor", 1)
        report.moved(f"{where}: SegRescale", "model.roi_head.semantic_head.seg_scale_factor")
        return None
    if kind == "Albu":
        t["keymap"] = {"img": "image", "gt_masks": "masks", "gt_bboxes": "bboxes"}
        t.pop("update_pad_shape", None)
        return t
    if kind == "AutoAugment":
        policies = [
            [c for c in (_transform(dict(x), report, state, test=test, where=where) for x in policy) if c]
            for policy in t["policies"]
        ]
        return {"type": "RandomChoice", "transforms": policies}
    if kind == "Expand":
        return t
    if kind == "RandomShift" and "shift_ratio" in t:
        t["prob"] = t.pop("shift_ratio")
        report.moved(f"{where}: RandomShift.shift_ratio", "RandomShift.prob")
        return t
    # Same name and arguments in 3.x: PhotoMetricDistortion, MinIoURandomCrop, RandomCrop, Mosaic,
    # RandomAffine, MixUp, YOLOXHSVRandomAug, FilterAnnotations, CutOut, RandomCenterCropPad, ...
    return t


def _flip_aug(
    t: dict[str, Any], report: Report, state: _State, where: str, annotations: dict[str, Any] | None
) -> list[dict[str, Any]]:
    scales = t.get("img_scale")
    scale_list = scales if isinstance(scales, list) else [scales]
    flip = t.get("flip", False)
    inner = t.get("transforms", [])
    out: list[dict[str, Any]] = []
    resize_done = False
    for x in inner:
        x = dict(x)
        if x.get("type") == "Resize":
            if "scale_factor" in t and scales is None:
                x["scale_factor"] = t["scale_factor"]
            r = _resize(x, report, scale_list[0] if scales is not None else None)
            if r is not None and r.get("scale_factor") in (1, 1.0) and "scale" not in r:
                r = None  # MultiScaleFlipAug(scale_factor=1.0): the image keeps its size
                resize_done = True
            if r is not None:
                out.append(r)
                resize_done = True
            continue
        if x.get("type") == "RandomFlip":
            continue  # inside MultiScaleFlipAug, 2.x flipped by the wrapper's `flip` only, whatever flip_ratio said
        c = _transform(x, report, state, test=True, where=where)
        if c is not None and c.get("type") != "PackDetInputs":
            out.append(c)
    if not resize_done and scales is not None:
        out.insert(0, {"type": "Resize", "scale": tuple(scale_list[0] or ()), "keep_ratio": True})
    if annotations is not None:
        # Loaded after every geometric step, so evaluation sees the boxes/masks at the original size.
        out.append(copy.deepcopy(annotations))
    if any(x.get("type") == "RandomCenterCropPad" for x in out):
        # CenterNet/CornerNet heads decode with the crop's border in 3.x.
        out.append({"type": "PackDetInputs", "meta_keys": ("img_id", "img_path", "ori_shape", "img_shape", "border")})
    else:
        out.append({"type": "PackDetInputs", "meta_keys": _TEST_META_KEYS})
    if len(scale_list) > 1 or flip:
        inner_steps = [
            x
            for x in out
            if x.get("type") not in ("Resize", "LoadAnnotations", "LoadPanopticAnnotations", "PackDetInputs")
        ]
        directions = t.get("flip_direction", "horizontal")
        state.tta = {
            "scales": scale_list if scales is not None else None,
            "flip": flip,
            "flip_direction": [directions] if isinstance(directions, str) else list(directions),
            "scale_factor": t.get("scale_factor"),
            "inner": inner_steps,
        }
        report.note(
            f"{where}: 2.x tested with test-time augmentation (scales {scale_list}, flip={flip}); 3.x runs "
            "TTA only with `tools/test.py --tta`: tta_model and tta_pipeline are written for it, and the "
            "plain test pipeline uses the first scale without flip. tta_model is mmfix's DetTTAModel2x, which "
            "merges as 2.x's aug_test did (3.x's DetTTAModel merges each augmentation's final detections); "
            "for a detector whose 2.x aug_test it does not reproduce, --tta stops with an error saying so"
        )
    report.moved(f"{where}: MultiScaleFlipAug", "Resize + PackDetInputs")
    return out


def _tta(
    cfg_out: dict[str, Any], tta: dict[str, Any], load: dict[str, Any], annotations: dict[str, Any] | None
) -> None:
    # 2.x's merging (mmfix/_legacy_models/mmdet.py); tta_cfg serves tta_model.type=DetTTAModel only.
    cfg_out["tta_model"] = {
        "type": "DetTTAModel2x",
        "tta_cfg": {"nms": {"type": "nms", "iou_threshold": 0.5}, "max_per_img": 100},
    }
    _engine.add_custom_import(cfg_out, _TWOX_MODULE)
    # 2.x's MultiScaleFlipAug order: each scale unflipped, then flipped in each direction
    flips = [{"type": "RandomFlip", "prob": 0.0}]
    if tta["flip"]:
        flips += [{"type": "RandomFlip", "prob": 1.0, "direction": d} for d in tta["flip_direction"]]
    if tta["scales"] is not None:
        resizes = [{"type": "Resize", "scale": tuple(s), "keep_ratio": True} for s in tta["scales"]]
    else:
        factors = tta["scale_factor"] if isinstance(tta["scale_factor"], list) else [tta["scale_factor"]]
        resizes = [{"type": "Resize", "scale_factor": f, "keep_ratio": True} for f in factors]
    steps: list[list[dict[str, Any]]] = [resizes, flips]
    steps += [[copy.deepcopy(x)] for x in tta.get("inner", [])]
    if annotations is not None:
        steps.append([copy.deepcopy(annotations)])
    steps.append([{"type": "PackDetInputs", "meta_keys": _TEST_META_KEYS + ("flip", "flip_direction")}])
    cfg_out["tta_pipeline"] = [copy.deepcopy(load), {"type": "TestTimeAug", "transforms": steps}]


# ----------------------------------------------------------------------------- datasets
def _dataset(
    ds: dict[str, Any], report: Report, state: _State, *, test: bool, where: str, annotations: dict[str, Any] | None
) -> dict[str, Any]:
    ds = dict(ds)
    kind = ds.get("type")
    ds.pop("samples_per_gpu", None)
    ds.pop("workers_per_gpu", None)
    if kind in _WRAPPERS:
        if "dataset" in ds:
            ds["dataset"] = _dataset(ds["dataset"], report, state, test=test, where=where, annotations=annotations)
        if "datasets" in ds:
            ds["datasets"] = [
                _dataset(d, report, state, test=test, where=where, annotations=annotations) for d in ds["datasets"]
            ]
        if "pipeline" in ds:
            ds["pipeline"] = convert_pipeline(
                ds["pipeline"], report, state, test=test, where=where, annotations=annotations
            )
        if kind == "ConcatDataset":
            ds.pop("separate_eval", None)
        return ds
    if isinstance(ds.get("ann_file"), (list, tuple)):
        # 2.x concatenated a list of annotation files implicitly.
        prefixes = ds.pop("img_prefix", None)
        parts = []
        for i, ann in enumerate(ds.pop("ann_file")):
            part = dict(ds, ann_file=ann)
            if prefixes is not None:
                part["img_prefix"] = prefixes[i] if isinstance(prefixes, (list, tuple)) else prefixes
            parts.append(_dataset(part, report, state, test=test, where=where, annotations=annotations))
        report.moved(f"{where}.ann_file (list)", "ConcatDataset")
        return {"type": "ConcatDataset", "ignore_keys": ["dataset_type"], "datasets": parts}
    prefix: dict[str, Any] = {}
    if "img_prefix" in ds:
        img_prefix = ds.pop("img_prefix")
        if kind in ("VOCDataset", "XMLDataset", "WIDERFaceDataset"):
            prefix["sub_data_root"] = img_prefix
        else:
            prefix["img"] = img_prefix
        report.moved(f"{where}.img_prefix", f"{where}.data_prefix")
    if "seg_prefix" in ds:
        prefix["seg"] = ds.pop("seg_prefix")
        report.moved(f"{where}.seg_prefix", f"{where}.data_prefix.seg")
    if prefix:
        ds["data_prefix"] = prefix
    if "classes" in ds:
        ds["metainfo"] = {"classes": tuple(ds.pop("classes"))}
        report.moved(f"{where}.classes", f"{where}.metainfo.classes")
    if not test and ds.pop("ins_ann_file", None) is not None:
        report.drop(f"{where}.ins_ann_file", "2.x read it only to evaluate; a training set never did")
    filter_empty = ds.pop("filter_empty_gt", True)
    open_images = kind in OPEN_IMAGES
    if test:
        ds["test_mode"] = True
    elif not open_images:  # 2.x's OpenImagesDataset never filtered images (and warned that it could not)
        # 2.x dropped images smaller than 32 px and (by default) without boxes when training.
        ds["filter_cfg"] = {"filter_empty_gt": filter_empty, "min_size": 32}
        if kind in ("VOCDataset", "XMLDataset"):
            ds["filter_cfg"]["bbox_min_size"] = 32
        if kind == "ConcatDataset":
            ds.pop("filter_cfg")
    _backend(ds)
    if "pipeline" in ds:
        ds["pipeline"] = convert_pipeline(
            ds["pipeline"], report, state, test=test, where=where, annotations=annotations
        )
        if open_images:
            for t in ds["pipeline"]:
                if t.get("type") == "LoadAnnotations" and t.pop("denorm_bbox", None) is not None:
                    report.moved(
                        f"{where}: LoadAnnotations.denorm_bbox",
                        f"{where}.meta_file (3.x's {kind} denormalises boxes itself)",
                    )
                if t.get("type") == "LoadAnnotations" and t.pop("normed_bbox", None) is not None:
                    report.drop(
                        f"{where}: LoadAnnotations.normed_bbox",
                        "not an argument of 2.x's "
                        "LoadAnnotations either (2.x failed on it); 3.x's dataset denormalises boxes",
                    )
                if test and t.get("type") == "PackDetInputs":
                    # OpenImagesMetric reads the ground truth and image-level labels from the meta.
                    keys = t.get("meta_keys") or _TEST_META_KEYS
                    t["meta_keys"] = tuple(keys) + ("instances", "image_level_labels")
    return ds


def _innermost(ds: dict[str, Any]) -> dict[str, Any]:
    while ds.get("type") in _WRAPPERS:
        ds = ds["dataset"] if "dataset" in ds else ds["datasets"][0]
    return ds


def _annotations_of(pipeline: list[dict[str, Any]]) -> dict[str, Any] | None:
    for t in pipeline:
        if t.get("type") in ("LoadAnnotations", "LoadPanopticAnnotations"):
            return {k: v for k, v in t.items() if k not in ("file_client_args",)}
    return None


def _train_pipeline_of(ds: dict[str, Any]) -> list[dict[str, Any]]:
    while True:
        if ds.get("pipeline") and any(
            t.get("type") in ("LoadAnnotations", "LoadPanopticAnnotations") for t in ds["pipeline"]
        ):
            return ds["pipeline"]
        if ds.get("type") in _WRAPPERS:
            ds = ds["dataset"] if "dataset" in ds else ds["datasets"][0]
            continue
        return ds.get("pipeline", [])


def convert_data(src: dict[str, Any], out: dict[str, Any], report: Report, loop: _engine.Loop) -> _State:
    state = _State()
    data = src.pop("data", None)
    evaluation = src.pop("evaluation", None)
    if data is None:
        if evaluation is not None:
            raise ConfigConversionError(
                "evaluation",
                evaluation,
                "evaluation needs the 2.x `data` section "
                "(its dataset type picks the 3.x metric); set val_evaluator instead.",
            )
        return state
    data = dict(data)
    if "imgs_per_gpu" in data:  # 2.0's name, which 2.x still honoured (and preferred)
        data["samples_per_gpu"] = data.pop("imgs_per_gpu")
    batch = data.pop("samples_per_gpu", 2)
    workers = data.pop("workers_per_gpu", 2)
    report.moved("data.samples_per_gpu", "train_dataloader.batch_size")
    report.moved("data.workers_per_gpu", "*_dataloader.num_workers")
    overrides = {name: dict(data.pop(f"{name}_dataloader", {}) or {}) for name in ("train", "val", "test")}
    persistent = data.pop("persistent_workers", None)
    annotations = None
    if "train" in data:
        annotations = _annotations_of(_train_pipeline_of(data["train"]))
        if annotations is not None:
            # Only what evaluation reads: the test images' boxes / masks at their original size.
            # (not with_seg: COCO-style evaluation never reads the semantic maps, which test sets often lack)
            annotations = {k: v for k, v in annotations.items() if k in ("type", "with_bbox", "with_mask")}
    test_annotations = annotations
    for name in ("train", "val", "test"):
        if name not in data:
            continue
        raw = data.pop(name)
        test = name != "train"
        ann_file = str(_innermost(raw).get("ann_file", ""))
        anns = test_annotations if test and "image_info" not in ann_file and "test-dev" not in ann_file else None
        if test and anns is not None and anns.get("type") == "LoadPanopticAnnotations":
            anns = dict(anns)
        dataset = _dataset(raw, report, state, test=test, where=f"data.{name}", annotations=anns)
        over = overrides[name]
        size = over.pop("samples_per_gpu", raw.get("samples_per_gpu", batch if name == "train" else 1))
        nwork = over.pop("workers_per_gpu", raw.get("workers_per_gpu", workers))
        extra: dict[str, Any] = {}
        if name == "train":
            # 2.x always grouped training images by aspect ratio (GroupSampler).
            extra["batch_sampler"] = {"type": "AspectRatioBatchSampler"}
        loader = _engine.dataloader(size, nwork, not test, dataset, **extra)
        if persistent is not None:
            loader["persistent_workers"] = bool(persistent) and nwork > 0
        for key in over:
            if key in ("shuffle",):
                loader["sampler"]["shuffle"] = over[key]
            elif key in ("persistent_workers", "pin_memory", "drop_last"):
                loader[key] = over[key]
            else:
                report.drop(f"data.{name}_dataloader.{key}", "no 3.x dataloader equivalent")
        out[f"{name}_dataloader"] = loader
        report.moved(f"data.{name}", f"{name}_dataloader.dataset")
        if test and state.tta is not None and name == "test":
            load = next(
                (t for t in dataset.get("pipeline", []) if t.get("type") == "LoadImageFromFile"),
                {"type": "LoadImageFromFile"},
            )
            _tta(out, state.tta, load, anns)
    for key in data:
        report.drop(f"data.{key}", "no 3.x dataloader equivalent")
    _train_meta_file(out, report)
    if "val_dataloader" in out and "test_dataloader" not in out:
        out["test_dataloader"] = copy.deepcopy(out["val_dataloader"])
    _evaluators(evaluation, out, report, loop)
    return state


def _train_meta_file(out: dict[str, Any], report: Report) -> None:
    """Name the image-size file 3.x's OpenImages datasets need for training (2.x read the images).

    3.x's OpenImagesDataset cannot be built without ``meta_file``; 2.x configs name one only for
    their evaluation sets. The training one gets the name 3.x's own configs use: the evaluation
    file's name with ``validation`` → ``train``, beside the training annotations
    (``annotations/train-image-metas.pkl``, ``challenge2019/challenge-2019-train-metas.pkl``),
    which is where MMDetection's tools/misc/get_image_metas.py writes it; ``mmfix image-metas`` makes it.
    """
    train = out.get("train_dataloader")
    if train is None:
        return
    name = "train-image-metas.pkl"
    for other in ("val_dataloader", "test_dataloader"):
        meta = _innermost(out[other]["dataset"]).get("meta_file") if other in out else None
        if isinstance(meta, str) and "validation" in posixpath.basename(meta):
            name = posixpath.basename(meta).replace("validation", "train")
            break
    taken: set[str] = set()
    for _, ds in raw_sets(train["dataset"]):
        if "meta_file" in ds:
            taken.add(str(ds["meta_file"]))
            continue
        ann_file = str(ds.get("ann_file", ""))
        folder = posixpath.dirname(ann_file)
        path = posixpath.join(folder, name)
        if path in taken:  # a second set beside the first (a ConcatDataset): one list per file
            stem = posixpath.splitext(posixpath.basename(ann_file))[0]
            path = posixpath.join(folder, f"{stem}-image-metas.pkl")
        ds["meta_file"] = path
        taken.add(path)
        report.note(
            f"data.train: 3.x's {ds['type']} reads the training images' sizes from meta_file, where 2.x "
            f"read them from the images; set to {path!r}, the name 3.x's configs use. Make it once with "
            "`mmfix image-metas CONFIG` (it reads each image's size as 2.x did)"
        )


def _evaluators(evaluation: dict[str, Any] | None, out: dict[str, Any], report: Report, loop: _engine.Loop) -> None:
    evaluation = dict(evaluation or {})
    interval = evaluation.pop("interval", 1)
    if "train_cfg" in out:
        out["train_cfg"]["val_interval"] = interval
        if "start" in evaluation and evaluation["start"] is not None:
            out["train_cfg"]["val_begin"] = evaluation.pop("start")
        if "dynamic_intervals" in evaluation:
            out["train_cfg"]["dynamic_intervals"] = evaluation.pop("dynamic_intervals")
    evaluation.pop("start", None)
    if evaluation.get("by_epoch") is not None:
        evaluation.pop("by_epoch")
    save_best = evaluation.pop("save_best", None)
    rule = evaluation.pop("rule", None)
    if save_best is not None and "default_hooks" in out:
        out["default_hooks"]["checkpoint"]["save_best"] = save_best
        out["default_hooks"]["checkpoint"]["rule"] = rule or "greater"
        report.moved("evaluation.save_best", "default_hooks.checkpoint.save_best")
    for name in ("val", "test"):
        loader = out.get(f"{name}_dataloader")
        if loader is None:
            continue
        ds = _innermost(loader["dataset"])
        kind = ds.get("type")
        metric_type = _METRICS.get(str(kind))
        if metric_type is None:
            raise ConfigConversionError(
                f"data.{name}.type",
                kind,
                "the 2.x `evaluation` of a dataset "
                "mmfix does not know cannot pick a 3.x metric; set val_evaluator / "
                f"test_evaluator yourself. Known datasets: {', '.join(sorted(_METRICS))}.",
            )
        metric = evaluation.get("metric", "bbox" if metric_type == "CocoMetric" else "mAP")
        target: dict[str, Any] = {"type": metric_type}
        if metric_type in ("CocoMetric", "LVISMetric"):
            ann = ds.get("ann_file")
            root = ds.get("data_root")
            target["ann_file"] = (root.rstrip("/") + "/" + ann) if root and ann and not ann.startswith("/") else ann
            target["metric"] = metric
            for key in ("classwise", "proposal_nums", "iou_thrs", "metric_items"):
                if key in evaluation:
                    target[key] = evaluation[key]
            target["format_only"] = False
        elif metric_type == "VOCMetric":
            target["metric"] = metric
            target["eval_mode"] = "11points" if "2007" in str(ds.get("ann_file", "")) else "area"
            if "iou_thr" in evaluation:
                target["iou_thrs"] = evaluation["iou_thr"]
        elif metric_type == "CocoPanopticMetric":
            target["ann_file"] = ds.get("ann_file")
            target["seg_prefix"] = ds.get("data_prefix", {}).get("seg")
            instance = _panoptic_instance_metric(ds, metric, evaluation, name)
            if instance is not None:
                metrics = [metric] if isinstance(metric, str) else list(metric)
                out[f"{name}_evaluator"] = [target, instance] if "PQ" in metrics else instance
                report.moved(f"data.{name}.ins_ann_file", f"{name}_evaluator (CocoMetric.ann_file)")
                continue
        out[f"{name}_evaluator"] = target
    if evaluation:
        report.moved(
            "evaluation",
            "val_evaluator / test_evaluator" + (" and train_cfg.val_interval" if "train_cfg" in out else ""),
        )
    for key in evaluation:
        if key not in ("metric", "classwise", "proposal_nums", "iou_thrs", "metric_items", "iou_thr"):
            report.drop(f"evaluation.{key}", "no 3.x evaluator equivalent")


def _panoptic_instance_metric(
    ds: dict[str, Any], metric: Any, evaluation: dict[str, Any], name: str
) -> dict[str, Any] | None:
    """2.x's CocoPanopticDataset also evaluated its instance results (bbox, segm, proposal) against
    ``ins_ann_file``; 3.x's dataset takes no such argument and a CocoMetric beside the panoptic one
    does that evaluation (as 3.x's Mask2Former configs have it)."""
    ins_ann_file = ds.pop("ins_ann_file", None)  # 3.x's CocoPanopticDataset refuses it
    metrics = [metric] if isinstance(metric, str) else list(metric)
    instance = [m for m in metrics if m in ("bbox", "segm", "proposal")]
    if not instance:
        return None
    if ins_ann_file is None:
        raise ConfigConversionError(
            "evaluation.metric",
            metric,
            f"2.x evaluated {'/'.join(instance)} of a CocoPanopticDataset against its ins_ann_file, which "
            f"data.{name} does not set (2.x stopped there too); set data.{name}.ins_ann_file to the "
            "instance annotation file (3.x reads it as a CocoMetric's ann_file).",
        )
    target: dict[str, Any] = {"type": "CocoMetric", "ann_file": ins_ann_file, "metric": instance}
    for key in ("classwise", "proposal_nums", "iou_thrs", "metric_items"):
        if key in evaluation:
            target[key] = evaluation[key]
    target["format_only"] = False
    return target


# ----------------------------------------------------------------------------- model
def _pretrained(model: dict[str, Any], report: Report) -> None:
    pretrained = model.pop("pretrained", None)
    if pretrained is None:
        return
    backbone = model.get("backbone")
    if not isinstance(backbone, dict):
        report.drop("model.pretrained", "the model has no backbone to load it into")
        return
    inherited = backbone.get("init_cfg")
    if inherited is not None and inherited != {"type": "Pretrained", "checkpoint": pretrained}:
        # 2.x's ResNet refused this pair at build time ("init_cfg and pretrained cannot be specified at
        # the same time"); configs that set it meant the child's `pretrained` to replace the base's weights.
        report.note(
            f"model.pretrained={pretrained!r} replaces the inherited model.backbone.init_cfg={inherited!r} "
            "(2.x refused the pair when building a ResNet)"
        )
    backbone["init_cfg"] = {"type": "Pretrained", "checkpoint": pretrained}
    report.moved("model.pretrained", "model.backbone.init_cfg")


def _match_costs(node: Any, box_format: str | None) -> None:
    """HungarianAssigner(cls_cost, reg_cost, iou_cost, ...) -> HungarianAssigner(match_costs=[...])."""
    if isinstance(node, dict):
        if node.get("type") in ("HungarianAssigner", "MaskHungarianAssigner") and "match_costs" not in node:
            costs = []
            for key in ("cls_cost", "reg_cost", "iou_cost", "mask_cost", "dice_cost"):
                cost = node.pop(key, None)
                if cost is None:
                    continue
                cost = dict(cost)
                if cost.get("type") == "BBoxL1Cost" and box_format:
                    cost.setdefault("box_format", box_format)
                costs.append(cost)
            node["type"] = "HungarianAssigner"
            node["match_costs"] = costs
        for key, value in node.items():
            _match_costs(value, "xyxy" if key == "rcnn" else box_format)
    elif isinstance(node, list):
        for value in node:
            _match_costs(value, box_format)


def _renamed_arguments(model: dict[str, Any], report: Report) -> None:
    """Heads and necks whose 3.x constructors renamed or restructured 2.x arguments."""
    neck = model.get("neck")
    if isinstance(neck, dict):
        if neck.get("type") == "CTResNetNeck" and "in_channel" in neck:
            neck["in_channels"] = neck.pop("in_channel")
            report.moved("model.neck.in_channel", "model.neck.in_channels")
        if neck.get("type") == "NASFPN" and "add_extra_convs" in neck:
            neck.pop("add_extra_convs")  # NAS-FPN always built its extra levels itself
            report.drop("model.neck.add_extra_convs", "NASFPN builds its extra levels itself in 3.x too")
    head = model.get("bbox_head")
    if isinstance(head, dict) and head.get("type") == "CenterNetHead":
        for old, new in (("in_channel", "in_channels"), ("feat_channel", "feat_channels")):
            if old in head:
                head[new] = head.pop(old)
                report.moved(f"model.bbox_head.{old}", f"model.bbox_head.{new}")
    if model.get("type") == "YOLACT" and isinstance(model.get("segm_head"), dict):
        segm = model.pop("segm_head")
        mask = model.setdefault("mask_head", {})
        mask["with_seg_branch"] = True
        if "loss_segm" in segm:
            mask["loss_segm"] = segm["loss_segm"]
        report.moved("model.segm_head", "model.mask_head (with_seg_branch, loss_segm)")
    rpn = model.get("rpn_head")
    if isinstance(rpn, dict) and rpn.get("type") == "CascadeRPNHead":
        for stage in rpn.get("stages", []):
            if stage.pop("sampling", None) is not None:
                report.drop("model.rpn_head.stages[].sampling", "3.x heads sample as train_cfg.sampler says")
    _restructured_cfgs(model, report)
    teacher = model.get("teacher_config")
    if isinstance(teacher, str):
        report.note(
            f"model.teacher_config={teacher!r} names a 2.x config file; 3.x renamed the official files, "
            "so point it at the teacher's 3.x config (or convert it with mmfix convert-config)"
        )


_ALL_PAIRS = 2**31 - 1


def _restructured_cfgs(model: dict[str, Any], report: Report) -> None:
    """train_cfg / test_cfg entries that 3.x reads from another place (or that 2.x hard-coded)."""
    test_cfg = model.get("test_cfg")
    head: dict[str, Any] = model["bbox_head"] if isinstance(model.get("bbox_head"), dict) else {}
    if model.get("type") == "YOLACT" and isinstance(test_cfg, dict):
        # 2.x's YOLACTProtonet binarised masks at a fixed 0.5; 3.x reads both thresholds from test_cfg
        # (and fails at test time without them).
        for key in ("mask_thr", "mask_thr_binary"):
            if key not in test_cfg:
                test_cfg[key] = 0.5
        report.moved("YOLACT's fixed 0.5 mask threshold", "model.test_cfg.mask_thr / mask_thr_binary")
    if (
        model.get("type") == "PanopticFPN"
        and isinstance(test_cfg, dict)
        and isinstance(test_cfg.get("panoptic"), dict)
        and isinstance(test_cfg.get("rcnn"), dict)
    ):
        # 2.x's PanopticFPN ran its own NMS with test_cfg.panoptic (score_thr, nms, max_per_img) and
        # binarised masks with panoptic.mask_thr_binary, never reading test_cfg.rcnn; 3.x's runs the
        # RoI head with test_cfg.rcnn and hands binary masks to the fusion head.
        panoptic, rcnn = test_cfg["panoptic"], test_cfg["rcnn"]
        for key in ("score_thr", "nms", "max_per_img", "mask_thr_binary"):
            if key in panoptic:
                rcnn[key] = panoptic.pop(key)
                report.moved(f"model.test_cfg.panoptic.{key}", f"model.test_cfg.rcnn.{key}")
    if head.get("type") == "YOLOV3Head" and isinstance(test_cfg, dict) and test_cfg.get("nms_pre", -1) != -1:
        # 2.x's YOLOV3Head.get_bboxes never read nms_pre (only its ONNX export did); 3.x's keeps
        # only the top nms_pre (box, class) pairs before NMS. Every pair keeps 2.x's detections.
        # (-1 cannot say "all" there: filter_scores_and_topk would slice off the last pair.)
        test_cfg["nms_pre"] = _ALL_PAIRS
        report.note(
            f"model.test_cfg.nms_pre: 2.x's YOLOV3Head never read it; 3.x keeps only that many (box, class) "
            f"pairs before NMS, so it is set to {_ALL_PAIRS} (all of them) to give 2.x's detections"
        )
    if head.get("type") == "FCOSHead" and isinstance(model.get("train_cfg"), dict):
        # FCOSHead assigns its own targets and never read train_cfg, in 2.x or 3.x.
        model.pop("train_cfg")
        report.drop("model.train_cfg", "FCOSHead never reads it (2.x and 3.x)")


#: Detectors whose mask targets are cropped RoI by RoI from the image-sized masks: padding the
#: masks to the batch shape (2.x's Pad did) changes nothing, and 3.x's configs for them leave
#: pad_mask out (it copies every mask once more per image).
_MASKS_CROPPED_PER_ROI = frozenset({"HybridTaskCascade", "SCNet"})


#: 2.x components whose 3.x namesake computes another result (mmfix/_legacy_models/mmdet.py):
#: (where in the model, 2.x/3.x type) -> (mmfix's copy, what it keeps of 2.x's and 3.3.0 does not).
TWOX_COMPONENTS: dict[tuple[str, str], tuple[str, str]] = {
    ("roi_head.mask_iou_head", "MaskIoUHead"): (
        "MaskIoUHead2x",
        "2.x's scoring kept — boxes keep the classification score, masks are scored by it times the "
        "predicted mask IoU (pred_instances.mask_scores, which CocoMetric uses for segm); 3.3.0's own "
        "MaskIoUHead would write that product over the boxes' scores too",
    ),
    ("roi_head", "HybridTaskCascadeRoIHead"): (
        "HybridTaskCascadeRoIHead2x",
        "2.x's masks kept — each the mean of every stage's mask; 3.3.0's own HybridTaskCascadeRoIHead "
        "keeps only the last stage's at test time (its stage loop drops the others)",
    ),
}
_TWOX_MODULE = "mmfix._legacy_models.mmdet"


def _twox_components(model: dict[str, Any], out: dict[str, Any], report: Report) -> None:
    for (where, kind), (new, why) in TWOX_COMPONENTS.items():
        node: Any = model
        for key in where.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get("type") == kind:
            _engine.legacy_component(node, out, report, f"model.{where}", new, _TWOX_MODULE)
            report.note(f"{kind}: {why}")


def convert_model(src: dict[str, Any], out: dict[str, Any], report: Report, state: _State) -> None:
    model = src.pop("model", None)
    if model is None:
        return
    model = dict(model)
    # 1.x-era configs kept train_cfg/test_cfg at the top level; 2.x moved them into the model.
    for key in ("train_cfg", "test_cfg"):
        if key in src and isinstance(src[key], dict) and "type" not in src[key]:
            model.setdefault(key, src.pop(key))
            report.moved(key, f"model.{key}")
    _pretrained(model, report)
    _renamed_arguments(model, report)
    _mmdet_detr.convert(model, report)
    _mmdet_maskformer.convert(model, report)
    _twox_components(model, out, report)
    if "data_preprocessor" not in model:
        pre: dict[str, Any] = {"type": "DetDataPreprocessor"}
        norm = state.normalize
        if norm is not None:
            pre.update(norm)
        else:
            report.note("no Normalize in the 2.x pipeline: the data preprocessor does not normalise either")
        if state.pad_divisor is not None:
            pre["pad_size_divisor"] = state.pad_divisor
            pre.update(state.pad_values)
        if state.pad_mask and model.get("type") not in _MASKS_CROPPED_PER_ROI:
            pre["pad_mask"] = True
        elif state.pad_mask:
            report.note(
                f"{model.get('type')}: masks are not padded with the batch (pad_mask left out, as in "
                "3.x's own configs): its mask heads crop each RoI's target from the unpadded mask, so "
                "2.x's padding of the masks made no difference"
            )
        if state.pad_seg:
            pre["pad_seg"] = True
        if state.batch_pad is not None:
            # 2.x's Pad(size) padded the masks and the segmentation map with the image; 3.x's
            # BatchFixedSizePad pads the image only unless told (Mask2Former samples its mask
            # targets at image-relative points, so unpadded masks would not line up).
            batch_pad: dict[str, Any] = {"type": "BatchFixedSizePad", "size": state.batch_pad}
            if pre.get("pad_mask"):
                batch_pad["pad_mask"] = True
            if pre.get("pad_seg"):
                batch_pad["pad_seg"] = True
            pre["batch_augments"] = [batch_pad]
        if "input_size" in model and "random_size_range" in model:
            # 2.x YOLOX resized batches inside the detector.
            lo, hi = model.pop("random_size_range")
            interval = model.pop("random_size_interval", 10)
            model.pop("input_size")
            pre["batch_augments"] = [
                {
                    "type": "BatchSyncRandomResize",
                    "random_size_range": (lo * 32, hi * 32),
                    "size_divisor": 32,
                    "interval": interval,
                }
            ]
            report.moved("model.random_size_range", "model.data_preprocessor.batch_augments")
        model = {"type": model.pop("type"), "data_preprocessor": pre, **model}
        report.moved("pipeline Normalize/Pad", "model.data_preprocessor")
    train_cfg = model.get("train_cfg")
    head = (model.get("bbox_head") or {}).get("type") if isinstance(model.get("bbox_head"), dict) else None
    if (
        isinstance(train_cfg, dict)
        and "assigner" in train_cfg
        and "sampler" not in train_cfg
        and head in _PSEUDO_SAMPLER_HEADS
    ):
        # 2.x one-stage heads sampled with PseudoSampler implicitly; 3.x spells it out.
        train_cfg["sampler"] = {"type": "PseudoSampler"}
    # 2.x's BBoxL1Cost defaulted to box_format='xyxy' wherever it was used (3.x's DETRHead's own
    # default assigner says 'xywh', but a config's cost keeps the 2.x default).
    _match_costs(model.get("train_cfg"), "xyxy")
    if state.seg_scale_factor is not None:
        head = model.get("roi_head", {}).get("semantic_head")
        if isinstance(head, dict):
            head["seg_scale_factor"] = state.seg_scale_factor
    out["model"] = model


# ----------------------------------------------------------------------------- hooks
CUSTOM_HOOKS: dict[str, Any] = {
    "NumClassCheckHook": False,  # 3.x checks class numbers when it builds the dataset metainfo
    "ExpMomentumEMAHook": _engine.ema_hook,
    "LinearMomentumEMAHook": _engine.ema_hook,
    "MMDetWandbHook": False,
}
