"""Every official 0.x config of an OpenMMLab toolbox through mmfix, on the toolbox's current release.

    python benchmarks/family_zoo.py {mmseg,mmpretrain,mmpose} CONFIGS [--python0x PY] [--only FOLDER …]
        [--match TEXT …] [--out results.json]

CONFIGS: the 0.x toolbox's configs (``<site-packages>/mmseg/.mim/configs`` of MMSegmentation
0.30.0, MMClassification 0.25.0's, MMPose 0.29.0's, e.g. in the 0.x test environment of
tests/family0x_support.py). MMPose 1.x needs numpy 1 (its xtcocotools wheel): run it in the version
matrix's ``mmpose`` venv (``bash scripts/matrix.sh mmpose``). For every config outside
``_base_/``, with mmfix active (the automatic path, as the current tools load configs):

- **load**: ``Config.fromfile`` converts it;
- **accepted**: what the current ``tools/train.py`` does with it up to the first data file —
  ``Runner.from_cfg`` (model, hooks, visualizer, inside a one-rank gloo group as SyncBN
  configs need) — plus each pipeline's transforms, the data sets (``lazy_init``: no files), the
  evaluators, the optimizer wrapper and the parameter schedulers built by the Runner's own
  builders;
- **same as current** (configs whose current official counterpart exists: same checkpoint URL in
  both zoos' metafiles): the same model (module types, parameter names and shapes, built both) and
  the same set-up, section by section (benchmarks/config_conversion.py's comparison, constructor
  defaults folded), with the differences where the converter keeps the 0.x meaning listed apart;
- **strict** (with ``--python0x``, the 0.x environment's python): 0.x's own model's state-dict keys
  and shapes load into the converted model through MMEngine's ``load_state_dict``, which mmfix makes
  strict for a model built from a converted 0.x config.

Prints the counts and every failure grouped by reason.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import copy
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

os.environ.pop("MMFIX_DISABLE", None)
os.environ.setdefault("MMFIX_LOG_LEVEL", "ERROR")  # one "converted" line per config is noise here

import config_conversion as cc
from config_conversion import TESTS
from pretrained_free import strip_pretrained

import mmfix  # the automatic path, as in a user's train.py

#: toolbox -> (package, registry module, metafile name in the current zoo, 0.x metafile glob, the 0.x
#: package's model builder). MMPretrain's models import torchvision (tests/family0x_support.py's
#: torchvision_overlay() on PYTHONPATH where the environment has none).
TOOLBOXES = {
    "mmseg": ("mmseg", "mmseg.registry", "metafile.yaml", "*.yml", "from mmseg.models import build_segmentor as build"),
    "mmpretrain": (
        "mmpretrain",
        "mmpretrain.registry",
        "metafile.yml",
        "metafile.yml",
        "from mmcls.models import build_classifier as build",
    ),
    # MMPose 1.x's data sets import xtcocotools (numpy 1: the version matrix's `mmpose` cell's venv)
    "mmpose": ("mmpose", "mmpose.registry", "*.yml", "*.yml", "from mmpose.models import build_posenet as build"),
}
#: The sections compared (MMDetection's, but auto_scale_lr: the family's 0.x configs had none).
SECTIONS = tuple(name for name in cc.SECTIONS if name != "auto_scale_lr")

#: Differences where the converted config keeps what the 0.x config meant and the current official
#: config changed it: (difference class, regex on the 0.x file name or None, reason).
KEPT: list[tuple[str, str | None, str]] = [
    ("val_dataloader.num_workers", None, "0.x validated with workers_per_gpu workers; the 1.x configs chose 4"),
    ("test_dataloader.num_workers", None, "0.x tested with workers_per_gpu workers; the 1.x configs chose 4"),
    ("train_dataloader.num_workers", None, "0.x's workers_per_gpu is kept; 1.x configs changed it"),
    ("train_cfg.val_interval", None, "0.x's evaluation.interval is kept; 1.x configs changed it"),
    ("checkpoint_interval", None, "0.x's checkpoint_config.interval is kept; 1.x configs changed it"),
    ("optim_wrapper.loss_scale", None, "0.x fp16 configs used a static loss scale (kept); 1.x made it dynamic"),
    (
        "model.backbone.patch_bias",
        None,
        "0.x's ViT had a patch-embedding bias (kept: 0.x checkpoints load strictly); the 1.x configs drop that weight",
    ),
    ("model.decode_head.loss_decode[].type", None, "0.x's DiceLoss (DiceLoss0x); 1.x's DiceLoss computes another loss"),
    (
        "model.auxiliary_head[].loss_decode[].type",
        None,
        "0.x's DiceLoss (DiceLoss0x); 1.x's DiceLoss computes another loss",
    ),
    (
        "train_dataloader.dataset.datasets[].pipeline[len]",
        r"voc12aug",
        "0.x padded to the crop after Normalize (the preprocessor, kept); the 1.x VOC-aug configs add a Pad before it",
    ),
    ("optim_wrapper.type", r"fp16", "the 0.x fp16 config trained in mixed precision (kept); the 1.x config does not"),
    (
        "model.test_cfg.crop_size",
        None,
        "0.x's (h, w) window (kept); the 1.x config's one int fails its slide inference",
    ),
    ("model.test_cfg.stride", None, "0.x's (h, w) stride (kept); the 1.x config's one int fails its slide inference"),
    ("train_dataloader.batch_size", None, "0.x's samples_per_gpu is kept (the 0.x file name says so); 1.x changed it"),
    ("train_cfg.max_iters", None, "0.x's schedule length is kept (its file name says it); the 1.x config changed it"),
    ("param_scheduler[].end", None, "0.x's schedule length is kept (its file name says it); the 1.x config changed it"),
    (
        "param_scheduler[].begin",
        None,
        "0.x's warm-up scaled the main schedule from iteration 0 (kept: both from 0, their factors multiply); "
        "the 1.x configs start the main schedule after the warm-up",
    ),
]

_SHAPES_0X = r"""
import json, sys, warnings
warnings.filterwarnings('ignore')
from mmcv import Config
BUILDER

sys.path.insert(0, TESTS)
from pretrained_free import strip_pretrained as strip
out = {}
for path in json.load(open(sys.argv[1])):
    try:
        cfg = Config.fromfile(path)
        strip(cfg.model)
        out[path] = {k: list(v.shape) for k, v in build(cfg.model).state_dict().items()}
    except Exception as exc:
        out[path] = f'{type(exc).__name__}: {exc}'[:300]
json.dump(out, open(sys.argv[2], 'w'))
"""


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:200]


def _datasets(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        if "type" in node and ("pipeline" in node or "dataset" in node or "datasets" in node):
            found.append(node)
        for key in ("dataset", "datasets"):
            if key in node:
                found += _datasets(node[key])
    elif isinstance(node, list):
        for value in node:
            found += _datasets(value)
    return found


def accepted(cfg: Any, registry: Any, work_dir: str) -> Any:
    """What the current tools/train.py builds from ``cfg`` before reading data, plus the rest lazily built
    parts (transforms, data sets without their files, evaluators, optimizer, schedulers). Returns the model."""
    import torch
    from mmengine.config import Config
    from mmengine.runner import Runner

    cfg = Config(copy.deepcopy(cfg.to_dict()))  # pretrained weights are read by init_weights, not while building
    cfg.work_dir = work_dir
    cfg.launcher = "none"
    cfg.log_level = "ERROR"  # the Runner's environment banner, per config, is noise here
    runner = Runner.from_cfg(cfg)
    for name in ("train_dataloader", "val_dataloader", "test_dataloader"):
        for ds in _datasets(cfg.get(name, {}).get("dataset")):
            for t in ds.get("pipeline", []) or []:
                registry.TRANSFORMS.build(copy.deepcopy(t))
            if ds.get("type") not in ("ConcatDataset", "RepeatDataset", "MultiImageMixDataset"):
                try:
                    registry.DATASETS.build({**copy.deepcopy(ds), "lazy_init": True, "pipeline": []})
                except (AssertionError, FileNotFoundError, RuntimeError):
                    # Some data sets check their files when built (PascalContextDataset's split file,
                    # MMPretrain's StanfordCars its folders):
                    # the arguments were accepted; the files are not here.
                    if os.path.exists(str(ds.get("data_root") or "/nonexistent")):
                        raise
    for t in cfg.get("tta_pipeline", []) or []:
        registry.TRANSFORMS.build(copy.deepcopy(t))
    for name in ("val_evaluator", "test_evaluator"):
        metrics = cfg.get(name)
        for metric in metrics if isinstance(metrics, (list, tuple)) else [metrics] if metrics else []:
            try:
                registry.METRICS.build(copy.deepcopy(metric))  # MMEngine's Evaluator takes one metric or a list
            except FileNotFoundError:
                # MMPose's CocoMetric reads its ann_file when built: the arguments were accepted
                if os.path.exists(str(metric.get("ann_file") or "/nonexistent")):
                    raise
    wrapper = copy.deepcopy(cfg.optim_wrapper)
    if wrapper.get("type") == "AmpOptimWrapper" and not torch.cuda.is_available():
        # AmpOptimWrapper refuses a CPU-only machine: its own arguments are checked, the rest built as
        # the plain wrapper.
        import inspect

        from mmengine.optim import AmpOptimWrapper

        extra = {k: v for k, v in wrapper.items() if k not in ("type", "optimizer", "paramwise_cfg", "constructor")}
        inspect.signature(AmpOptimWrapper.__init__).bind(None, optimizer=None, **extra)
        wrapper = {k: v for k, v in wrapper.items() if k not in ("loss_scale", "dtype", "use_fsdp")}
        wrapper["type"] = "OptimWrapper"
    optim = runner.build_optim_wrapper(wrapper)
    if cfg.get("param_scheduler"):
        schedulers = copy.deepcopy(cfg.param_scheduler)
        for s in schedulers if isinstance(schedulers, list) else [schedulers]:
            if s.get("convert_to_iter_based"):
                continue  # needs the training set's length: checked by the trainings, not here
            registry.PARAM_SCHEDULERS.build({**s, "optimizer": optim.optimizer})
    return runner.model


def as_built(cfg: dict[str, Any], package: str) -> dict[str, Any]:
    """A config with the defaults MMEngine's Runner and the toolbox fill in written out, so that two
    spellings of one set-up compare equal: MMPretrain's top-level ``data_preprocessor`` (the Runner
    gives it to the model), ``train_cfg=dict(by_epoch=True)`` (an EpochBasedTrainLoop), an
    ``optim_wrapper`` without a type (an OptimWrapper)."""
    cfg = copy.deepcopy(cfg)
    model = cfg.get("model")
    given = cfg.pop("data_preprocessor", None)
    if isinstance(model, dict) and isinstance(given, dict) and "data_preprocessor" not in model:
        model["data_preprocessor"] = {"type": {"mmpretrain": "ClsDataPreprocessor"}.get(package), **given}
        if model["data_preprocessor"]["type"] is None:
            model["data_preprocessor"].pop("type")
    train = cfg.get("train_cfg")
    if isinstance(train, dict) and "type" not in train and "by_epoch" in train:
        train["type"] = "EpochBasedTrainLoop" if train.pop("by_epoch") else "IterBasedTrainLoop"
    wrapper = cfg.get("optim_wrapper")
    if isinstance(wrapper, dict):
        wrapper.setdefault("type", "OptimWrapper")
    return cfg


def _type_name(module: Any) -> str:
    cls = type(module)
    if cls.__name__ == "_BatchNormXd":  # a Runner outside a distributed run turns SyncBN into it
        return "SyncBatchNorm"  # (MMEngine's revert_sync_batchnorm)
    if cls.__name__.endswith("0x") and any(base.__name__ == cls.__name__[:-2] for base in cls.__mro__[1:]):
        return cls.__name__[:-2]  # mmfix's 0.x copy of the current module (its layers; 0.x's initialisation)
    return cls.__name__


def _structure(model: Any) -> tuple[list[tuple[str, str]], dict[str, tuple[int, ...]]]:
    types = [(name, _type_name(module)) for name, module in model.named_modules()]
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    return types, shapes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("toolbox", choices=sorted(TOOLBOXES))
    parser.add_argument("configs", help="the 0.x toolbox's configs folder (with _base_/)")
    parser.add_argument("--python0x", help="the 0.x environment's python: strict loads of 0.x state dicts")
    parser.add_argument("--only", nargs="*", default=[], help="config folders to run (default: all)")
    parser.add_argument("--match", nargs="*", default=[], help="only configs whose path holds one of these")
    parser.add_argument("--show", type=int, default=40, help="difference classes to list")
    parser.add_argument("--out", help="write every result as JSON")
    args = parser.parse_args()
    package, registry_name, metafile, metafile_0x, builder_0x = TOOLBOXES[args.toolbox]
    cc.REGISTRY_MODULE = registry_name

    import importlib

    import torch.distributed as dist
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    registry = importlib.import_module(registry_name)
    importlib.import_module(f"{package}.utils").register_all_modules(init_default_scope=False)
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("gloo", rank=0, world_size=1)

    # every config below the model folders (MMClassification's RepVGG deploy configs sit one deeper)
    configs = sorted(
        p
        for p in glob.glob(os.path.join(args.configs, "*", "**", "*.py"), recursive=True)
        if "/_base_/" not in p
        and (not args.only or os.path.relpath(p, args.configs).split(os.sep)[0] in args.only)
        and (not args.match or any(m in os.path.relpath(p, args.configs) for m in args.match))
    )
    current = os.path.join(os.path.dirname(importlib.import_module(package).__file__), ".mim", "configs")
    old_index = cc.index(args.configs, os.path.dirname(args.configs), metafile_0x)
    new_index = cc.index(current, os.path.dirname(current), metafile)
    counterpart = {old_index[u]: new_index[u] for u in old_index.keys() & new_index.keys()}

    shapes: dict[str, Any] = {}
    if args.python0x:
        with tempfile.TemporaryDirectory() as tmp:
            listing, result = os.path.join(tmp, "configs.json"), os.path.join(tmp, "shapes.json")
            with open(listing, "w") as fh:
                json.dump(configs, fh)
            start = time.perf_counter()
            env = {k: v for k, v in os.environ.items() if not k.startswith(("MMFIX_", "PYTHONPATH", "MASTER_"))}
            subprocess.run(
                [
                    args.python0x,
                    "-c",
                    _SHAPES_0X.replace("BUILDER", builder_0x).replace("TESTS", repr(TESTS)),
                    listing,
                    result,
                ],
                check=True,
                env=env,
            )
            with open(result) as fh:
                shapes = json.load(fh)
            print(
                f"0.x state dicts of {len(configs)} configs made by the 0.x toolbox in {time.perf_counter() - start:.0f} s"
            )

    results: dict[str, dict[str, Any]] = {}
    work = tempfile.mkdtemp(prefix="family-zoo-")  # the Runners' work dirs, gone at exit
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    gaps: dict[str, list[str]] = collections.defaultdict(list)
    kept: dict[str, list[str]] = collections.defaultdict(list)
    for path in configs:
        name = os.path.relpath(path, args.configs)
        entry: dict[str, Any] = {}
        results[name] = entry
        try:
            cfg = Config.fromfile(path)
        except BaseException as exc:  # a ConfigConversionError is a SystemExit
            entry["load"] = _reason(exc)
            continue
        entry["load"] = "ok"
        try:
            with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
                model = accepted(cfg, registry, os.path.join(work, "w"))
        except Exception as exc:
            entry["accepted"] = _reason(exc)
            continue
        entry["accepted"] = "ok"
        saved = shapes.get(path)
        if isinstance(saved, str):
            entry["strict"] = f"0.x could not build it: {saved}"
        elif saved is not None:
            try:
                import torch
                from mmengine.runner.checkpoint import load_state_dict

                state = {k: torch.zeros(s) for k, s in saved.items()}
                own = model.state_dict()
                wrong = [k for k in state if k in own and tuple(own[k].shape) != tuple(state[k].shape)]
                if wrong:
                    raise RuntimeError(f"size mismatch: {', '.join(wrong[:4])}")
                # MMEngine's load, as the tools and init_model load: mmfix makes it strict for a model
                # built from a converted 0.x config (and accepts what it knows is no mismatch)
                load_state_dict(model, state)
                entry["strict"] = "ok"
            except (RuntimeError, mmfix.CheckpointMismatchError) as exc:
                entry["strict"] = str(exc).replace("\n", " ")[:400]
        official = counterpart.get(path)
        if official is None:
            continue
        try:
            cfg_new = Config.fromfile(official)
            with DefaultScope.overwrite_default_scope(cfg_new.get("default_scope")):
                other = cfg_new.model.to_dict()
                strip_pretrained(other)
                same_model = _structure(model) == _structure(registry.MODELS.build(other))
        except Exception as exc:
            entry["same"] = f"the current config did not build: {_reason(exc)}"
            continue
        entry["same_model"] = same_model
        converted, new = as_built(cfg.to_dict(), package), as_built(cfg_new.to_dict(), package)
        open_gaps, kept_here = [], []
        for sec in SECTIONS:
            for where, a, b in cc.differences(cc.section(converted, sec), cc.section(new, sec), sec):
                cls = cc._class(where)
                reason = next((r for c, pat, r in KEPT if c == cls and (pat is None or re.search(pat, name))), None)
                (kept_here if reason else open_gaps).append(cls)
                (kept[f"{cls}: {reason}"] if reason else gaps[cls]).append(f"{name}: {a!r} vs {b!r}"[:300])
        entry["same_setup"] = "identical" if not open_gaps and not kept_here else "kept" if not open_gaps else "open"
        entry["open"] = sorted(set(open_gaps))

    total = len(results)
    loaded = [n for n, e in results.items() if e["load"] == "ok"]
    ok = [n for n, e in results.items() if e.get("accepted") == "ok"]
    paired = [n for n, e in results.items() if "same_setup" in e]
    print(f"\n{total} official 0.x configs ({args.toolbox}, outside _base_/)")
    print(f"loaded through the automatic path: {len(loaded)}/{total}")
    print(f"accepted by the current tools/train.py's builders: {len(ok)}/{total}")
    reasons: dict[str, list[str]] = collections.defaultdict(list)
    for n, e in results.items():
        if e["load"] != "ok":
            reasons["load: " + e["load"]].append(n)
        elif e.get("accepted") != "ok":
            reasons["accepted: " + e["accepted"]].append(n)
    for reason, names in sorted(reasons.items(), key=lambda item: -len(item[1])):
        print(f"  {len(names):3d}  {reason}\n        e.g. {', '.join(names[:3])}")
    if paired:
        same_model = sum(results[n]["same_model"] for n in paired)
        tiers = collections.Counter(results[n]["same_setup"] for n in paired)
        print(f"\nwith a current official counterpart (same checkpoint URL): {len(paired)}")
        print(f"  same model (module types, parameter names and shapes): {same_model}/{len(paired)}")
        print(
            f"  same set-up: identical {tiers['identical']}, identical but for kept 0.x meanings "
            f"{tiers['kept']}, open differences {tiers['open']}"
        )
        for n in paired:
            if not results[n]["same_model"]:
                print(f"    model differs: {n}")
        print("  kept 0.x meanings (where the current official config changed the 0.x one):")
        for key, items in sorted(kept.items(), key=lambda item: -len(item[1])):
            print(f"    {len(items):4d}  {key}")
        print("  open differences:")
        for cls, items in sorted(gaps.items(), key=lambda item: -len(item[1]))[: args.show]:
            print(f"    {len(items):4d}  {cls}   e.g. {items[0]}")
    if shapes:
        strict = [n for n, e in results.items() if "strict" in e]
        good = [n for n in strict if results[n]["strict"] == "ok"]
        print(f"\n0.x state dicts loaded strictly into the converted models: {len(good)}/{len(strict)}")
        for n in strict:
            if results[n]["strict"] != "ok":
                print(f"    {n}: {results[n]['strict'][:300]}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
