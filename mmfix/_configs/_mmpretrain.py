"""MMClassification 0.x rules (→ MMPretrain 1.x): data preprocessor, pipelines, datasets, evaluators,
batch augments and the few model arguments whose meaning moved.

MMPretrain 1.x builds most 0.x classifiers as they are (same types and arguments). What changes is
around the model: the 0.x pipeline normalised and packed (``Normalize``, ``ImageToTensor``,
``ToTensor``, ``Collect``), which ``ClsDataPreprocessor`` and ``PackInputs`` do now; several
transforms renamed their arguments or changed their defaults (``RandomResizedCrop(size, scale,
ratio)`` → ``(scale, crop_ratio_range, aspect_ratio_range)``, ``Resize(size=(256, -1))`` →
``ResizeEdge``, ``RandomFlip(flip_prob)`` → ``prob``; ``RandAugment``'s ``total_level`` 30 → 10,
``Lighting``'s ``to_rgb`` True → False); the data sets with a fixed layout take ``data_root`` and
``split``; ``evaluation.metric`` is an ``Accuracy`` / ``SingleLabelMetric`` / ``AveragePrecision``
/ ``MultiLabelMetric``; ``model.train_cfg.augments``' ``BatchMixup`` & co. are ``Mixup`` & co.
with their probabilities on ``train_cfg``. Rows are as data, read from MMClassification 0.25.0's
and MMPretrain 1.2.0's code (every registered class's signature compared) and MMPretrain's
migration guide (docs/en/migration.md).
"""

from __future__ import annotations

import copy
import math
import os
from typing import Any

from .._errors import ConfigConversionError
from . import _engine, _transforms
from ._report import Report

#: 0.x formatting transforms: PackInputs (Collect) or nothing (the tensors are PackInputs' job).
PACKING = ("ImageToTensor", "ToTensor", "Transpose", "ToDataContainer", "Collect", "DefaultFormatBundle")
#: 0.x batch augments (``model.train_cfg.augments``) -> (1.x type, the arguments it keeps).
BATCH_AUGMENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "BatchMixup": ("Mixup", ("alpha",)),
    "BatchCutMix": ("CutMix", ("alpha", "cutmix_minmax", "correct_lam")),
    "BatchResizeMix": ("ResizeMix", ("alpha", "lam_min", "lam_max", "interpolation")),
}
#: Transform arguments whose 1.x default differs from 0.x's: type -> {argument: 0.x default}.
TRANSFORM_DEFAULTS: dict[str, dict[str, Any]] = {
    "RandAugment": {"total_level": 30},  # 1.x: 10 (the magnitudes mean other strengths)
    "Lighting": {"to_rgb": True},  # 1.x: False
    "ColorJitter": {"backend": "cv2"},  # 0.x adjusted through mmcv's cv2 functions; 1.x: pillow
}
#: Data sets with a fixed layout under one folder: 0.x's data_prefix is 1.x's data_root, and
#: 0.x's test_mode chose the split.
SPLIT_DATASETS = ("CIFAR10", "CIFAR100", "MNIST", "FashionMNIST", "StanfordCars")
#: Dataset wrappers (1.x: MMEngine's or MMPretrain's, the same arguments).
WRAPPERS = ("RepeatDataset", "ClassBalancedDataset", "ConcatDataset", "KFoldDataset")
#: 0.x single-label metric names -> SingleLabelMetric items.
SINGLE_LABEL_ITEMS = {"precision": "precision", "recall": "recall", "f1_score": "f1-score", "support": "support"}
#: 0.x multi-label metric names -> (average, item); 'mAP' is AveragePrecision.
MULTI_LABEL_ITEMS = {
    "CP": ("macro", "precision"),
    "CR": ("macro", "recall"),
    "CF1": ("macro", "f1-score"),
    "OP": ("micro", "precision"),
    "OR": ("micro", "recall"),
    "OF1": ("micro", "f1-score"),
}
#: 0.x ``evaluation`` keys with no effect on what is computed in 1.x.
EVALUATION_DROPPED = {
    "by_epoch": "train_cfg.val_interval counts what the loop counts",
    "gpu_collect": "1.x collects results on the CPU by default",
    "tmpdir": "1.x collects results on the CPU by default",
    "start": "1.x validates from the first interval",
}
#: Arguments whose 1.x default changes what a 0.x model computed or how it started: type -> the
#: 0.x values (found by comparing every registered class's signature).
ZEROX_ARGUMENTS: dict[str, dict[str, Any]] = {
    "ConformerHead": {"init_cfg": {"type": "Normal", "layer": "Linear", "std": 0.01}},  # 1.x: TruncNormal 0.02
    "ConvNeXt": {"init_cfg": None},  # 0.x: PyTorch's own initialisation; 1.x: TruncNormal / Constant
}
#: 0.x components whose 1.x namesake computes something else: type -> (mmfix's copy, its module).
ZEROX_COMPONENTS: dict[str, tuple[str, str]] = {
    # 1.2's MultiheadAttention ignores the qk_scale T2T-ViT's tokens-to-token layers give it
    "T2T_ViT": ("T2T_ViT0x", "mmfix._legacy_models.mmpretrain"),
}
#: 0.x architecture names 1.x dropped: type -> {0.x arch: 1.x arch (its name, or the settings the
#: 0.x name stood for)}; every other arch_zoo / arch_settings entry of 0.25 is in 1.2 unchanged.
ARCH_RENAMES: dict[str, dict[str, Any]] = {
    "VAN": {
        "b0": "tiny",
        "b1": "small",
        "b2": "base",
        "b3": "large",
        "b4": {"embed_dims": [64, 128, 320, 512], "depths": [3, 6, 40, 3], "ffn_ratios": [8, 8, 4, 4]},
        "b5": {"embed_dims": [96, 192, 480, 768], "depths": [3, 3, 24, 3], "ffn_ratios": [8, 8, 4, 4]},
        "b6": {"embed_dims": [96, 192, 384, 768], "depths": [6, 6, 90, 6], "ffn_ratios": [8, 8, 4, 4]},
    },
}
#: Backbones whose 0.x ``output_cls_token`` is 1.x's ``out_type``.
CLS_TOKEN_BACKBONES = ("VisionTransformer", "DistilledVisionTransformer", "T2T_ViT", "T2T_ViT0x", "DeiT3")


class _State:
    """What the pipelines and data sets told that the model and the evaluators need."""

    def __init__(self) -> None:
        self.normalize: dict[str, Any] | None = None
        self.multi_label = False
        self.voc: dict[str, Any] | None = None  # a VOC set: its difficult_as_positive


# ----------------------------------------------------------------------------- pipelines
def _size_hw(value: Any) -> Any:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _resize(t: dict[str, Any], report: Report, where: str) -> dict[str, Any]:
    size = t.pop("size")
    side = t.pop("adaptive_side", "short")
    extra: dict[str, Any] = {k: t.pop(k) for k in ("interpolation", "backend") if k in t}
    if isinstance(size, int):
        return {"type": "Resize", "scale": size, **extra}  # MMCV: an int is (size, size)
    height, width = size
    if width == -1:
        report.moved(f"{where}: Resize(size=({height}, -1))", f"ResizeEdge(scale={height}, edge={side!r})")
        return {"type": "ResizeEdge", "scale": height, "edge": side, **extra}
    return {"type": "Resize", "scale": (width, height), **extra}  # 0.x (h, w); MMCV's scale is (w, h)


def _random_resized_crop(t: dict[str, Any]) -> dict[str, Any]:
    efficientnet = t.pop("efficientnet_style", False)
    out: dict[str, Any] = {"type": "EfficientNetRandomCrop" if efficientnet else "RandomResizedCrop"}
    out["scale"] = _size_hw(t.pop("size"))  # (h, w) in both
    if "scale" in t:
        out["crop_ratio_range"] = tuple(t.pop("scale"))
    if "ratio" in t:
        out["aspect_ratio_range"] = tuple(t.pop("ratio"))
    out["interpolation"] = t.pop("interpolation", "bilinear")  # EfficientNetRandomCrop's 1.x default: bicubic
    for key in ("max_attempts", "backend") + (("min_covered", "crop_padding") if efficientnet else ()):
        if key in t:
            out[key] = t.pop(key)
    return out


def _center_crop(t: dict[str, Any]) -> dict[str, Any]:
    size = t.pop("crop_size")
    if t.pop("efficientnet_style", False):
        out = {"type": "EfficientNetCenterCrop", "crop_size": size, "interpolation": t.pop("interpolation", "bilinear")}
        for key in ("crop_padding", "backend"):
            if key in t:
                out[key] = t.pop(key)
        return out
    # 0.x crop_size (h, w); MMCV's CenterCrop takes (w, h). Neither pads a smaller image.
    return {"type": "CenterCrop", "crop_size": tuple(size[::-1]) if isinstance(size, (list, tuple)) else size}


def _transform(t: dict[str, Any], report: Report, state: _State, where: str) -> dict[str, Any] | None:
    kind = t.get("type")
    if kind == "Normalize":
        state.normalize = {"mean": list(t["mean"]), "std": list(t["std"]), "to_rgb": bool(t.get("to_rgb", True))}
        report.moved(f"{where}: Normalize", "model.data_preprocessor (mean, std, to_rgb)")
        return None
    if kind in PACKING:
        if kind != "Collect":
            return None
        if t.get("meta_keys") is not None:
            report.drop(f"{where}: Collect.meta_keys", "PackInputs packs 1.x's meta keys (img_path, ...)")
        report.moved(f"{where}: ImageToTensor/ToTensor/Collect", "PackInputs")
        return {"type": "PackInputs"}
    if kind == "ToHalf":
        raise ConfigConversionError(
            f"{where}: ToHalf",
            "(set)",
            "It is one of MMClassification 0.x's Graphcore IPU configs; MMPretrain 1.x has no IPU runner. "
            "Train the same model from the config without '-ipu' in its name (or drop ToHalf and the ipu_* "
            "keys and train on a GPU).",
        )
    t = dict(t)
    if kind == "LoadImageFromFile":
        _transforms.backend(t)
        return t
    if kind == "RandomResizedCrop":
        return _random_resized_crop(t)
    if kind == "CenterCrop":
        return _center_crop(t)
    if kind == "Resize":
        return _resize(t, report, where)
    if kind == "RandomFlip":
        out = {"type": "RandomFlip", "prob": t.pop("flip_prob", 0.5)}
        if "direction" in t:
            out["direction"] = t["direction"]
        return out
    if kind == "RandomCrop":
        t["crop_size"] = _size_hw(t.pop("size"))
        return t
    if kind == "RandomGrayscale":
        # 0.x kept three channels (gray copied to each); 1.x keeps them only when asked
        return {"type": "RandomGrayscale", "prob": t.pop("gray_prob", 0.1), "keep_channels": True}
    if kind == "Pad":
        if t.get("size") is not None:
            t["size"] = tuple(t["size"][::-1])  # 0.x (h, w); MMCV's Pad takes (w, h)
        t.setdefault("pad_val", 0)  # MMCV's default is a dict with 255 for segmentation maps
        return t
    if kind == "Albu":
        t["type"] = "Albumentations"
        t.pop("update_pad_shape", None)
        return t
    for key, value in TRANSFORM_DEFAULTS.get(str(kind), {}).items():
        if key not in t:
            t[key] = value
            report.note(f"{where}: {kind}.{key}={value!r} set (0.x's default; 1.x's differs)")
    # Same name and arguments in 1.x: AutoAugment and its policies, RandomErasing, Lighting,
    # ColorJitter, RandAugment (with the defaults above), ...
    return t


def convert_pipeline(
    pipeline: list[dict[str, Any]], report: Report, state: _State, *, where: str
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    packed = False
    for t in copy.deepcopy(list(pipeline)):
        converted = _transform(t, report, state, where)
        if converted is None:
            continue
        if converted.get("type") == "PackInputs":
            if packed:
                continue
            packed = True
        out.append(converted)
    if not packed:
        out.append({"type": "PackInputs"})
    return out


# ----------------------------------------------------------------------------- datasets
def _split_dataset(ds: dict[str, Any], out: dict[str, Any], where: str, report: Report) -> None:
    out["data_root"] = ds.pop("data_prefix", "")
    test = bool(ds.pop("test_mode", False))  # the split says it now
    out["split"] = "test" if test else "train"
    if ds.pop("ann_file", None) is not None:
        raise ConfigConversionError(
            f"{where}.ann_file",
            "(set)",
            f"MMPretrain 1.x's {ds['type']} reads its split from its own files under data_root; a list of "
            "samples of your own is a CustomDataset(data_prefix=..., ann_file=...) instead.",
        )
    report.moved(f"{where}.data_prefix / test_mode", f"{where}.data_root / split={out['split']!r}")


def _cub(ds: dict[str, Any], out: dict[str, Any], where: str, report: Report) -> None:
    """0.x named CUB's four files one by one; 1.x finds them under data_root by their names."""
    files = {
        "ann_file": "images.txt",
        "image_class_labels_file": "image_class_labels.txt",
        "train_test_split_file": "train_test_split.txt",
        "data_prefix": "images",
    }
    roots = {os.path.dirname(os.path.normpath(str(ds.get(key, "")))) for key in files}
    names = {key: os.path.basename(os.path.normpath(str(ds.pop(key, "")))) for key in files}
    if len(roots) != 1 or names != files:
        raise ConfigConversionError(
            f"{where}: ann_file / image_class_labels_file / train_test_split_file / data_prefix",
            names,
            "MMPretrain 1.x's CUB reads images.txt, image_class_labels.txt, train_test_split.txt and images/ "
            "from one folder (data_root); put the files there under those names.",
        )
    out["data_root"] = roots.pop()
    out["split"] = "test" if ds.get("test_mode", False) else "train"
    report.moved(f"{where}: CUB's files", f"{where}.data_root / split={out['split']!r}")


def _voc(ds: dict[str, Any], out: dict[str, Any], state: _State, where: str, report: Report) -> None:
    root = str(ds.pop("data_prefix"))
    ann = ds.pop("ann_file", None)
    out["data_root"] = root
    if ann is not None:
        out["image_set_path"] = os.path.relpath(str(ann), root)
    state.voc = {"difficult_as_positive": ds.pop("difficult_as_postive", None)}  # 0.x's spelling
    report.moved(f"{where}.data_prefix / ann_file", f"{where}.data_root / image_set_path")


def _dataset(ds: dict[str, Any], report: Report, state: _State, *, test: bool, where: str) -> dict[str, Any]:
    ds = dict(ds)
    kind = ds.get("type")
    if kind in WRAPPERS:
        if kind == "ConcatDataset":
            _engine.separate_eval(ds, where, test, report, "MMPretrain")
        if "dataset" in ds:
            ds["dataset"] = _dataset(ds["dataset"], report, state, test=test, where=where)
        if "datasets" in ds:
            ds["datasets"] = [_dataset(d, report, state, test=test, where=where) for d in ds["datasets"]]
        return ds
    out: dict[str, Any] = {"type": kind}
    if kind in SPLIT_DATASETS:
        _split_dataset(ds, out, where, report)
    elif kind == "CUB":
        _cub(ds, out, where, report)
    elif kind == "VOC":
        _voc(ds, out, state, where, report)
        state.multi_label = True
    if kind == "ImageNet21k":
        ds.pop("recursion_subdir", None)  # 0.x accepted only True; 1.x always recurses
        if ds.pop("multi_label", False):
            raise ConfigConversionError(
                f"{where}.multi_label", True, "MMClassification 0.x itself refused multi-label ImageNet-21k."
            )
    if kind == "MultiLabelDataset" or ds.get("multi_label"):
        state.multi_label = True
    for key, value in ds.items():
        if key in ("type", "pipeline"):
            continue
        if key == "file_client_args":
            if value and value.get("backend", "disk") != "disk":
                raise ConfigConversionError(
                    f"{where}.file_client_args",
                    value,
                    "MMPretrain 1.x's data sets read their files through data_root's backend; give the "
                    "backend on LoadImageFromFile(backend_args=...) and a data_root it serves.",
                )
            continue
        out[key] = value  # data_prefix, ann_file, classes, test_mode, extensions ...
    pipeline = ds.get("pipeline")
    if isinstance(pipeline, list):
        out["pipeline"] = convert_pipeline(pipeline, report, state, where=f"{where}.pipeline")
    return out


def _sampler(src: dict[str, Any], report: Report) -> dict[str, Any] | None:
    """0.x's top-level ``sampler`` (RepeatAugSampler) -> the train dataloader's sampler."""
    sampler = src.pop("sampler", None)
    if sampler is None:
        return None
    sampler = dict(sampler)
    if sampler.get("type") != "RepeatAugSampler":
        raise ConfigConversionError(
            "sampler", sampler, "MMPretrain 1.x's train dataloader takes RepeatAugSampler or MMEngine's samplers."
        )
    rounds, ratio = sampler.pop("selected_round", 256), sampler.pop("selected_ratio", 0)
    if rounds or ratio:
        report.differs(
            f"sampler: 0.x's RepeatAugSampler gave each rank floor(len(dataset) // {rounds} * {rounds} / "
            f"{ratio if ratio else 'world size'}) samples an epoch; 1.x's gives ceil(len(dataset) / world "
            "size) (a few more samples an epoch)"
        )
    report.moved("sampler", "train_dataloader.sampler")
    return {"type": "RepeatAugSampler", "shuffle": sampler.pop("shuffle", True), **sampler}


def convert_data(src: dict[str, Any], out: dict[str, Any], report: Report, loop: _engine.Loop) -> _State:
    state = _State()
    data = src.pop("data", None)
    evaluation = src.pop("evaluation", None)
    sampler = _sampler(src, report)
    if data is None:
        if evaluation is not None:
            _evaluators(evaluation, out, report, state)
        return state
    data = dict(data)
    batch = data.pop("samples_per_gpu", 2)
    workers = data.pop("workers_per_gpu", 2)
    report.moved("data.samples_per_gpu", "*_dataloader.batch_size")
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
        size = over.pop("samples_per_gpu", batch)  # 0.x tested with the training batch size
        nwork = over.pop("workers_per_gpu", workers)
        loader = _engine.dataloader(size, nwork, not test, dataset)
        if not test and sampler is not None:
            loader["sampler"] = sampler
        if persistent is not None:
            loader["persistent_workers"] = bool(persistent) and nwork > 0
        _engine.loader_options(loader, over, f"data.{name}_dataloader", report)
        out[f"{name}_dataloader"] = loader
        report.moved(f"data.{name}", f"{name}_dataloader.dataset")
    for key in data:
        report.drop(f"data.{key}", "no 1.x dataloader equivalent")
    if "val_dataloader" in out and "test_dataloader" not in out:
        out["test_dataloader"] = copy.deepcopy(out["val_dataloader"])
    if "val_dataloader" in out or evaluation is not None:
        _evaluators(evaluation, out, report, state)
    return state


# ----------------------------------------------------------------------------- evaluators
def _single_label(names: list[str], options: dict[str, Any]) -> list[dict[str, Any]]:
    metrics: list[dict[str, Any]] = []
    thrs = options.get("thrs")
    if "accuracy" in names:
        accuracy: dict[str, Any] = {"type": "Accuracy", "topk": tuple(options.get("topk", (1, 5)))}
        if thrs is not None:
            accuracy["thrs"] = thrs
        metrics.append(accuracy)
    items = [SINGLE_LABEL_ITEMS[n] for n in names if n in SINGLE_LABEL_ITEMS]
    if items:
        metric: dict[str, Any] = {
            "type": "SingleLabelMetric",
            "items": items,
            "average": options.get("average_mode", "macro"),
        }
        if thrs is not None:
            metric["thrs"] = thrs
        metrics.append(metric)
    return metrics


def _multi_label(names: list[str], options: dict[str, Any], state: _State) -> list[dict[str, Any]]:
    voc = state.voc is not None
    extra = dict(state.voc or {})
    metrics: list[dict[str, Any]] = []
    if "mAP" in names:
        metrics.append({"type": "VOCAveragePrecision" if voc else "AveragePrecision", **extra})
    for average in ("macro", "micro"):
        items = [
            MULTI_LABEL_ITEMS[n][1] for n in names if n in MULTI_LABEL_ITEMS and MULTI_LABEL_ITEMS[n][0] == average
        ]
        if items:
            metric: dict[str, Any] = {
                "type": "VOCMultiLabelMetric" if voc else "MultiLabelMetric",
                "items": items,
                "average": average,
                **extra,
            }
            for key in ("thr", "topk"):
                if options.get(key) is not None:
                    metric[key] = options[key]
            metrics.append(metric)
    return metrics


def _evaluators(evaluation: dict[str, Any] | None, out: dict[str, Any], report: Report, state: _State) -> None:
    """0.x ``evaluation`` (EvalHook's arguments and the dataset's evaluate()) -> val/test evaluators."""
    evaluation = dict(evaluation or {})
    metrics = evaluation.pop("metric", "accuracy")  # 0.x EvalHook's default
    options = dict(evaluation.pop("metric_options", None) or {})
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    known = ("accuracy", *SINGLE_LABEL_ITEMS, "mAP", *MULTI_LABEL_ITEMS)
    unknown = [m for m in names if m not in known]
    if unknown:
        raise ConfigConversionError(
            "evaluation.metric",
            metrics,
            f"MMClassification 0.x's data sets computed {', '.join(known)}; set val_evaluator in a 1.x config for others.",
        )
    multi = state.multi_label or any(m in ("mAP", *MULTI_LABEL_ITEMS) for m in names)
    evaluators = _multi_label(names, options, state) if multi else _single_label(names, options)
    value: Any = evaluators[0] if len(evaluators) == 1 else evaluators
    out["val_evaluator"] = value
    out["test_evaluator"] = copy.deepcopy(value)
    report.moved("evaluation.metric", "val_evaluator / test_evaluator")
    _engine.evaluation_schedule(
        evaluation,
        out,
        report,
        EVALUATION_DROPPED,
        "MMPretrain 1.x's evaluation takes interval (train_cfg.val_interval), metric, metric_options, "
        "save_best and rule",
    )


# ----------------------------------------------------------------------------- model
def _zerox_arguments(node: Any, out: dict[str, Any], report: Report, where: str = "model") -> None:
    if isinstance(node, dict):
        kind = node.get("type")
        if isinstance(kind, str) and kind in ZEROX_ARGUMENTS:
            for key, value in ZEROX_ARGUMENTS[kind].items():
                if key not in node:
                    node[key] = copy.deepcopy(value)
                    report.note(f"{where}: {kind}.{key}={value!r} set (0.x's default; 1.x's differs)")
        renames = ARCH_RENAMES.get(str(kind), {})
        if isinstance(node.get("arch"), str) and node["arch"] in renames:
            old, node["arch"] = node["arch"], copy.deepcopy(renames[node["arch"]])
            report.moved(f"{where}: {kind}(arch={old!r})", f"arch={node['arch']!r}")
        if isinstance(kind, str) and kind in CLS_TOKEN_BACKBONES and "output_cls_token" in node:
            node["out_type"] = "cls_token" if node.pop("output_cls_token") else "featmap"
            report.moved(f"{where}: {kind}.output_cls_token", f"out_type={node['out_type']!r}")
        if isinstance(kind, str) and kind in ZEROX_COMPONENTS:
            _engine.legacy_component(node, out, report, where, *ZEROX_COMPONENTS[kind])
        for key, value in node.items():
            _zerox_arguments(value, out, report, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _zerox_arguments(value, out, report, f"{where}[{index}]")


def _batch_augments(model: dict[str, Any], report: Report) -> None:
    train_cfg = model.get("train_cfg")
    if not isinstance(train_cfg, dict) or train_cfg.get("augments") is None:
        return
    train_cfg = dict(train_cfg)
    given = train_cfg.pop("augments")
    given = [given] if isinstance(given, dict) else list(given)
    augments, probs = [], []
    for aug in given:
        aug = dict(aug)
        kind = aug.pop("type")
        if kind not in BATCH_AUGMENTS:
            raise ConfigConversionError(
                "model.train_cfg.augments",
                kind,
                f"MMClassification 0.x's batch augments are {', '.join(BATCH_AUGMENTS)}; this one has no rule here.",
            )
        new, keep = BATCH_AUGMENTS[kind]
        probs.append(float(aug.pop("prob", 1.0)))
        aug.pop("num_classes", None)  # 1.x: the data preprocessor's num_classes
        augments.append({"type": new, **{k: aug.pop(k) for k in keep if k in aug}})
        for key in aug:
            report.drop(f"model.train_cfg.augments[{kind}].{key}", f"not an argument of 1.x's {new}")
        report.moved(f"model.train_cfg.augments[{kind}]", f"model.train_cfg.augments[{new}]")
    train_cfg["augments"] = augments
    if not (len(set(probs)) == 1 and abs(sum(probs) - 1.0) < 1e-9):
        # 1.x as 0.x: the rest of the probability is no augment (without probs, 1.x draws one
        # augment uniformly: the same as equal probabilities that sum to 1)
        train_cfg["probs"] = probs
    model["train_cfg"] = train_cfg


def _num_classes(model: dict[str, Any]) -> int | None:
    head = model.get("head")
    if isinstance(head, dict) and isinstance(head.get("num_classes"), int):
        return int(head["num_classes"])
    return None


def convert_model(src: dict[str, Any], out: dict[str, Any], report: Report, state: _State) -> None:
    model = src.pop("model", None)
    if model is None:
        return
    model = copy.deepcopy(dict(model))
    _zerox_arguments(model, out, report)
    _batch_augments(model, report)
    pre: dict[str, Any] = {"type": "ClsDataPreprocessor"}
    if state.normalize is not None:
        pre.update(state.normalize)
    else:
        pre["to_rgb"] = False  # no Normalize: 0.x fed the image as loaded
    classes = _num_classes(model)
    if classes is not None:
        pre["num_classes"] = classes
    given = model.pop("data_preprocessor", None)
    if isinstance(given, dict):
        pre.update(given)
    model["data_preprocessor"] = pre
    report.moved("img_norm_cfg / Normalize", "model.data_preprocessor (ClsDataPreprocessor)")
    out["model"] = model


# ----------------------------------------------------------------------------- schedule, hooks
def _cooldown(src: dict[str, Any], out: dict[str, Any], loop: _engine.Loop, report: Report) -> bool:
    """0.x's CosineAnnealingCooldown: cosine from the base lr to the target over length -
    cool_down_time steps, then target * cool_down_ratio for the rest. Written as a CosineAnnealingLR
    and a ConstantLR after it (the warm-up as for the other policies)."""
    lr = src.get("lr_config")
    if not isinstance(lr, dict) or lr.get("policy") != "CosineAnnealingCooldown":
        return False
    lr = dict(src.pop("lr_config"))
    lr.pop("policy")
    by_epoch = lr.pop("by_epoch", True)
    cool = int(lr.pop("cool_down_time", 10))
    ratio = float(lr.pop("cool_down_ratio", 0.1))
    if by_epoch != loop.by_epoch:
        raise ConfigConversionError(
            "lr_config.by_epoch",
            by_epoch,
            "CosineAnnealingCooldown counted in the runner's own unit here only; give by_epoch as the runner counts.",
        )
    end = loop.length - cool  # the last step of the cosine (0.x: progress <= length - cool_down_time)
    cosine: dict[str, Any] = {
        "type": "CosineAnnealingLR",
        "T_max": end,
        "begin": 0,
        "end": end + 1,
        "by_epoch": by_epoch,
    }
    _engine.min_lr(lr, cosine)
    schedulers = _engine.warmup(lr, report) + [cosine]
    if end + 1 < loop.length:
        schedulers.append(
            {"type": "ConstantLR", "factor": ratio, "begin": end + 1, "end": loop.length, "by_epoch": by_epoch}
        )
    for key in lr:
        report.drop(f"lr_config.{key}", "not used by CosineAnnealingCooldown")
    out["param_scheduler"] = schedulers
    report.moved("lr_config (CosineAnnealingCooldown)", "param_scheduler (CosineAnnealingLR, then ConstantLR)")
    return True


def _ema_hook(hook: dict[str, Any], report: Report) -> dict[str, Any]:
    """MMCV 1.x's EMAHook (0.x's configs) -> MMEngine's: ema = (1 - m) * ema + m * param in both;
    MMCV raised m to the interval's power and warmed it up with min(m, (1 + step) / (warm_up + step))."""
    hook = dict(hook)
    hook.pop("type")
    momentum = float(hook.pop("momentum", 0.0002))
    interval = int(hook.pop("interval", 1))
    warm_up = int(hook.pop("warm_up", 100))
    if hook.pop("resume_from", None) is not None:
        raise ConfigConversionError(
            "custom_hooks[EMAHook].resume_from",
            "(set)",
            "MMEngine resumes the EMA model with the run (--resume); remove resume_from.",
        )
    target: dict[str, Any] = {"type": "EMAHook", "ema_type": "ExponentialMovingAverage"}
    target["momentum"] = momentum**interval
    if interval != 1:
        target["interval"] = interval
    if target["momentum"] > 1.0 / max(warm_up, 1):
        report.differs(
            f"custom_hooks[EMAHook]: MMCV warmed the momentum up over the first steps (min({target['momentum']}, "
            f"(1 + step) / ({warm_up} + step))); MMEngine's EMAHook uses {target['momentum']} from the first step"
        )
    target.update(hook)  # priority
    report.moved("custom_hooks[EMAHook] (MMCV's)", "custom_hooks[EMAHook] (MMEngine's ExponentialMovingAverage)")
    return target


CUSTOM_HOOKS: dict[str, Any] = {"EMAHook": _ema_hook}


def _ipu(src: dict[str, Any]) -> None:
    keys = [k for k in ("ipu_replicas", "options_cfg") if k in src]
    runner = src.get("runner") or {}
    if keys or str(runner.get("type", "")).startswith("IPU"):
        raise ConfigConversionError(
            ", ".join(keys) or "runner.type",
            "(set)" if keys else runner.get("type"),
            "It is one of MMClassification 0.x's Graphcore IPU configs; MMPretrain 1.x has no IPU runner. "
            "Train the same model from the config without '-ipu' in its name.",
        )


def rules(src: dict[str, Any], out: dict[str, Any], report: Report) -> None:
    """MMClassification 0.x's sections of ``src`` (a private plain copy) into ``out`` (1.x keys)."""
    _ipu(src)
    if src.get("runner") is None and "total_epochs" in src:
        src["runner"] = {"type": "EpochBasedRunner", "max_epochs": src.pop("total_epochs")}
        report.moved("total_epochs", "train_cfg.max_epochs")
    loop = _engine.convert_runner(src, out, report)
    base_lr = (src.get("optimizer") or {}).get("lr")
    _engine.convert_optimizer(src, out, report)
    if not _cooldown(src, out, loop, report):
        _engine.convert_lr_config(src, out, report, loop, base_lr)
    _engine.convert_runtime(src, out, report, loop, "UniversalVisualizer", "VisualizationHook")
    state = convert_data(src, out, report, loop)
    for name in ("val", "test"):
        if f"{name}_dataloader" not in out:  # a training-only config (0.x ran it with --no-validate)
            out.pop(f"{name}_cfg", None)
            out.pop(f"{name}_evaluator", None)
    for name in ("train_pipeline", "test_pipeline", "val_pipeline"):
        if isinstance(src.get(name), list):
            out[name] = convert_pipeline(src.pop(name), Report(), _State(), where=name)
    if "test_dataloader" in out:
        # 0.x's inference_model read data.test.pipeline, 1.x's reads the top-level test_pipeline
        out["test_pipeline"] = copy.deepcopy(
            _engine.innermost(out["test_dataloader"]["dataset"], WRAPPERS).get("pipeline", [])
        )
    if src.pop("img_norm_cfg", None) is not None:
        report.drop("img_norm_cfg", "now model.data_preprocessor's mean/std/to_rgb")
    convert_model(src, out, report, state)
    _raw_score_heads(out, report)
    _engine.convert_custom_hooks(src, out, report, CUSTOM_HOOKS)


#: 0.x multi-label heads whose test path returned raw scores (no sigmoid): their 0.x evaluation
#: thresholded logits; 1.x's heads give sigmoid scores.
RAW_SCORE_HEADS = ("CSRAClsHead",)


def _raw_score_heads(out: dict[str, Any], report: Report) -> None:
    """0.x's CSRAClsHead predicted logits, and its data set thresholded them (thr 0.5); 1.x's gives
    sigmoid scores. The same decisions are sigmoid(logit) >= sigmoid(thr): the metrics' threshold."""
    head = (out.get("model") or {}).get("head") or {}
    if head.get("type") not in RAW_SCORE_HEADS:
        return
    for name in ("val_evaluator", "test_evaluator"):
        metrics = out.get(name)
        for metric in metrics if isinstance(metrics, list) else [metrics] if metrics else []:
            if "MultiLabelMetric" in str(metric.get("type")) and metric.get("topk") is None:
                thr = float(metric.get("thr", 0.5))
                metric["thr"] = 1.0 / (1.0 + math.exp(-thr))
    report.differs(
        f"model.head: 0.x's {head['type']} predicted raw scores (logits); 1.x's predicts their sigmoid. The "
        "multi-label metrics' threshold is sigmoid(0.x's threshold), so that they decide as 0.x did"
    )
