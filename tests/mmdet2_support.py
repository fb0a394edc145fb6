"""Real MMDetection 2.28.2 beside the test environment: 2.x models, their weights and predictions.

The 2.x environment is the one ``../shared/wheels/README.md`` describes (torch 2.13.0 CPU,
mmcv-full 1.7.2 with its compiled ops, mmdet 2.28.2; about 90 s to build), with MMSegmentation
0.30.0 and MMClassification 0.25.0 added (``FAMILY_0X``, pure Python, --no-deps). The tests use
``$MMFIX_MMDET2_ENV`` (a venv folder) when set, else ``/tmp/mmdet2`` when it holds a working
2.28.2, else build one once per session under pytest's temporary folder. Without the wheels the
tests skip, saying why; CI sets REQUIRE_MMDET2=1, so there they fail instead.

``predict_2x`` runs a 2.x config's model in that environment (seeded weights, written as a 2.x
state dict); ``predict_3x`` runs the same config converted by mmfix on MMDetection 3.3.0 with those
weights; ``assert_same_detections`` compares the two predictions. A test file with several cases
builds their arguments with ``job_2x``/``job_3x`` and runs each side once with ``run_batch``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "mmdet2_worker.py"
WHEELS = Path(os.environ.get("MMFIX_MMCV_WHEELS") or REPO.parent / "shared" / "wheels")
_WHEEL_FILES = ("mmcv_full-1.7.2-cp311-cp311-linux_x86_64.whl", "mmdet-2.28.2-py3-none-any.whl")
_PATCH = "torchvision-0.28.0-cu130-on-cpu-torch.patch"
_CHECK = "import mmdet, mmcv.ops; assert mmdet.__version__ == '2.28.2', mmdet.__version__"
# The family's 0.x toolboxes beside it (pure Python, on the same mmcv-full 1.7.2): 0.x models, their
# checkpoints and predictions for mmfix's conversion of their configs (tests/family0x_support.py).
FAMILY_0X = ("mmsegmentation==0.30.0", "mmcls==0.25.0", "mmpose==0.29.0")
FAMILY_0X_DEPS = (
    "prettytable==3.18.0",  # MMSegmentation 0.x's evaluation tables (imported by its datasets)
    # MMPose 0.29's datasets (its pipelines import them): COCO tools with a numpy 1 wheel for cp311
    "xtcocotools==1.14.3",
    "json-tricks==3.17.3",
    "munkres==3.0.0",
)
# MMPose 0.29.0 asserts mmcv <= 1.7.0 at import; the environment's mmcv-full is 1.7.2 (the last 1.x,
# which MMSegmentation 0.30 and MMClassification 0.25 accept): the bound is lifted in the installed
# file, as the wheels' README patches torchvision, and said here.
_MMPOSE_BOUND = ("mmcv_maximum_version = '1.7.0'", "mmcv_maximum_version = '1.7.2'")
_CHECK_0X = (
    "import mmseg, mmcls, mmpose; "
    "assert (mmseg.__version__, mmcls.__version__, mmpose.__version__) == ('0.30.0', '0.25.0', '0.29.0')"
)


def _unavailable(reason: str) -> None:
    message = f"real MMDetection 2.28.2 (to compare 2.x models with) is not available: {reason}"
    if os.environ.get("REQUIRE_MMDET2") == "1":
        pytest.fail("REQUIRE_MMDET2=1 but " + message)
    pytest.skip(message)


def _works(python: Path, check: str = _CHECK) -> bool:
    if not python.is_file():
        return False
    return subprocess.run([str(python), "-c", check], capture_output=True, timeout=300).returncode == 0


def _with_family_0x(python: Path) -> Path:
    """``python``'s environment with the 0.x toolboxes added where it lacks them (pure-Python wheels)."""
    if _works(python, _CHECK_0X):
        return python
    for args in (("--no-deps", *FAMILY_0X), FAMILY_0X_DEPS):
        step = [str(python), "-m", "pip", "install", "-q", "--no-compile", *args]
        proc = subprocess.run(step, capture_output=True, text=True, timeout=1200)
        if proc.returncode != 0:
            _unavailable(f"adding the 0.x toolboxes failed: {' '.join(step[3:])}:\n{proc.stderr[-2000:]}")
    _lift_mmpose_bound(python)
    if not _works(python, _CHECK_0X):
        _unavailable(f"{python} does not import MMSegmentation 0.30.0, MMClassification 0.25.0 and MMPose 0.29.0")
    return python


def _lift_mmpose_bound(python: Path) -> None:
    proc = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('mmpose').origin)"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        _unavailable(f"MMPose 0.29.0 is not installed in {python}: {proc.stderr[-1000:]}")
    init = Path(proc.stdout.strip().splitlines()[-1])
    text = init.read_text()
    if _MMPOSE_BOUND[0] in text:
        init.write_text(text.replace(*_MMPOSE_BOUND))


def find_or_build(build_root: Path) -> Path:
    """The 2.x environment's python: an existing one, or one built from the wheels (README recipe)."""
    venv = build_root / "mmdet2"
    for candidate in (os.environ.get("MMFIX_MMDET2_ENV"), "/tmp/mmdet2", str(venv)):
        if candidate and _works(Path(candidate) / "bin" / "python"):
            return _with_family_0x(Path(candidate) / "bin" / "python")
    missing = [name for name in (*_WHEEL_FILES, _PATCH) if not (WHEELS / name).is_file()]
    if missing:
        _unavailable(f"{', '.join(missing)} not in {WHEELS} (set MMFIX_MMCV_WHEELS to the wheels' folder)")
    python = venv / "bin" / "python"
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",  # Python compiles what the tests import (pip would compile all of torch)
            "torch==2.13.0",
            "numpy==1.26.0",
            "torchvision==0.28.0",
            *(str(WHEELS / name) for name in _WHEEL_FILES),
        ],
    ]
    for step in steps:
        proc = subprocess.run(step, capture_output=True, text=True, timeout=1200)
        if proc.returncode != 0:
            _unavailable(f"building it failed: {' '.join(step[:4])} …:\n{proc.stderr[-2000:]}")
    site = next((venv / "lib").glob("python3*/site-packages"))
    with open(WHEELS / _PATCH) as patch:
        proc = subprocess.run(["patch", "-p1"], stdin=patch, cwd=site, capture_output=True, text=True)
    if proc.returncode != 0 or not _works(python):
        _unavailable(f"the built environment does not import mmdet 2.28.2: {proc.stdout}{proc.stderr}")
    return _with_family_0x(python)


# The official configs' own normalisation, written out (a 2.x child config cannot splice a base
# variable into a dict).
PYTORCH_NORM = "dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)"
CAFFE_NORM = "dict(mean=[103.53, 116.28, 123.675], std=[1.0, 1.0, 1.0], to_rgb=False)"

# A small test scale (CPU time): 256 x 384 after the keep-ratio resize of the 320 x 480 seeded
# image, enough encoder tokens for the two-stage Deformable DETR's 300 proposals (2040 over four
# levels). Normalisation and Pad divisor as the official test pipeline has them.
_SMALL_TEST_PIPELINE = """
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiScaleFlipAug', img_scale={scales}, flip={flip}, transforms=[
        dict(type='Resize', keep_ratio=True),
        dict(type='RandomFlip'),
        dict(type='Normalize', **{norm}),
        dict(type='Pad', size_divisor={pad}),
        dict(type='ImageToTensor', keys=['img']),
        dict(type='Collect', keys=['img']),
    ]),
]
data = dict(val=dict(pipeline=test_pipeline), test=dict(pipeline=test_pipeline))
"""


def child_config(
    path: Path,
    official: Path,
    overrides: str = "",
    norm: str | None = None,
    pad: int | None = None,
    scales: Any = (384, 256),
    flip: bool = False,
) -> Path:
    """A user-style 2.x config at ``path`` on top of ``official``: ``overrides`` (config text),
    and, given ``norm``, a test pipeline at ``scales`` (one or a list: 2.x's multi-scale test)."""
    text = f"_base_ = [{str(official)!r}]\n{overrides}\n"
    if norm is not None:
        text += _SMALL_TEST_PIPELINE.format(norm=norm, pad=pad, scales=scales, flip=flip)
    path.write_text(text)
    return path


def seeded_image(seed: int, height: int = 320, width: int = 480) -> np.ndarray:
    """A BGR uint8 image with a few flat rectangles on noise (both sides read the same array)."""
    rng = np.random.RandomState(seed)
    image = rng.randint(0, 60, size=(height, width, 3)).astype(np.uint8)
    for _ in range(4):
        y0, x0 = rng.randint(0, height // 2), rng.randint(0, width // 2)
        image[y0 : y0 + rng.randint(20, height // 2), x0 : x0 + rng.randint(20, width // 2)] = rng.randint(0, 255, 3)
    return image


def _run(python: Path | str, args: list[str], env: dict[str, str], timeout: float) -> None:
    proc = subprocess.run([str(python), str(WORKER), *args], capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args[:2])} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )


def _env_2x() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MMFIX_", "PYTHONPATH"))}


def _env_3x(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    from conftest import clean_env

    return clean_env(PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(extra_env or {}))


def job_2x(config: Path, image: Path, out: Path, seed: int = 0, scale_params: tuple[str, ...] = ()) -> list[str]:
    """The worker's arguments for 2.28.2's prediction (``predict_2x``); creates ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    scaling = [arg for rule in scale_params for arg in ("--scale-params", rule)]
    return ["2x", str(config), str(image), str(out), "--seed", str(seed), *scaling]


def job_3x(
    config: Path, image: Path, weights: Path | None, out: Path, load: str = "upgrade", tta: str | None = None
) -> list[str]:
    """The worker's arguments for mmfix + 3.3.0's prediction (``predict_3x``); creates ``out``.
    ``load="none"``: the model as built (no weights)."""
    out.mkdir(parents=True, exist_ok=True)
    return ["3x", str(config), str(image), str(out), "--weights", str(weights), "--load", load] + (
        ["--tta", tta] if tta else []
    )


def run_batch(
    jobs: list[list[str]], python: Path | None = None, extra_env: dict[str, str] | None = None, timeout: float = 1200
) -> None:
    """Runs ``jobs`` (all ``job_2x``, in ``python``: the 2.x environment; or all ``job_3x``) in one
    worker process; each job's result is then read with ``result_of(out)``. One interpreter and one
    MMDetection import for a whole test file instead of one per case (issue 29)."""
    sides = {job[0] for job in jobs}
    assert sides in ({"2x"}, {"3x"}), f"a batch runs one side: {sorted(sides)}"
    listing = Path(jobs[0][3]).parent / f"jobs-{len(jobs)}-{os.getpid()}.json"
    listing.write_text(json.dumps(jobs))
    if sides == {"2x"}:
        assert python is not None, "2.x jobs run in the 2.x environment: pass its python"
        _run(python, ["batch", str(listing)], _env_2x(), timeout)
    else:
        _run(sys.executable, ["batch", str(listing)], _env_3x(extra_env), timeout)


def result_of(out: Path) -> dict[str, Any]:
    """The prediction a job wrote to ``out`` (raises AssertionError with its traceback if it failed)."""
    error = out / "error.txt"
    if error.exists():
        raise AssertionError(f"the prediction in {out} failed:\n{error.read_text()[-6000:]}")
    return torch.load(out / "result.pt", weights_only=True)


def load_report(out: Path) -> dict[str, Any]:
    """What a 3.x job's weight loading renamed (``load.json``)."""
    return json.loads((out / "load.json").read_text())


def predict_2x(
    python: Path,
    config: Path,
    image: Path,
    out: Path,
    seed: int = 0,
    timeout: float = 600,
    scale_params: tuple[str, ...] = (),
) -> dict[str, Any]:
    """2.28.2's prediction for ``config`` on ``image``; writes ``out/state_dict.pth`` (2.x layout).
    ``scale_params``: ``PATTERN=FACTOR`` rules applied to the seeded weights before anything."""
    _run(python, job_2x(config, image, out, seed, scale_params), _env_2x(), timeout)
    return result_of(out)


def predict_3x(
    config: Path,
    image: Path,
    weights: Path,
    out: Path,
    load: str = "upgrade",
    timeout: float = 600,
    extra_env: dict[str, str] | None = None,
    tta: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """mmfix + MMDetection 3.3.0's prediction for the same 2.x config and weights, and the load report."""
    _run(sys.executable, job_3x(config, image, weights, out, load, tta), _env_3x(extra_env), timeout)
    return result_of(out), load_report(out)


def assert_same_detections(
    expected: dict[str, Any], actual: dict[str, Any], atol: float = 1e-2, score_atol: float = 1e-4
) -> None:
    """Equal as sets of detections: each 2.x detection has a 3.x one with its label, box (within
    ``atol`` pixels) and score (within ``score_atol``), and the counts agree. Matching rather than
    sorting: random weights give near-equal scores whose order float rounding may swap."""
    # no detections: 2.x's result lists have no masks to stack, 3.x's an empty N x H x W tensor
    expected, actual = ({k: v for k, v in r.items() if not (k == "masks" and len(v) == 0)} for r in (expected, actual))
    assert set(expected) == set(actual), f"different outputs: 2.x {sorted(expected)}, 3.x {sorted(actual)}"
    if "panoptic" in expected:
        differ = (expected["panoptic"] != actual["panoptic"]).float().mean().item()
        assert differ < 1e-3, f"panoptic maps differ at {differ:.2%} of the pixels"
    if "scores" not in expected:
        return
    n = len(expected["scores"])
    assert len(actual["scores"]) == n, f"2.x gave {n} detections, 3.x {len(actual['scores'])}"
    assert n > 0, "no detections to compare: lower the config's score threshold"
    free = torch.ones(n, dtype=torch.bool)
    for i in torch.argsort(expected["scores"], descending=True).tolist():
        # isclose: a box side both sides put at the same infinity (overflowing random weights) agrees
        close = (
            free
            & (actual["labels"] == expected["labels"][i])
            & torch.isclose(actual["scores"], expected["scores"][i], rtol=0, atol=score_atol)
            & torch.isclose(actual["bboxes"], expected["bboxes"][i], rtol=0, atol=atol).all(dim=1)
        )
        assert close.any(), (
            f"2.x detection {i} (label {int(expected['labels'][i])}, score {float(expected['scores'][i]):.6f}, "
            f"box {expected['bboxes'][i].tolist()}) has no equal in 3.x's"
        )
        if "mask_scores" in expected:  # Mask Scoring R-CNN: each mask's own score, too
            close &= (actual["mask_scores"] - expected["mask_scores"][i]).abs() <= score_atol
            assert close.any(), f"2.x detection {i}'s mask score {float(expected['mask_scores'][i]):.6f} differs in 3.x"
        candidates = torch.nonzero(close).flatten()
        if "masks" not in expected:
            free[int(candidates[0])] = False
            continue
        # Equal boxes and scores can carry different masks (random weights tie often): take the
        # candidate whose mask is nearest, then require it to be equal.
        differ = (actual["masks"][candidates] != expected["masks"][i]).flatten(1).float().mean(dim=1)
        best = int(torch.argmin(differ))
        assert differ[best] < 1e-3, f"the mask of detection {i} differs at {float(differ[best]):.2%} of its pixels"
        free[int(candidates[best])] = False


if __name__ == "__main__":
    # `python tests/mmdet2_support.py FOLDER`: build (or find) the environment ahead of the tests
    # (.ci/run does, beside its other set-up) and print the venv folder for MMFIX_MMDET2_ENV.
    try:
        print(find_or_build(Path(sys.argv[1]).resolve()).parents[1])
    except (pytest.skip.Exception, pytest.fail.Exception) as exc:
        sys.exit(f"mmdet2_support: {exc}")
