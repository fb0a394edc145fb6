"""Shared pieces of the OpenMMLab-family tests: each toolbox's real 3.x-era tools and a tiny config.

The toolboxes (MMSegmentation 1.2.2, MMPretrain 1.2.0, MMPose 1.3.2, MMDetection3D 1.4.0)
are test requirements (requirements/toolboxes.txt, installed --no-deps). Locally a missing
install skips these tests; CI sets REQUIRE_TOOLBOXES (1 for all, or a comma-separated list of
packages), so there they fail instead.

MMPose imports xtcocotools (its COCO API) at import, whose only binary wheels are built for
numpy 1; building it needs a C compiler, which the README's test command must not need. So an
environment with numpy 2 (CI's main one) skips the tests that run MMPose's tools, saying why;
they run wherever xtcocotools imports: in CI, scripts/matrix.sh's `mmpose` cell (numpy 1), with
REQUIRE_TOOLBOXES=mmpose, which makes the skip a failure.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Toolbox:
    name: str  # the rules' name in mmfix._launch.rules
    package: str  # the import name whose .mim/tools hold the 3.x tools
    task: str  # ToolboxToyModel's prediction shape
    evaluator: str  # the config's test_evaluator (the toolbox's own metric)
    scope: str | None  # None: the toolbox's metric is registered in MMEngine's root (toolbox_toys)
    visualizer: str = "Visualizer"


TOOLBOXES = {
    "mmseg": Toolbox(
        "mmseg", "mmseg", "seg", "dict(type='IoUMetric', iou_metrics=['mIoU'])", "mmseg", "SegLocalVisualizer"
    ),  # as MMSegmentation's configs: it has the alpha --opacity sets
    "mmpretrain": Toolbox("mmpretrain", "mmpretrain", "cls", "dict(type='Accuracy', topk=(1,))", None),
    "mmpose": Toolbox("mmpose", "mmpose", "pose", "dict(type='EPE')", None),
    # MMDetection3D's metrics need real point-cloud data sets (KITTI, nuScenes …): its tools run
    # here with the bundled example metric, which takes `metric=` like theirs.
    "mmdet3d": Toolbox("mmdet3d", "mmdet3d", "box", "dict(type='ToyBoxMetric', metric=['mse', 'acc'])", "mmdet3d"),
}


def _required(package: str) -> bool:
    wanted = os.environ.get("REQUIRE_TOOLBOXES", "")
    return wanted == "1" or package in wanted.split(",")


def _missing(package: str, runs: bool) -> str | None:
    """Why ``package``'s tools cannot be read (or, with ``runs``, run) here, or None."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return f"{package} not installed (requirements/toolboxes.txt)"
    if package == "mmpose" and runs:
        try:
            import xtcocotools.mask  # noqa: F401
        except (ImportError, ValueError) as exc:  # ValueError: built for numpy 1 ("dtype size changed")
            return (
                f"MMPose needs xtcocotools, which is not usable here ({type(exc).__name__}: {exc}); its binary "
                "wheels are built for numpy 1; with numpy 1 and xtcocotools installed the MMPose tests run"
            )
    return None


def tools_dir(package: str, runs: bool = True) -> Path:
    """The installed package's .mim/tools (its 3.x-era tools/train.py and test.py).

    ``runs=False``: the caller only reads the tools (their parsers), without importing the toolbox."""
    why = _missing(package, runs)
    if why is not None:
        if _required(package):
            raise RuntimeError(f"REQUIRE_TOOLBOXES={os.environ['REQUIRE_TOOLBOXES']} but {why}.")
        pytest.skip(why)
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / ".mim" / "tools"


def write_config(path: Path, toolbox: Toolbox, max_epochs: int = 2) -> Path:
    imports = ["toolbox_toys", "ddp_probe"] + (["tinydet"] if toolbox.task == "box" else [])
    path.write_text(f"""
custom_imports = dict(imports={imports!r}, allow_failed_imports=False)
model = dict(type='ToolboxToyModel', task='{toolbox.task}')
_data = dict(batch_size=4, num_workers=0, persistent_workers=False, collate_fn=dict(type='pseudo_collate'))
train_dataloader = dict(**_data, sampler=dict(type='DefaultSampler', shuffle=True),
                        dataset=dict(type='ToolboxToyDataset', task='{toolbox.task}', num_samples=16))
val_dataloader = dict(**_data, sampler=dict(type='DefaultSampler', shuffle=False),
                      dataset=dict(type='ToolboxToyDataset', task='{toolbox.task}', num_samples=8, seed=1))
test_dataloader = val_dataloader
val_evaluator = {toolbox.evaluator}
test_evaluator = val_evaluator
train_cfg = dict(by_epoch=True, max_epochs={max_epochs}, val_interval=1)
val_cfg = dict()
test_cfg = dict()
optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.05))
default_scope = {toolbox.scope!r}
default_hooks = dict(logger=dict(type='LoggerHook', interval=1),
                     checkpoint=dict(type='CheckpointHook', interval=1),
                     sampler_seed=dict(type='DistSamplerSeedHook'))
visualizer = dict(type='{toolbox.visualizer}', vis_backends=[dict(type='LocalVisBackend')])
env_cfg = dict(dist_cfg=dict(backend='nccl'))
randomness = dict(seed=0)
auto_scale_lr = dict(enable=False, base_batch_size=8)
custom_hooks = [dict(type='RankProbeHook')]
""")
    return path


def toolbox_env(toolbox: Toolbox) -> dict[str, str]:
    """PYTHONPATH for the toy modules; the toolbox's own metric in the root registry where its
    configs run without a scope (only that toolbox's: MMPose's import needs xtcocotools, which
    a run of another toolbox must not need)."""
    return {
        # the inherited PYTHONPATH kept (a checkout run from its source tree, not an install)
        "PYTHONPATH": os.pathsep.join(
            [str(REPO / "tests"), str(REPO / "examples"), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        "TOY_ROOT_METRICS": toolbox.name if toolbox.scope is None else "",
    }
