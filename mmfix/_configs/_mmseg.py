"""MMSegmentation 0.x rules: data preprocessor, pipelines, datasets and dataloaders, evaluators.

MMSegmentation 1.x builds 0.x's segmentors as they are (same types and arguments), so what
changes is around the model: the 0.x pipeline did what ``SegDataPreProcessor`` does now
(``Normalize``, ``Pad`` to the crop size, ``to_rgb``) and what ``PackSegInputs`` does
(``DefaultFormatBundle``, ``Collect``, ``ImageToTensor``); the test pipeline loads the
annotations itself (0.x datasets read them for evaluation); ``Resize(img_scale, ratio_range)`` is
``RandomResize``; datasets take ``data_prefix``; ``evaluation.metric`` is an ``IoUMetric``.
Rows are as data (one per renamed type, transform or metric), read from MMSegmentation 0.30.0's and
1.2.2's code and the 0.x → 1.x migration guide (docs/en/migration/interface.md).
"""

from __future__ import annotations

import copy
from typing import Any

from .._errors import ConfigConversionError
from . import _engine, _transforms
from ._report import Report

#: 0.x dataset type -> (1.x type, keyword arguments that keep 0.x's class defaults).
DATASET_RENAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "CustomDataset": ("BaseSegDataset", {}),
    # 1.x has no face-occlusion dataset class: the generic one with 0.x's classes, palette, suffixes.
    "FaceOccludedDataset": (
        "BaseSegDataset",
        {
            "metainfo": {"classes": ("background", "face"), "palette": [[0, 0, 0], [128, 0, 0]]},
            "img_suffix": ".jpg",
            "seg_map_suffix": ".png",
        },
    ),
}
#: 0.x dataset classes that fixed ``reduce_zero_label=True`` (the others default to False).
REDUCE_ZERO_LABEL = frozenset(
    ("ADE20KDataset", "ISPRSDataset", "LoveDADataset", "PascalContextDataset59", "PotsdamDataset")
)
#: Dataset wrappers (MMEngine's in 1.x, the same arguments).
WRAPPERS = ("RepeatDataset", "ConcatDataset", "MultiImageMixDataset")
#: 0.x formatting transforms: one PackSegInputs in 1.x.
PACKING = ("DefaultFormatBundle", "Collect", "ImageToTensor", "ToTensor", "Transpose", "ToDataContainer")
#: 0.x ``evaluation.metric`` names that are IoUMetric's ``iou_metrics`` in 1.x.
TOOLBOX = "MMSegmentation"
SEPARATE_PARTS = " (metrics 0_mIoU, 1_mIoU, ...)"  # what 0.x reported for each part

IOU_METRICS = ("mIoU", "mDice", "mFscore")
#: 0.x ``evaluation`` keys with no effect on what is computed in 1.x.
EVALUATION_DROPPED = {
    "pre_eval": "1.x always evaluates image by image",
    "efficient_test": "1.x always evaluates image by image",
    "by_epoch": "train_cfg.val_interval counts what the loop counts",
    "gpu_collect": "1.x collects results on the CPU by default",
    "tmpdir": "1.x collects results on the CPU by default",
}


class _State:
    """What the pipelines told that the model section needs."""

    def __init__(self) -> None:
        self.normalize: dict[str, Any] | None = None
        self.pad: dict[str, Any] = {}  # train Pad -> size / size_divisor / pad_val / seg_pad_val
        self.test_pad: dict[str, Any] = {}  # test Pad -> the preprocessor's test_cfg
        self.tta: dict[str, Any] | None = None


# ----------------------------------------------------------------------------- pipelines
def _pad(t: dict[str, Any], state: _State, report: Report, *, test: bool, where: str) -> None:
    target = state.test_pad if test else state.pad
    if "size" in t and t["size"] is not None:
        target["size"] = tuple(t["size"])
    if t.get("size_divisor") is not None:
        target["size_divisor"] = t["size_divisor"]
    if not test:
        target["pad_val"] = t.get("pad_val", 0)
        target["seg_pad_val"] = t.get("seg_pad_val", 255)
    report.moved(
        f"{where}: Pad", "model.data_preprocessor" + (".test_cfg" if test else " (size, pad_val, seg_pad_val)")
    )


def _resize(t: dict[str, Any], report: Report, where: str) -> dict[str, Any] | None:
    if t.get("min_size") is not None:
        raise ConfigConversionError(
            f"{where}: Resize.min_size",
            t["min_size"],
            "MMSegmentation 1.x's Resize has no minimum short edge. Remove min_size and give the "
            "scale it should reach (Resize(img_scale=(long, short))), or resize in a custom transform.",
        )
    t.pop("min_size", None)
    if t.get("img_scale") is None and t.get("ratio_range") is not None:
        raise ConfigConversionError(
            f"{where}: Resize.ratio_range",
            t["ratio_range"],
            "without img_scale, 0.x scaled each image's own size by a random ratio; MMSegmentation "
            "1.x's RandomResize needs a scale. Give img_scale (the scale the ratio multiplies).",
        )
    return _transforms.resize(t, report)


def _flip(t: dict[str, Any]) -> dict[str, Any] | None:
    prob = t.pop("prob", t.pop("flip_ratio", None))
    if prob is None:
        return None  # 0.x: no prob means the flip was MultiScaleFlipAug's to decide
    out = {"type": "RandomFlip", "prob": prob}
    if "direction" in t:
        out["direction"] = t["direction"]
    return out


def _transform(t: dict[str, Any], report: Report, state: _State, *, test: bool, where: str) -> dict[str, Any] | None:
    kind = t.get("type")
    if kind == "Normalize":
        state.normalize = {"mean": list(t["mean"]), "std": list(t["std"]), "bgr_to_rgb": bool(t.get("to_rgb", True))}
        report.moved(f"{where}: Normalize", "model.data_preprocessor (mean, std, bgr_to_rgb)")
        return None
    if kind == "Pad":
        _pad(t, state, report, test=test, where=where)
        return None
    if kind in PACKING:
        if kind == "Collect":
            if t.get("meta_keys") is not None:
                report.drop(f"{where}: Collect.meta_keys", "PackSegInputs packs 1.x's meta keys (img_path, ...)")
            report.moved(f"{where}: DefaultFormatBundle/Collect/ImageToTensor", "PackSegInputs")
            return {"type": "PackSegInputs"}
        return None
    if kind == "Resize":
        return _resize(t, report, where)
    if kind == "RandomFlip":
        return _flip(t)
    if kind in ("LoadImageFromFile", "LoadAnnotations"):
        _transforms.backend(t)
        if kind == "LoadAnnotations":
            t["reduce_zero_label"] = bool(t.get("reduce_zero_label", False))  # 0.x's default; 1.x's is the dataset's
        return t
    # Same name and arguments in 1.x: RandomCrop, PhotoMetricDistortion, RandomRotate, RGB2Gray,
    # AdjustGamma, CLAHE, Rerange, SegRescale, RandomCutOut, RandomMosaic, ResizeToMultiple.
    return t


def _flip_aug(
    t: dict[str, Any], report: Report, state: _State, where: str, annotations: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """0.x MultiScaleFlipAug -> one test resize (+ the annotations, loaded after it) + PackSegInputs;
    several scales or a flip also become the tta_pipeline (1.x tests with them only with --tta)."""
    img_scale, ratios = t.get("img_scale"), t.get("img_ratios")
    ratio_list = [float(r) for r in (ratios if isinstance(ratios, (list, tuple)) else [ratios])] if ratios else [1.0]
    if isinstance(img_scale, list):
        ratio_list = [1.0]  # 0.x applied img_ratios only to one img_scale given as a tuple (or to none)
    scales = img_scale if isinstance(img_scale, list) else [img_scale] if img_scale is not None else []
    # 0.x flipped through the RandomFlip among the transforms: without one, `flip` did nothing
    flip = bool(t.get("flip", False)) and any(x.get("type") == "RandomFlip" for x in t.get("transforms", []))
    directions = t.get("flip_direction", "horizontal")
    directions = list(directions) if isinstance(directions, (list, tuple)) else [directions]
    out: list[dict[str, Any]] = []
    inner: list[dict[str, Any]] = []
    keep_ratio = True
    for x in copy.deepcopy(t.get("transforms", [])):
        if x.get("type") == "Resize":
            if x.get("min_size") is not None:
                report.differs(
                    f"{where}: MultiScaleFlipAug's Resize(min_size={x['min_size']}) kept every test scale's short "
                    "edge at least that long; MMSegmentation 1.x's Resize has no such bound: scales below it "
                    "are used as they are"
                )
            keep_ratio = bool(x.get("keep_ratio", True))
            continue
        if x.get("type") == "RandomFlip":
            continue  # inside MultiScaleFlipAug, 0.x flipped by the wrapper's `flip` only
        c = _transform(x, report, state, test=True, where=where)
        if c is not None and c.get("type") != "PackSegInputs":
            out.append(c)
            inner.append(c)
    if len(scales) > 1:
        raise ConfigConversionError(
            f"{where}: MultiScaleFlipAug.img_scale",
            img_scale,
            "0.x tested each image at several fixed scales; MMSegmentation 1.x tests at one scale (and with "
            "--tta, at ratios of one). Give one img_scale with img_ratios.",
        )
    first = 1.0 if 1.0 in ratio_list else ratio_list[0]  # the plain test pipeline's scale
    if scales:
        base = tuple(scales[0])
        scale = base if first == 1.0 else tuple(int(s * first) for s in base)  # 0.x: int(edge * ratio)
        out.insert(0, {"type": "Resize", "scale": scale, "keep_ratio": keep_ratio})
    elif first != 1.0:
        out.insert(0, {"type": "Resize", "scale_factor": first, "keep_ratio": keep_ratio})
    if annotations is not None:
        out.append(copy.deepcopy(annotations))  # after the resize: evaluation compares at the original size
    out.append({"type": "PackSegInputs"})
    if len(ratio_list) > 1 or flip:
        state.tta = {
            "scale": tuple(scales[0]) if scales else None,
            "ratios": ratio_list,
            "flip": flip,
            "directions": directions,
            "inner": inner,
            "keep_ratio": keep_ratio,
        }
        report.differs(
            f"{where}: 0.x tested with test-time augmentation (ratios {ratio_list}, flip={flip}); MMSegmentation "
            "1.x runs it only with `tools/test.py --tta`: tta_model and tta_pipeline are written for it, and "
            "the plain test pipeline uses the ratio-1 scale without flip"
        )
    report.moved(f"{where}: MultiScaleFlipAug", "Resize + LoadAnnotations + PackSegInputs")
    return out


def convert_pipeline(
    pipeline: list[dict[str, Any]],
    report: Report,
    state: _State,
    *,
    test: bool,
    where: str,
    annotations: dict[str, Any] | None = None,
    pack: bool = True,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    packed = not pack  # a MultiImageMixDataset's inner set: its wrapper's pipeline packs
    for t in copy.deepcopy(list(pipeline)):
        if test and annotations is not None and t.get("type") == "LoadAnnotations":
            # 0.x evaluated against its dataset's own loader, at the original size: the annotations are
            # loaded after every geometric step (below), as 1.x's test pipelines do.
            report.moved(
                f"{where}: LoadAnnotations", "after the test resize (0.x's dataset loaded them for evaluation)"
            )
            continue
        if t.get("type") == "MultiScaleFlipAug":
            out.extend(_flip_aug(t, report, state, where, annotations))
            packed = True
            continue
        converted = _transform(t, report, state, test=test, where=where)
        if converted is None:
            continue
        if converted.get("type") == "PackSegInputs":
            if packed:
                continue
            packed = True
        out.append(converted)
    if test and pack and annotations is not None and not any(t.get("type") == "LoadAnnotations" for t in out):
        # A test pipeline without MultiScaleFlipAug: the annotations go before the packing.
        at = next((i for i, t in enumerate(out) if t.get("type") == "PackSegInputs"), len(out))
        out.insert(at, copy.deepcopy(annotations))
    if not packed:
        out.append({"type": "PackSegInputs"})
    return out


def _tta(out: dict[str, Any], tta: dict[str, Any], load: dict[str, Any], annotations: dict[str, Any] | None) -> None:
    out["tta_model"] = {"type": "SegTTAModel"}
    if tta["scale"] is not None:
        resizes = [
            {"type": "Resize", "scale": tuple(int(s * r) for s in tta["scale"]), "keep_ratio": tta["keep_ratio"]}
            for r in tta["ratios"]
        ]
    else:
        resizes = [{"type": "Resize", "scale_factor": r, "keep_ratio": tta["keep_ratio"]} for r in tta["ratios"]]
    flips = [{"type": "RandomFlip", "prob": 0.0, "direction": "horizontal"}]
    if tta["flip"]:
        flips += [{"type": "RandomFlip", "prob": 1.0, "direction": d} for d in tta["directions"]]
    steps: list[list[dict[str, Any]]] = [resizes, flips]
    steps += [[copy.deepcopy(x)] for x in tta["inner"]]
    if annotations is not None:
        steps.append([copy.deepcopy(annotations)])
    steps.append([{"type": "PackSegInputs"}])
    out["tta_pipeline"] = [copy.deepcopy(load), {"type": "TestTimeAug", "transforms": steps}]


# ----------------------------------------------------------------------------- datasets
def _reduce_zero_label(ds: dict[str, Any]) -> bool:
    """What 0.x's dataset used (its class fixed it, or the config's argument)."""
    if "reduce_zero_label" in ds:
        return bool(ds["reduce_zero_label"])
    return ds.get("type") in REDUCE_ZERO_LABEL


def _split_lists(ds: dict[str, Any], where: str, report: Report) -> dict[str, Any] | None:
    """0.x made a ConcatDataset of a dataset whose img_dir / ann_dir / split is a list (build_dataset)."""
    lists = {k: ds[k] for k in ("img_dir", "ann_dir", "split") if isinstance(ds.get(k), (list, tuple))}
    if not lists:
        return None
    lengths = {len(v) for v in lists.values()}
    count = max(lengths)
    if len(lengths) > 1 and not (lengths == {1, count}):
        raise ConfigConversionError(
            f"{where}: {', '.join(lists)}",
            lists,
            "0.x paired these lists item by item and needs them equally long (or the directories single).",
        )
    parts = []
    for i in range(count):
        part = dict(ds)
        for key, values in lists.items():
            part[key] = values[i] if len(values) == count else values[0]
        parts.append(part)
    report.moved(f"{where}: list of {'/'.join(lists)}", "ConcatDataset of one dataset per item (as 0.x built it)")
    return {"type": "ConcatDataset", "datasets": parts}


def _dataset(
    ds: dict[str, Any], report: Report, state: _State, *, test: bool, where: str, pack: bool = True
) -> dict[str, Any]:
    ds = dict(ds)
    kind = ds.get("type")
    if kind in WRAPPERS:
        if kind == "ConcatDataset":
            _engine.separate_eval(ds, where, test, report, TOOLBOX, SEPARATE_PARTS)
        inner_pack = kind != "MultiImageMixDataset"  # the mixing wrapper's own pipeline packs
        if "dataset" in ds:
            ds["dataset"] = _dataset(ds["dataset"], report, state, test=test, where=where, pack=inner_pack)
        if "datasets" in ds:
            ds["datasets"] = [
                _dataset(d, report, state, test=test, where=where, pack=inner_pack) for d in ds["datasets"]
            ]
        if kind == "MultiImageMixDataset" and isinstance(ds.get("pipeline"), list):
            ds["pipeline"] = convert_pipeline(ds["pipeline"], report, state, test=test, where=f"{where}.pipeline")
        return ds
    split = _split_lists(ds, where, report)
    if split is not None:
        _engine.separate_eval(dict(ds), where, test, report, TOOLBOX, SEPARATE_PARTS)
        split["separate_eval"] = False  # checked just now
        return _dataset(split, report, state, test=test, where=where, pack=pack)
    ds.pop("separate_eval", None)
    if isinstance(ds.get("classes"), str):
        raise ConfigConversionError(
            f"{where}.classes",
            ds["classes"],
            "0.x read the class names from this file; MMSegmentation 1.x takes them in the config: write "
            "them as classes=('name1', 'name2', ...).",
        )
    reduce = _reduce_zero_label(ds)
    loader_cfg = ds.get("gt_seg_map_loader_cfg")
    if test and isinstance(loader_cfg, dict) and "reduce_zero_label" in loader_cfg:
        # 0.x evaluated with this loader (its flag, not the dataset's); 1.x's test set and its
        # LoadAnnotations must agree, so the set takes the loader's value.
        reduce = bool(loader_cfg["reduce_zero_label"])
        ds["reduce_zero_label"] = reduce
    new_type, defaults = DATASET_RENAMES.get(str(kind), (kind, {}))
    out: dict[str, Any] = {"type": new_type, **copy.deepcopy(defaults)}
    if new_type != kind:
        report.moved(f"{where}.type {kind}", str(new_type))
    prefix: dict[str, Any] = {}
    has_annotations = ds.get("ann_dir") is not None
    for key, value in ds.items():
        if key in ("type", "pipeline", "samples_per_gpu", "workers_per_gpu", "gt_seg_map_loader_cfg"):
            continue
        if key == "img_dir":
            prefix["img_path"] = value
        elif key == "ann_dir":
            if value is not None:
                prefix["seg_map_path"] = value
        elif key == "split":
            if value is not None:
                out["ann_file"] = value
                report.moved(f"{where}.split", f"{where}.ann_file")
        elif key in ("classes", "palette"):
            if value is not None:
                out.setdefault("metainfo", {})[key] = value
                report.moved(f"{where}.{key}", f"{where}.metainfo.{key}")
        elif key == "file_client_args":
            if value and value.get("backend", "disk") != "disk":
                out["backend_args"] = value
        else:
            out[key] = value  # data_root, img_suffix, seg_map_suffix, ignore_index, test_mode, reduce_zero_label
    if prefix:
        out["data_prefix"] = prefix
        report.moved(f"{where}.img_dir/ann_dir", f"{where}.data_prefix (img_path, seg_map_path)")
    annotations = None
    if test and has_annotations:
        # 0.x's dataset loaded the maps for evaluation (gt_seg_map_loader_cfg); 1.x's test pipeline does.
        loader = dict(ds.get("gt_seg_map_loader_cfg") or {})
        loader.pop("reduce_zero_label", None)
        annotations = {"type": "LoadAnnotations", "reduce_zero_label": reduce, **loader}
        _transforms.backend(annotations)
    pipeline = ds.get("pipeline")
    if isinstance(pipeline, list):
        out["pipeline"] = convert_pipeline(
            pipeline, report, state, test=test, where=f"{where}.pipeline", annotations=annotations, pack=pack
        )
        loads = [t for t in out["pipeline"] if t.get("type") == "LoadAnnotations"]
        if not test and loads and loads[0]["reduce_zero_label"] != reduce:
            # 1.x's LoadAnnotations checks that it reduces as its dataset does; 0.x's training did what
            # the pipeline said, so the training dataset says the same.
            out["reduce_zero_label"] = reduce = loads[0]["reduce_zero_label"]
            report.note(
                f"{where}: reduce_zero_label={reduce} set on the dataset, as its LoadAnnotations says "
                "(1.x checks that the two agree)"
            )
        for load in loads:
            if not load["reduce_zero_label"] and not reduce:
                del load["reduce_zero_label"]  # 1.x's None: the dataset's (False), as the 1.x configs write it
    return out


def _loader_pipeline(ds: dict[str, Any]) -> list[dict[str, Any]]:
    return list(_engine.innermost(ds, WRAPPERS).get("pipeline") or [])


def convert_data(src: dict[str, Any], out: dict[str, Any], report: Report, loop: _engine.Loop) -> _State:
    state = _State()
    data = src.pop("data", None)
    evaluation = src.pop("evaluation", None)
    if data is None:
        if evaluation is not None:
            _evaluators(evaluation, out, report, loop)
        return state
    data = dict(data)
    batch = data.pop("samples_per_gpu", 2)
    workers = data.pop("workers_per_gpu", 2)
    report.moved("data.samples_per_gpu", "train_dataloader.batch_size")
    report.moved("data.workers_per_gpu", "*_dataloader.num_workers")
    overrides = {name: dict(data.pop(f"{name}_dataloader", {}) or {}) for name in ("train", "val", "test")}
    persistent = data.pop("persistent_workers", None)
    for name in ("train", "val", "test"):
        if name not in data:
            continue
        raw = data.pop(name)
        test = name != "train"
        if isinstance(raw, list):  # 0.x: a list of datasets is their concatenation
            raw = {"type": "ConcatDataset", "datasets": raw}
        dataset = _dataset(raw, report, state, test=test, where=f"data.{name}")
        over = overrides[name]
        size = over.pop("samples_per_gpu", batch if name == "train" else 1)  # 0.x tested one image per GPU
        nwork = over.pop("workers_per_gpu", workers)
        extra: dict[str, Any] = {}
        if not test and not loop.by_epoch:
            extra["sampler"] = {"type": "InfiniteSampler", "shuffle": True}
        loader = _engine.dataloader(size, nwork, not test, dataset, **extra)
        if not test and loop.by_epoch:
            loader["drop_last"] = True  # 0.x's train_segmentor dropped the last incomplete batch
        if persistent is not None:
            loader["persistent_workers"] = bool(persistent) and nwork > 0
        _engine.loader_options(loader, over, f"data.{name}_dataloader", report)
        out[f"{name}_dataloader"] = loader
        report.moved(f"data.{name}", f"{name}_dataloader.dataset")
        if test and state.tta is not None and "tta_pipeline" not in out:
            pipeline = _loader_pipeline(dataset)
            load = next((t for t in pipeline if t.get("type") == "LoadImageFromFile"), {"type": "LoadImageFromFile"})
            annotations = next((t for t in pipeline if t.get("type") == "LoadAnnotations"), None)
            _tta(out, state.tta, load, annotations)
    for key in data:
        report.drop(f"data.{key}", "no 1.x dataloader equivalent")
    if "val_dataloader" in out and "test_dataloader" not in out:
        out["test_dataloader"] = copy.deepcopy(out["val_dataloader"])
    if "val_dataloader" in out or evaluation is not None:
        _evaluators(evaluation, out, report, loop)
        evaluated = out.get("val_dataloader") or out.get("test_dataloader")
        ignore = _engine.innermost(evaluated["dataset"], WRAPPERS).get("ignore_index", 255) if evaluated else 255
        if ignore != 255:  # 0.x's evaluation used its dataset's ignore_index; 1.x's IoUMetric has its own
            for name in ("val_evaluator", "test_evaluator"):
                out[name]["ignore_index"] = ignore
            report.note(f"val_evaluator / test_evaluator: ignore_index={ignore}, the dataset's (as 0.x evaluated)")
    return state


def _evaluators(evaluation: dict[str, Any] | None, out: dict[str, Any], report: Report, loop: _engine.Loop) -> None:
    """0.x ``evaluation`` (EvalHook's arguments) -> val/test IoUMetric, val_interval, save_best."""
    evaluation = dict(evaluation or {})
    metrics = evaluation.pop("metric", "mIoU")  # 0.x EvalHook's default
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    unknown = [m for m in names if m not in IOU_METRICS]
    if unknown:
        raise ConfigConversionError(
            "evaluation.metric",
            metrics,
            f"MMSegmentation 1.x's IoUMetric computes {', '.join(IOU_METRICS)}; for 'cityscapes' (the "
            "official Cityscapes evaluation) set val_evaluator=dict(type='CityscapesMetric', output_dir=...) "
            "in a 1.x config instead.",
        )
    metric = {"type": "IoUMetric", "iou_metrics": names}
    out["val_evaluator"] = metric
    out["test_evaluator"] = copy.deepcopy(metric)
    report.moved("evaluation.metric", "val_evaluator / test_evaluator (IoUMetric)")
    _engine.evaluation_schedule(
        evaluation,
        out,
        report,
        EVALUATION_DROPPED,
        "MMSegmentation 1.x's evaluation takes interval (train_cfg.val_interval), metric (IoUMetric), "
        "save_best and rule",
    )


# ----------------------------------------------------------------------------- model
#: Arguments 1.x added to a 0.x class with a default that changes what 0.x computed: type -> the
#: arguments that keep 0.x's behaviour (found by comparing every registered class's signature).
ZEROX_ARGUMENTS: dict[str, dict[str, Any]] = {
    "VisionTransformer": {"patch_bias": True},  # 0.x's patch embedding convolution had a bias
}
#: 0.x components whose 1.x namesake computes something else: type -> (mmfix's copy, its module).
ZEROX_COMPONENTS: dict[str, tuple[str, str]] = {
    "DiceLoss": ("DiceLoss0x", "mmfix._legacy_models.mmseg"),
}


def _zerox_components(node: Any, out: dict[str, Any], report: Report, where: str = "model") -> None:
    if isinstance(node, dict):
        kind = node.get("type")
        if isinstance(kind, str) and kind in ZEROX_ARGUMENTS:
            for key, value in ZEROX_ARGUMENTS[kind].items():
                if key not in node:
                    node[key] = value
                    report.note(f"{where}: {kind}.{key}={value!r} set (0.x's behaviour; 1.x's default differs)")
        if isinstance(kind, str) and kind in ZEROX_COMPONENTS:
            _engine.legacy_component(node, out, report, where, *ZEROX_COMPONENTS[kind])
        for key, value in node.items():
            _zerox_components(value, out, report, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _zerox_components(value, out, report, f"{where}[{index}]")


def convert_model(src: dict[str, Any], out: dict[str, Any], report: Report, state: _State) -> None:
    model = src.pop("model", None)
    if model is None:
        return
    model = dict(model)
    _zerox_components(model, out, report)
    pre: dict[str, Any] = {"type": "SegDataPreProcessor"}
    if state.normalize is not None:
        pre.update(state.normalize)
    pad = state.pad
    if "size" in pad:
        pre["size"] = pad["size"]
    if "size_divisor" in pad:
        pre["size_divisor"] = pad["size_divisor"]
    pre["pad_val"] = pad.get("pad_val", 0)
    pre["seg_pad_val"] = pad.get("seg_pad_val", 255)
    if state.test_pad:
        pre["test_cfg"] = dict(state.test_pad)
    given = model.pop("data_preprocessor", None)
    if isinstance(given, dict):
        pre.update(given)
    model["data_preprocessor"] = pre
    report.moved("img_norm_cfg / Normalize / Pad", "model.data_preprocessor (SegDataPreProcessor)")
    out["model"] = model


def rules(src: dict[str, Any], out: dict[str, Any], report: Report) -> None:
    """MMSegmentation 0.x's sections of ``src`` (a private plain copy) into ``out`` (1.x keys)."""
    if src.get("runner") is None:
        # 0.x's train_segmentor: no runner means IterBasedRunner(max_iters=total_iters)
        if "total_iters" not in src:
            raise ConfigConversionError(
                "runner",
                None,
                "MMSegmentation 0.x trained with IterBasedRunner(max_iters=total_iters) when no runner was "
                "set, and this config sets neither; add runner=dict(type='IterBasedRunner', max_iters=N).",
            )
        src["runner"] = {"type": "IterBasedRunner", "max_iters": src.pop("total_iters")}
        report.moved("total_iters", "train_cfg.max_iters (IterBasedTrainLoop)")
    elif "total_iters" in src:
        report.drop("total_iters", "`runner` is set and wins, as in 0.x")
        src.pop("total_iters")
    loop = _engine.convert_runner(src, out, report)
    base_lr = (src.get("optimizer") or {}).get("lr")
    _engine.convert_optimizer(src, out, report)
    _engine.convert_lr_config(src, out, report, loop, base_lr)
    _engine.convert_runtime(src, out, report, loop, "SegLocalVisualizer", "SegVisualizationHook")
    if not loop.by_epoch:
        out["default_hooks"]["logger"]["log_metric_by_epoch"] = False  # 0.x logged by iteration
    state = convert_data(src, out, report, loop)
    for name in ("val", "test"):
        if f"{name}_dataloader" not in out:  # a training-only config (0.x ran it with --no-validate)
            out.pop(f"{name}_cfg", None)
            out.pop(f"{name}_evaluator", None)
    for name in ("train_pipeline", "test_pipeline", "val_pipeline"):
        if isinstance(src.get(name), list):
            out[name] = convert_pipeline(src.pop(name), Report(), _State(), test=name != "train_pipeline", where=name)
    if "test_dataloader" in out:
        # 0.x's APIs (inference_segmentor) read data.test.pipeline, 1.x's (inference_model) read the
        # top-level test_pipeline: it is the test set's, so that both mean the same steps.
        out["test_pipeline"] = copy.deepcopy(_loader_pipeline(out["test_dataloader"]["dataset"]))
    if src.pop("img_norm_cfg", None) is not None:
        report.drop("img_norm_cfg", "now model.data_preprocessor's mean/std/bgr_to_rgb")
    convert_model(src, out, report, state)
    _engine.convert_custom_hooks(src, out, report, {})
