"""Every official MMDetection 2.28.2 config through mmfix: how many load and build on 3.x, and whose 2.x weights load strictly.

    python benchmarks/legacy_zoo.py /tmp/mmdet2 [--mmdet2-python /tmp/mmdet2/bin/python]
        [--strict FOLDER … | --strict all] [--only FOLDER …] [--out results.json]

The first argument is the mmdet-2.28.2 wheel, a folder holding its configs, or the 2.x environment
(see ../shared/wheels/README.md). Every config outside ``_base_/`` and ``common/`` is loaded with
mmfix active (``Config.fromfile``, the automatic path) and its model built with MMDetection 3.x's
registry inside a one-rank gloo process group (SyncBN configs need one on 3.x too). Prints the
counts, then the configs that do not load or build, grouped by reason.

With ``--mmdet2-python`` (the real 2.28.2 environment), the configs of the ``--strict`` folders
(default: the families whose layout 3.x changed, rebuilt or moved) are also built by 2.x's own code
in that environment; each 2.x state dict (its keys and shapes) goes through mmfix's rename table
(``upgrade`` towards the 3.x model's keys) and is loaded into the converted 3.x model with
``load_state_dict(strict=True)`` (3.x's own ``_load_from_state_dict`` hooks included). Prints, per
family, how many load strictly, and the first keys that do not fit where one does not.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

os.environ.pop("MMFIX_DISABLE", None)
os.environ.setdefault("MMFIX_LOG_LEVEL", "ERROR")  # one "converted" line per config is noise here

from config_conversion import TESTS, build_converted, mmdet2_configs

import mmfix  # noqa: F401  (the automatic path, as in a user's train.py)

#: Folders whose 2.x state dicts 3.x changed: the rebuilt families and YOLACT.
REBUILT = ("detr", "deformable_detr", "maskformer", "mask2former", "yolact", "cascade_rpn")

# Run in the 2.x environment: build each config's model with 2.x's code (pretrained weights
# stripped: nothing downloads) and write its state dict's keys and shapes.
_SHAPES_2X = r"""
import json, sys
from mmcv import Config
from mmdet.models import build_detector

sys.path.insert(0, TESTS)
from pretrained_free import strip_pretrained as strip

out = {}
for path in json.load(open(sys.argv[1])):
    try:
        cfg = Config.fromfile(path)
        model = cfg.model  # a ConfigDict: 2.x's code reads it by attribute
        strip(model)
        if 'teacher_ckpt' in model:
            model['teacher_ckpt'] = None
        sd = build_detector(model).state_dict()
        out[path] = {k: list(v.shape) for k, v in sd.items()}
    except Exception as exc:
        out[path] = f'{type(exc).__name__}: {exc}'[:300]
json.dump(out, open(sys.argv[2], 'w'))
"""


def all_configs(root: str, only: list[str]) -> list[str]:
    found = []
    for folder in sorted(os.listdir(root)):
        if folder in ("_base_", "common") or (only and folder not in only):
            continue
        path = os.path.join(root, folder)
        if os.path.isdir(path):
            found += [os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".py")]
    return found


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:160]


def strict_load(model: Any, shapes: dict[str, list[int]]) -> tuple[bool, str]:
    """Load a 2.x state dict of these keys and shapes (zeros) strictly, after mmfix's renames."""
    import torch

    from mmfix._configs._layouts2x import upgrade

    done = upgrade({k: torch.zeros(s) for k, s in shapes.items()}, model.state_dict().keys())
    try:
        model.load_state_dict(done.state_dict, strict=True)
    except RuntimeError as exc:
        return False, str(exc).replace("\n", " ")[:400]
    renamed = ", ".join(f"{layout.name}: {n}" for layout, n in done.applied)
    return True, f"renamed {renamed}" if renamed else "as saved"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mmdet2", help="the mmdet-2.28.2 wheel, a folder with its configs, or the 2.x environment")
    parser.add_argument("--mmdet2-python", help="the real 2.28.2 environment's python: strict loads of 2.x weights")
    parser.add_argument(
        "--strict", nargs="*", default=list(REBUILT), help="config folders for the strict loads, or all"
    )
    parser.add_argument("--only", nargs="*", default=[], help="config folders to run (default: every folder)")
    parser.add_argument("--out", help="write every result as JSON")
    args = parser.parse_args()

    source = args.mmdet2
    site = os.path.join(source, "lib")
    if os.path.isdir(site):  # a venv: its site-packages' mmdet
        source = next(os.path.join(site, d, "site-packages") for d in os.listdir(site))
    root = mmdet2_configs(source)
    configs = all_configs(root, args.only)

    import torch.distributed as dist
    from mmengine.config import Config

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29531")
        dist.init_process_group("gloo", rank=0, world_size=1)

    strict_folders = None if args.strict == ["all"] else set(args.strict)
    shapes: dict[str, Any] = {}
    if args.mmdet2_python:
        wanted = [
            c for c in configs if strict_folders is None or os.path.basename(os.path.dirname(c)) in strict_folders
        ]
        with tempfile.TemporaryDirectory() as tmp:
            listing, result = os.path.join(tmp, "configs.json"), os.path.join(tmp, "shapes.json")
            with open(listing, "w") as fh:
                json.dump(wanted, fh)
            start = time.perf_counter()
            env = {k: v for k, v in os.environ.items() if not k.startswith(("MMFIX_", "PYTHONPATH", "MASTER_"))}
            subprocess.run(
                [args.mmdet2_python, "-c", _SHAPES_2X.replace("TESTS", repr(TESTS)), listing, result],
                check=True,
                cwd=os.path.dirname(root),
                env=env,
            )
            with open(result) as fh:
                shapes = json.load(fh)
            print(
                f"2.x state dicts of {len(wanted)} configs made by MMDetection 2.28.2 in {time.perf_counter() - start:.0f} s"
            )

    results: dict[str, dict[str, Any]] = {}
    for path in configs:
        name = os.path.relpath(path, root)
        entry: dict[str, Any] = {}
        results[name] = entry
        try:
            cfg = Config.fromfile(path).to_dict()
        except BaseException as exc:  # a ConfigConversionError is a SystemExit
            entry["load"] = _reason(exc)
            continue
        entry["load"] = "ok"
        try:
            how, model = build_converted(cfg["model"], os.path.dirname(root))
        except Exception as exc:
            entry["build"] = _reason(exc)
            continue
        entry["build"] = how
        saved = shapes.get(path)
        if isinstance(saved, str):
            entry["strict"] = f"2.x could not build it: {saved}"
        elif saved is not None:
            ok, detail = strict_load(model, saved)
            entry["strict"] = "ok" if ok else "no"
            entry["strict_detail"] = detail
        del model

    loaded = [n for n, e in results.items() if e["load"] == "ok"]
    built = [n for n, e in results.items() if str(e.get("build", "")).startswith("built")]
    print(f"\n{len(results)} official 2.28.2 configs (outside _base_/ and common/)")
    print(f"loaded through the automatic path: {len(loaded)}/{len(results)}")
    print(f"built with MMDetection 3.x's registry: {len(built)}/{len(results)}")
    teacher = [n for n, e in results.items() if e.get("build") == "built without the teacher's download"]
    if teacher:
        print(f"  {len(teacher)} of them with the teacher's checkpoint left out (it downloads while building)")
    reasons: dict[str, list[str]] = collections.defaultdict(list)
    for n, e in results.items():
        if e["load"] != "ok":
            reasons["load: " + e["load"]].append(n)
        elif not str(e.get("build", "")).startswith("built"):
            reasons["build: " + e["build"]].append(n)
    for reason, names in sorted(reasons.items(), key=lambda item: -len(item[1])):
        print(f"  {len(names):3d}  {reason}\n        e.g. {', '.join(names[:3])}")

    if shapes:
        print("\n2.x state dicts loaded strictly into the converted 3.x models, per family:")
        families: dict[str, list[tuple[str, dict[str, Any]]]] = collections.defaultdict(list)
        for n, e in results.items():
            if "strict" in e:
                families[n.split("/")[0]].append((n, e))
        for family, entries in sorted(families.items()):
            ok = sum(e["strict"] == "ok" for _, e in entries)
            how = sorted({e.get("strict_detail", "") for _, e in entries if e["strict"] == "ok"})
            print(f"  {family:<20} {ok}/{len(entries)}  ({'; '.join(how)})")
            for n, e in entries:
                if e["strict"] != "ok":
                    print(f"      {n}: {e.get('strict_detail', e['strict'])[:300]}")
        missing = [
            n
            for n, e in results.items()
            if "strict" not in e and any(n.startswith(f + "/") for f in (strict_folders or [n.split('/')[0]]))
        ]
        if missing:
            print(f"  not compared (did not build on 3.x): {', '.join(missing)}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
