"""MMDetection 2.28.2 configs through mmfix's automatic path, against their official 3.3.0 counterparts.

Pairs are made by identical checkpoint URL in the two model zoos' metafile.yml files.
Each 2.x config is loaded with ``Config.fromfile`` with mmfix active (the path the
tools take) and compared section by section with the 3.x config. Prints a table per
section, the remaining differences grouped by where they are, and the cost of the
conversion for Faster R-CNN (paired against stock ``Config.fromfile`` in the same run).

    pip download --no-deps -d /tmp/mmdet2 mmdet==2.28.2     # read as a zip, never installed
    python benchmarks/config_conversion.py /tmp/mmdet2/mmdet-2.28.2-py3-none-any.whl [--build] [--show N]
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import statistics
import sys
import tempfile
import time
import zipfile
from typing import Any
from urllib.error import URLError

# tests/: helpers shared with the tests (pretrained_free), on sys.path here and in the scripts the
# benchmarks run inside the real 2.x / 0.x environments (TESTS below).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

os.environ.pop("MMFIX_DISABLE", None)
os.environ.setdefault("MMFIX_LOG_LEVEL", "WARNING")  # one "converted" line per config is noise here

import mmfix  # noqa: F401  (the automatic path: active from import on, as in a user's train.py)

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")

SECTIONS = (
    "model",
    "train_dataloader",
    "val_dataloader",
    "test_dataloader",
    "val_evaluator",
    "test_evaluator",
    "optim_wrapper",
    "param_scheduler",
    "train_cfg",
    "checkpoint_interval",
    "logger_interval",
    "auto_scale_lr",
)


def mmdet2_configs(source: str) -> str:
    if source.endswith(".whl"):
        target = tempfile.mkdtemp(prefix="mmdet2-")
        with zipfile.ZipFile(source) as zf:
            zf.extractall(target, [n for n in zf.namelist() if n.startswith("mmdet/.mim/")])
        source = target
    for candidate in (source, os.path.join(source, "mmdet", ".mim", "configs"), os.path.join(source, "configs")):
        if os.path.isdir(os.path.join(candidate, "_base_")):
            return candidate
    raise SystemExit(f"no MMDetection configs (a _base_ folder) under {source}")


def index(configs: str, root: str, pattern: str = "metafile.yml") -> dict[str, str]:
    """Checkpoint URL -> config path, from a zoo's metafiles (their ``Config`` paths are relative to ``root``)."""
    import yaml

    by_url: dict[str, str] = {}
    # one folder deep (MMDetection's, MMSegmentation's, MMPretrain's model folders) or deeper (MMPose's
    # body/2d_kpt_sview_rgb_img/topdown_heatmap/coco/)
    for meta in glob.glob(os.path.join(configs, "*", "**", pattern), recursive=True):
        with open(meta) as fh:
            data = yaml.safe_load(fh) or {}
        models = data.get("Models", []) if isinstance(data, dict) else []
        for model in models or []:
            url, cfg = model.get("Weights"), model.get("Config")
            if isinstance(url, str) and isinstance(cfg, str):
                path = os.path.join(root, cfg)
                if os.path.isfile(path):
                    by_url[url] = path
    return by_url


def _norm_paths(ds: Any) -> Any:
    """data_root + relative ann_file / data_prefix -> joined paths, so both spellings compare equal."""
    if isinstance(ds, dict):
        ds = {
            k: _norm_paths(v)
            for k, v in ds.items()
            if not (k in ("backend_args", "file_client_args") and v in (None, {"backend": "disk"}))
        }
        root = ds.pop("data_root", None)
        if root:
            join = lambda p: p if not isinstance(p, str) or p.startswith(("/", root)) else root + p
            if "ann_file" in ds:
                ds["ann_file"] = join(ds["ann_file"])
            if isinstance(ds.get("data_prefix"), dict):
                ds["data_prefix"] = {k: join(v) for k, v in ds["data_prefix"].items()}
            for key in (
                "seg_prefix",
                "proposal_file",
                "hierarchy_file",
                "meta_file",
                "image_level_ann_file",
                "label_file",
            ):
                if key in ds:
                    ds[key] = join(ds[key])
        return ds
    if isinstance(ds, (list, tuple)):
        return [_norm_paths(v) for v in ds]
    return ds


_REGISTRIES = {  # where a section's `type` names are looked up for their constructor defaults
    "model": ("MODELS", "TASK_UTILS"),
    "dataloader": ("DATASETS", "TRANSFORMS", "DATA_SAMPLERS"),
    "evaluator": ("METRICS",),
    "optim_wrapper": ("OPTIM_WRAPPERS", "OPTIMIZERS", "OPTIM_WRAPPER_CONSTRUCTORS"),
    "param_scheduler": ("PARAM_SCHEDULERS",),
    "train_cfg": ("LOOPS",),
}
_defaults_cache: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}


#: The registries the types are looked up in (benchmarks/family_zoo.py sets another toolbox's).
REGISTRY_MODULE = "mmdet.registry"


def _constructor_defaults(kind: str, registries: tuple[str, ...]) -> dict[str, Any]:
    """Keyword defaults of the class the current toolbox builds for `kind` (empty if unknown)."""
    key = (kind, registries)
    if key not in _defaults_cache:
        import importlib
        import inspect

        registry = importlib.import_module(REGISTRY_MODULE)
        found: dict[str, Any] = {}
        for name in registries:
            try:
                cls = getattr(registry, name).get(kind)
            except RuntimeError:  # MMEngine's get: a dotted or empty name it cannot import (MMPose's configs)
                cls = None
            if cls is None:
                continue
            # Mixins such as LRSchedulerMixin take (*args, **kwargs): read every __init__ up the MRO.
            for klass in reversed(getattr(cls, "__mro__", (cls,))):
                init = klass.__dict__.get("__init__")
                if init is None:
                    continue
                try:
                    params = inspect.signature(init).parameters.values()
                except (TypeError, ValueError):
                    continue
                found.update({p.name: _canon(p.default) for p in params if p.default is not inspect.Parameter.empty})
            break
        _defaults_cache[key] = found
    return _defaults_cache[key]


def _drop_defaults(value: Any, registries: tuple[str, ...]) -> Any:
    """A key set to its 3.x constructor's default means what an absent key means: drop it."""
    if isinstance(value, dict):
        out = {k: _drop_defaults(v, registries) for k, v in value.items()}
        kind = out.get("type")
        if isinstance(kind, str):
            defaults = _constructor_defaults(kind, registries)
            out = {
                k: v
                for k, v in out.items()
                if k == "type" or k not in defaults or _drop_defaults(defaults[k], registries) != v
            }
            if kind in ("Resize", "RandomResize", "RandomChoiceResize") and out.get("keep_ratio"):
                # With keep_ratio, mmcv rescales by the long and the short edge: (1333, 480) == (480, 1333).
                for key in ("scale", "scales"):
                    value_ = out.get(key)
                    if isinstance(value_, list) and all(isinstance(v, int) for v in value_):
                        out[key] = sorted(value_)
                    elif isinstance(value_, list):
                        out[key] = [sorted(v) if isinstance(v, list) else v for v in value_]
        return out
    if isinstance(value, list):
        return [_drop_defaults(v, registries) for v in value]
    return value


def section(cfg: dict[str, Any], name: str) -> Any:
    if name == "checkpoint_interval":
        return ((cfg.get("default_hooks") or {}).get("checkpoint") or {}).get("interval")
    if name == "logger_interval":
        return ((cfg.get("default_hooks") or {}).get("logger") or {}).get("interval")
    value = cfg.get(name)
    if name.endswith("_dataloader") and isinstance(value, dict):
        value = {k: value.get(k) for k in ("batch_size", "num_workers", "dataset")}
    if name in ("val_evaluator", "test_evaluator", "train_dataloader", "val_dataloader", "test_dataloader"):
        value = _norm_paths(value)
    if name in ("val_evaluator", "test_evaluator") and isinstance(value, dict) and value.get("format_only") is False:
        value = {k: v for k, v in value.items() if k != "format_only"}  # False is CocoMetric's default
    if name == "auto_scale_lr" and isinstance(value, dict) and value.get("enable") is False:
        # Off unless `--auto-scale-lr` is given, which sets enable=True either way.
        value = {k: v for k, v in value.items() if k != "enable"}
    kind = next((k for k in _REGISTRIES if name == k or name.endswith("_" + k)), None)
    value = _canon(value)
    return _drop_defaults(value, _REGISTRIES[kind]) if kind else value


def _canon(value: Any) -> Any:
    # A key set to None and an absent key mean the same to MMDetection's builders (clip_grad=None, ...).
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def differences(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every difference between the converted (a) and the official (b) value: (path, a, b)."""
    if isinstance(a, dict) and isinstance(b, dict):
        found: list[tuple[str, Any, Any]] = []
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                found.append((f"{path}.{key}", a.get(key, "<absent>"), b.get(key, "<absent>")))
            else:
                found += differences(a[key], b[key], f"{path}.{key}")
        return found
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [(f"{path}[len]", len(a), len(b))]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [(path, a, b)]


#: Differences where the converter keeps what the 2.x config meant on 2.x and the official 3.x config
#: deliberately changed the value (the issue requires the 2.x meaning). (difference class, configs it
#: applies to as a regex on the 2.x file name or None for all, reason). A difference without a rule
#: here is an open gap, listed as such.
DELIBERATE: list[tuple[str, str | None, str]] = [
    ("val_dataloader.num_workers", None, "2.x used workers_per_gpu for validation too; the 3.x configs chose 2"),
    ("test_dataloader.num_workers", None, "2.x used workers_per_gpu for testing too; the 3.x configs chose 2"),
    ("val_dataloader.batch_size", None, "2.x validated 1 image per GPU unless data.val set samples_per_gpu"),
    ("test_dataloader.batch_size", None, "2.x tested 1 image per GPU unless data.test set samples_per_gpu"),
    ("val_evaluator.metric", None, "2.x evaluated every metric listed in `evaluation`; some 3.x configs fewer"),
    ("test_evaluator.metric", None, "2.x evaluated every metric listed in `evaluation`; some 3.x configs fewer"),
    (
        "param_scheduler[].end",
        None,
        (
            "the 2.x schedule ran to the end of training; some 3.x configs end at "
            "epoch 12 (so their later milestones never apply)"
        ),
    ),
    ("model.roi_head.type", None, "2.x's HTC masks (mean of every stage) are kept: mmfix's HybridTaskCascadeRoIHead2x"),
    (
        "model.roi_head.mask_iou_head.type",
        None,
        "2.x's Mask Scoring R-CNN scores are kept (boxes untouched): mmfix's MaskIoUHead2x",
    ),
    ("param_scheduler[].milestones[]", None, "2.x's lr_config.step is kept; some 3.x configs changed the steps"),
    (
        "param_scheduler[].start_factor",
        None,
        ("2.x's warmup_ratio (or constant warm-up) is kept; 3.x configs changed it"),
    ),
    ("param_scheduler[].factor", None, "2.x's constant warm-up is kept; 3.x configs made it linear"),
    ("param_scheduler[].type", None, "2.x's warm-up kind is kept (constant -> ConstantLR); 3.x configs changed it"),
    (
        "param_scheduler[].T_max",
        r"^yolox/",
        (
            "2.x's YOLOX cosine ends exactly at max_epochs - num_last_epochs "
            "(T_max counts from its begin); the 3.x configs' T_max overshoots"
        ),
    ),
    ("param_scheduler[].begin", r"^yolo/", "2.x's schedule starts at 0 (warm-up overlaps it); 3.x configs moved it"),
    ("optim_wrapper.loss_scale", None, "2.x fp16 configs used a static loss scale (kept); 3.x switched to dynamic"),
    ("optim_wrapper.clip_grad", None, "2.x's grad_clip is kept; the 3.x config dropped it"),
    ("train_cfg.val_interval", None, "2.x evaluation.interval is kept; 3.x configs changed it"),
    (
        "train_cfg.dynamic_intervals",
        r"^yolox/",
        ("2.x evaluated every epoch in the last epochs (dynamic_intervals); the 3.x configs dropped it"),
    ),
    ("checkpoint_interval", None, "2.x checkpoint_config.interval is kept; 3.x configs changed it"),
    ("train_dataloader.num_workers", None, "2.x workers_per_gpu is kept; 3.x configs changed it"),
    ("auto_scale_lr.base_batch_size", None, "2.x's base_batch_size is kept; 3.x configs changed it"),
    ("train_dataloader.dataset.pipeline[].to_float32", None, "2.x loaded these images as float32 (kept)"),
    ("train_dataloader.dataset.dataset.pipeline[].to_float32", None, "2.x loaded these images as float32 (kept)"),
    ("train_dataloader.dataset.pipeline[].with_label", None, "2.x's RPN loaded no labels (kept)"),
    ("train_dataloader.dataset.pipeline[].poly2mask", None, "2.x kept masks as polygons here (kept)"),
    ("train_dataloader.dataset.pipeline[].crop_type", r"^fpg/", "2.x's RandomCrop (absolute) is kept; 3.x changed it"),
    (
        "train_dataloader.dataset.pipeline[].allow_negative_crop",
        r"^fpg/",
        "2.x's RandomCrop refused crops without boxes (kept); 3.x changed it",
    ),
    (
        "model.data_preprocessor.pad_mask",
        r"^fpg/faster",
        (
            "2.x's Faster R-CNN FPG config loaded masks (kept, "
            "see with_mask), so they are padded with the batch as "
            "2.x's Pad padded them"
        ),
    ),
    (
        "train_dataloader.dataset.pipeline[].with_mask",
        r"^fpg/faster",
        ("2.x's Faster R-CNN FPG config loaded masks (unused; kept)"),
    ),
    (
        "model.data_preprocessor.mean[]",
        r"caffe",
        ("the 2.x config normalised caffe-style (kept); the 3.x config lost that override"),
    ),
    (
        "model.data_preprocessor.std[]",
        r"caffe",
        ("the 2.x config normalised caffe-style (kept); the 3.x config lost that override"),
    ),
    (
        "model.data_preprocessor.bgr_to_rgb",
        r"caffe",
        ("the 2.x config normalised caffe-style (kept); the 3.x config lost that override"),
    ),
    (
        "model.data_preprocessor.pad_size_divisor",
        r"^efficientnet/",
        ("2.x padded test images to 896x896 (kept as a Pad transform, so no divisor is needed)"),
    ),
    ("val_dataloader.dataset.pipeline[len]", r"^efficientnet/", "2.x padded test images to 896x896 (kept)"),
    ("test_dataloader.dataset.pipeline[len]", r"^efficientnet/", "2.x padded test images to 896x896 (kept)"),
    *[
        (
            f"train_dataloader.dataset.{key}",
            r"^panoptic_fpn/.*3x",
            (
                "2.x trained 12 epochs over the dataset "
                "repeated 3 times (RepeatDataset, kept); the 3.x config trains 36 epochs without the wrapper"
            ),
        )
        for key in ("ann_file", "data_prefix", "dataset", "pipeline", "times", "type", "filter_cfg")
    ],
    (
        "train_cfg.max_epochs",
        r"^panoptic_fpn/.*3x",
        (
            "2.x trained 12 epochs over the dataset repeated 3 times "
            "(kept); the 3.x config trains 36 epochs without the wrapper"
        ),
    ),
    (
        "train_cfg.by_epoch",
        None,
        (
            "equivalent: by_epoch=True is MMEngine's older spelling of an "
            "EpochBasedTrainLoop, which the converter writes as its type"
        ),
    ),
    (
        "model.train_cfg",
        r"^nas_fcos/nas_fcos_fcoshead",
        ("equivalent: FCOSHead never reads train_cfg (dropped); the 3.x config keeps the unused one"),
    ),
    (
        "val_dataloader.dataset.pipeline[].poly2mask",
        None,
        (
            "equivalent: 2.x's test pipeline loaded no annotations; "
            "the mask format of evaluation-only annotations does not "
            "change the metric, and the 3.x configs disagree on it"
        ),
    ),
    (
        "test_dataloader.dataset.pipeline[].poly2mask",
        None,
        (
            "equivalent: 2.x's test pipeline loaded no annotations; "
            "the mask format of evaluation-only annotations does not "
            "change the metric, and the 3.x configs disagree on it"
        ),
    ),
    (
        "val_dataloader.dataset.test_mode",
        r"^openimages/",
        (
            "equivalent: 2.x built evaluation sets with "
            "test_mode=True; 3.x's OpenImagesDataset filters nothing "
            "either way"
        ),
    ),
    (
        "test_dataloader.dataset.test_mode",
        r"^openimages/",
        (
            "equivalent: 2.x built evaluation sets with "
            "test_mode=True; 3.x's OpenImagesDataset filters nothing "
            "either way"
        ),
    ),
    *[
        (
            f"{name}_dataloader.dataset.pipeline[].num_max_proposals",
            r"^cascade_rpn/",
            "2.x's LoadProposals(num_max_proposals=300) is kept; the 3.x config changed it",
        )
        for name in ("train", "val", "test")
    ],
    (
        "train_dataloader.dataset.pipeline[].scale[][]",
        r"^sabl/",
        ("2.x's multi-scale range is kept; the 3.x config changed it"),
    ),
    (
        "model.data_preprocessor.pad_size_divisor",
        r"^yolox/",
        (
            "equivalent: 2.x padded every image to a square "
            "of 640 (or 416) in the pipeline (kept), so a divisor "
            "of 32 is a no-op"
        ),
    ),
    (
        "model.data_preprocessor.pad_size_divisor",
        r"^ssd/ssdlite",
        ("equivalent: images are resized to exactly 320x320 first, so padding to a multiple of 320 is a no-op"),
    ),
    *[
        (
            f"{name}_dataloader.dataset.pipeline[].meta_keys[len]",
            r"^openimages/ssd",
            (
                "equivalent: OpenImagesMetric's "
                "image_level_labels is added for every OpenImages set; PackDetInputs skips a key a sample lacks"
            ),
        )
        for name in ("val", "test")
    ],
    *[
        (
            f"{name}_dataloader.dataset.pipeline[len]",
            r"^fpg/",
            (
                "equivalent: the 3.x FPG test pipeline loads no "
                "annotations; CocoMetric reads the ground truth from ann_file, so loading them changes no result"
            ),
        )
        for name in ("val", "test")
    ],
    *[
        (
            f"{name}_dataloader.dataset.data_prefix.img",
            r"^openimages/.*challenge",
            (
                "2.x's image folder is kept: 2.x and 3.x read the same challenge annotation file the same "
                "way (its image names hold the sub-folder, which is why the 3.x config's own val set says "
                "'OpenImages/'); its train and test sets inherit the v6 base's folders instead"
            ),
        )
        for name in ("train", "val", "test")
    ],
    (
        "model.teacher_config",
        r"^ld/",
        (
            "the teacher is the 2.x config file (3.x loads it through the same "
            "conversion while mmfix is active); the 3.x config names the renamed 3.x file"
        ),
    ),
]


IDENTICAL, EQUIVALENT, KEPT, OPEN = range(4)


def deliberate_reason(cls: str, name: str) -> str | None:
    for rule, pattern, reason in DELIBERATE:
        if cls == rule and (pattern is None or re.search(pattern, name)):
            return reason
    return None


def _class(path: str) -> str:
    """A difference's class: its path with list indices and deep detail folded."""
    folded = re.sub(r"\[\d+\]", "[]", path)
    return ".".join(folded.split(".")[:5])


def build_converted(model: dict[str, Any], root: str) -> Any:
    """Build a converted model with MMDetection 3.x's registry, as the Runner passes it (attribute
    access), from the 2.x tree's root, where a 2.x teacher_config path ('configs/gfl/...') points.
    Returns ("built" | "built without the teacher's download", the model)."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import ConfigDict

    register_all_modules()
    here = os.getcwd()
    os.chdir(root)
    try:
        try:
            return "built", MODELS.build(ConfigDict(model))
        except URLError:
            # Knowledge distillation (LD, LAD) downloads the teacher's weights while building;
            # without a network, build the same structure and count it apart.
            if not str(model.get("teacher_ckpt", "")).startswith(("http://", "https://")):
                raise
            return "built without the teacher's download", MODELS.build(ConfigDict(model, teacher_ckpt=None))
    finally:
        os.chdir(here)


def timing(config: str, runs: int) -> tuple[float, float, float]:
    """Median ms of Config.fromfile stock vs with conversion (paired, interleaved), and classify on the 3.x result."""
    from mmengine.config import Config

    from mmfix._configs import classify

    stock = Config.fromfile.__wrapped__
    pairs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        stock(config)
        t1 = time.perf_counter()
        Config.fromfile(config)
        t2 = time.perf_counter()
        pairs.append(((t1 - t0) * 1e3, (t2 - t1) * 1e3))
    cfg3 = Config.fromfile(config).to_dict()
    t0 = time.perf_counter()
    for _ in range(1000):
        classify(cfg3)
    detect_ms = time.perf_counter() - t0
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs), detect_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mmdet2", help="the mmdet-2.28.2 wheel, or a folder with its configs")
    parser.add_argument("--build", action="store_true", help="build every converted model with MMDetection 3.x")
    parser.add_argument("--show", type=int, default=40, help="difference classes to list")
    parser.add_argument("--runs", type=int, default=15, help="timing repetitions")
    args = parser.parse_args()

    import mmdet
    from mmengine.config import Config

    configs2 = mmdet2_configs(args.mmdet2)
    configs3 = os.path.join(os.path.dirname(mmdet.__file__), ".mim", "configs")
    old = index(configs2, os.path.dirname(configs2))
    new = index(configs3, os.path.dirname(configs3))
    pairs = sorted((old[u], new[u]) for u in old.keys() & new.keys())
    print(f"{len(pairs)} pairs (same checkpoint URL, both configs present)")

    # A section, and a pair (its worst section), is one of: identical; equivalent (differs only in
    # spelling, e.g. a no-op pad divisor); kept (also differs where the official 3.x config changed
    # what the 2.x config meant and the converter keeps the 2.x meaning); open (a gap).
    # (section or "all sections", tier) -> how many pairs
    tiers: collections.Counter[tuple[str, int]] = collections.Counter()
    compared: collections.Counter[str] = collections.Counter()
    # (section, class) -> [(config, converted, official)], one entry per pair; open gaps and deliberate apart
    gaps: dict[tuple[str, str], list[tuple[str, Any, Any]]] = collections.defaultdict(list)
    deliberate: dict[tuple[str, str, str], list[tuple[str, Any, Any]]] = collections.defaultdict(list)
    failed_load: list[tuple[str, str]] = []
    # For pairs that are 'kept': which kept 2.x meanings stand between them and equal.
    kept_classes_of_pair: list[frozenset[str]] = []
    built = build_failed = 0
    built_without_download: list[str] = []
    build_errors: list[tuple[str, str]] = []
    for path2, path3 in pairs:
        name = os.path.relpath(path2, configs2)
        try:
            cfg2 = Config.fromfile(path2).to_dict()
        except BaseException as exc:
            failed_load.append((name, str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__))
            continue
        try:
            cfg3 = Config.fromfile(path3, import_custom_modules=False).to_dict()
        except Exception as exc:
            failed_load.append((os.path.relpath(path3, configs3), f"3.x config: {exc}"[:200]))
            continue
        pair_tier = IDENTICAL
        pair_kept: set[str] = set()
        for sec in SECTIONS:
            a, b = section(cfg2, sec), section(cfg3, sec)
            compared[sec] += 1
            found = differences(a, b, sec)
            tier = IDENTICAL
            seen: set[tuple[str, str]] = set()
            for path, x, y in found:
                cls = _class(path)
                reason = deliberate_reason(cls, name)
                if reason is None:
                    tier = OPEN
                elif reason.startswith("equivalent:"):
                    tier = max(tier, EQUIVALENT)
                else:
                    tier = max(tier, KEPT)
                    # A val set and its test twin differ together: count them as one meaning.
                    pair_kept.add(re.sub(r"^(val|test)_", "val/test_", cls))
                if (sec, cls) not in seen:
                    seen.add((sec, cls))
                    if reason is None:
                        gaps[(sec, cls)].append((name, x, y))
                    else:
                        deliberate[(sec, cls, reason)].append((name, x, y))
            tiers[(sec, tier)] += 1
            pair_tier = max(pair_tier, tier)
        tiers[("all sections", pair_tier)] += 1
        if pair_tier == KEPT:
            kept_classes_of_pair.append(frozenset(pair_kept))
        if args.build:
            try:
                if build_converted(cfg2["model"], os.path.dirname(configs2))[0] == "built":
                    built += 1
                else:
                    built_without_download.append(name)
            except Exception as exc:
                build_failed += 1
                build_errors.append((name, f"{type(exc).__name__}: {exc}"[:160]))

    loaded = len(pairs) - len(failed_load)
    print(f"\nloaded through the automatic path: {loaded}/{len(pairs)}")
    for name, why in failed_load:
        print(f"  not loaded: {name}: {why}")
    print(f"\n{'section':<22}{'identical':>10}{'equal':>8}{'+kept':>7}{'of':>6}{'equal':>9}{'equal or kept':>15}")
    for sec, n in [*((sec, compared[sec]) for sec in SECTIONS), ("all sections", loaded)]:
        same, equiv, keep = (tiers[(sec, t)] for t in (IDENTICAL, EQUIVALENT, KEPT))
        print(
            f"{sec:<22}{same:>10}{same + equiv:>8}{keep:>7}{n:>6}{(same + equiv) / max(n, 1):>9.1%}"
            f"{(same + equiv + keep) / max(n, 1):>15.1%}"
        )
    print(
        "  identical: no difference; equal: identical or differing only in spelling (the 'equivalent:' "
        "reasons below); +kept: differs only where the official 3.x config changed what the 2.x config "
        "meant and the converter keeps the 2.x meaning (the other reasons below)"
    )
    if kept_classes_of_pair:
        print(
            f"\nthe {len(kept_classes_of_pair)} 'kept' pairs: the kept 2.x meanings that stand between them and equal"
        )
        print(f"  {'pairs':>6}{'alone':>7}  difference class")
        alone = collections.Counter(next(iter(c)) for c in kept_classes_of_pair if len(c) == 1)
        having = collections.Counter(cls for c in kept_classes_of_pair for cls in c)
        for cls, count in having.most_common(args.show):
            print(f"  {count:>6}{alone[cls]:>7}  {cls}")
    if args.build:
        total = built + len(built_without_download) + build_failed
        print(
            f"\nconverted models built with MMDetection 3.x's registry: {built + len(built_without_download)}/{total}"
        )
        if built_without_download:
            print(
                f"  {len(built_without_download)} of them with the teacher's checkpoint left out: it downloads while "
                f"building and this machine could not fetch it (e.g. {built_without_download[0]})"
            )
        grouped = collections.defaultdict(list)
        for name, why in build_errors:
            grouped[why[:100]].append(name)
        for why, names in sorted(grouped.items(), key=lambda kv: -len(kv[1]))[: args.show]:
            print(f"  {len(names):>4}  {why}  (e.g. {names[0]})")
    print("\nopen differences (no rule, not a kept 2.x meaning), largest classes first; one count per pair:")
    for (_section, cls), items in sorted(gaps.items(), key=lambda kv: -len(kv[1]))[: args.show]:
        name, a, b = items[0]
        print(f"  {len(items):>4}  {cls}\n        e.g. {name}: converted={str(a)[:110]}  official={str(b)[:110]}")
    print("\ndeliberate: 2.x meaning kept where the official 3.x config changed it; one count per pair:")
    for (_, cls, reason), items in sorted(deliberate.items(), key=lambda kv: -len(kv[1]))[: args.show]:
        name, a, b = items[0]
        print(
            f"  {len(items):>4}  {cls}: {reason}\n        e.g. {name}: "
            f"converted={str(a)[:110]}  official={str(b)[:110]}"
        )

    faster = os.path.join(configs2, "faster_rcnn", "faster_rcnn_r50_fpn_1x_coco.py")
    stock_ms, mmfix_ms, detect_ms = timing(faster, args.runs)
    print(f"\nFaster R-CNN (faster_rcnn_r50_fpn_1x_coco.py with its bases), median of {args.runs} paired runs:")
    print(
        f"  stock Config.fromfile {stock_ms:.1f} ms, with conversion {mmfix_ms:.1f} ms: "
        f"+{mmfix_ms - stock_ms:.1f} ms ({mmfix_ms / stock_ms:.2f}x)"
    )
    print(f"  detecting that a loaded config is 3.x: {detect_ms * 1000 / 1000:.4f} ms per config")
    return 0


if __name__ == "__main__":
    sys.exit(main())
