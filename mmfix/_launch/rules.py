"""The legacy flags of each OpenMMLab toolbox, as data: one row per flag per toolbox.

Each row says how the flag was spelled in the toolbox's last pre-MMEngine release,
how many values it took, and what it means on the MMEngine-era tools (its ``action``
and ``target``). The translator (``translate.py``) interprets the actions; the
topology part (``topology.py``) owns ``--gpus``/``--gpu-ids``/``--gpu-id``.

Releases read: MMDetection 2.28.2, MMSegmentation 0.30.0, MMClassification 0.25.0,
MMPose 0.29.0, MMDetection3D 1.0.0rc6 (their ``.mim/tools/train.py`` and ``test.py``),
against MMDetection 3.3.0, MMSegmentation 1.2.2, MMPretrain 1.2.0, MMPose 1.3.2 and
MMDetection3D 1.4.0.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable

from .plan import ParserInfo

#: What a row's flag does on the 3.x tools (interpreted in translate.py):
#: topology   processes/devices (topology.py)
#: resume     --resume-from P: ``--resume P`` or ``--resume`` + load_from=P, by the shape of --resume
#: auto       --auto-resume: bare ``--resume``
#: cfg        ``--cfg-options target=VALUE`` (a flag: ``value``; one value: checked by ``kind``;
#:            several: ``[a,b]``)
#: pairs      key=value pairs under the cfg prefix ``target`` ("" = the config root)
#: option     the 3.x option ``target`` (value kept), if this tool's parser has it
#: no_validate val_cfg/val_dataloader/val_evaluator=None (unless the parser knows --no-validate)
#: format     format-only evaluation; ``target`` is the metric's output-prefix key
#: collect    --tmpdir: test_evaluator.collect_dir (checked against the config's metric)
#: evaluators the metrics come from the config in 3.x: checked against its test_evaluator types
#: device     --device cpu|cuda|…
#: out_items  MMClassification's --out-items -> MMPretrain's --out-item
#: out_pkl    a .pkl --out whose 3.x meaning differs: refused with ``note``
#: error      no 3.x meaning: refused with ``note``
ACTIONS = (
    "topology",
    "resume",
    "auto",
    "cfg",
    "pairs",
    "option",
    "no_validate",
    "format",
    "collect",
    "evaluators",
    "device",
    "out_items",
    "out_pkl",
    "error",
)


@dataclass(frozen=True)
class Flag:
    spellings: tuple[str, ...]
    nargs: object  # 0: a flag, 1: one value, "+": one or more
    action: str
    target: str = ""
    note: str = ""
    value: str = "True"  # what a 0-nargs ``cfg`` flag sets
    kind: str = ""  # "int" / "float": the value is checked before anything starts
    # evaluators: 2.x metric name -> the 3.x metric types that compute it ("A|B")
    # cfg with "+": the values allowed (empty: any)
    # pairs: 2.x key -> 3.x key ("" = dropped, with the reason after a colon)
    table: tuple[tuple[str, str], ...] = ()
    old_name_of: str = ""  # pairs: the option this flag was the old name of (both at once was an error)

    @property
    def name(self) -> str:
        return self.spellings[0]


@dataclass(frozen=True)
class RuleSet:
    name: str
    label: str  # "MMSegmentation 0.x -> 1.x"
    markers: tuple[str, ...]  # package / checkout names in a script's path or imports
    train: tuple[Flag, ...]
    test: tuple[Flag, ...]
    # spelling -> row per tool, filled on first use (the tables are constants)
    _index: dict[str, dict[str, Flag]] = field(default_factory=dict, compare=False, repr=False)

    def flags(self, tool: str) -> tuple[Flag, ...]:
        return self.test if tool == "test" else self.train

    def lookup(self, tool: str) -> dict[str, Flag]:
        """spelling -> row, for ``tool`` ("train"/"test")."""
        if tool not in self._index:
            self._index[tool] = {s: row for row in self.flags(tool) for s in row.spellings}
        return self._index[tool]


_GPUS = Flag(("--gpus",), 1, "topology", note="N processes under torchrun + --launcher pytorch")
_GPU_IDS = Flag(("--gpu-ids",), "+", "topology", note="CUDA_VISIBLE_DEVICES=a,b,… and one process per id")
_GPU_ID = Flag(("--gpu-id",), 1, "topology", note="CUDA_VISIBLE_DEVICES=k, one process")
_RESUME = Flag(("--resume-from",), 1, "resume", note="--resume P, or --resume + load_from=P where --resume is a flag")
_AUTO = Flag(("--auto-resume",), 0, "auto", note="bare --resume (latest checkpoint in the work dir)")
_NO_VAL = Flag(("--no-validate",), 0, "no_validate", note="val_cfg/val_dataloader/val_evaluator=None")
_SEED = Flag(("--seed",), 1, "cfg", "randomness.seed", kind="int")
_DET = Flag(("--deterministic",), 0, "cfg", "randomness.deterministic")
_DIFF = Flag(("--diff-seed", "--diff_seed"), 0, "cfg", "randomness.diff_rank_seed")
_DIFF_US = Flag(("--diff_seed", "--diff-seed"), 0, "cfg", "randomness.diff_rank_seed")
_LOAD = Flag(("--load-from",), 1, "cfg", "load_from")
_OPTIONS_TRAIN = Flag(
    ("--options",), "+", "pairs", "", note="the old name of --cfg-options", old_name_of="--cfg-options"
)
_GPU_COLLECT = Flag(("--gpu-collect",), 0, "cfg", "test_evaluator.collect_device", value="gpu")
_TMPDIR = Flag(("--tmpdir",), 1, "collect", "test_evaluator.collect_dir")
_FUSE = Flag(
    ("--fuse-conv-bn",),
    0,
    "error",
    note="3.x tools/test.py has no conv-bn fusion (it is a TODO there); "
    "drop the flag, or fuse the model yourself with mmcv.cnn.fuse_conv_bn before testing",
)
_AUTOSCALE = Flag(
    ("--autoscale-lr",),
    0,
    "option",
    "--auto-scale-lr",
    note="3.x scales the lr by total batch size / the config's auto_scale_lr.base_batch_size "
    "(2.x scaled it by the number of GPUs / 8)",
)
_DET_EVAL_OPTIONS = (("jsonfile_prefix", "outfile_prefix"),)

MMDET = RuleSet(
    "mmdet",
    "MMDetection 2.x -> 3.x",
    ("mmdet", "mmdetection"),
    train=(_RESUME, _LOAD, _SEED, _DET, _DIFF, _NO_VAL, _OPTIONS_TRAIN, _AUTO, _GPUS, _GPU_IDS, _GPU_ID),
    test=(
        Flag(("--eval",), "+", "cfg", "test_evaluator.metric"),
        Flag(("--format-only",), 0, "format", "outfile_prefix"),
        Flag(("--eval-options",), "+", "pairs", "test_evaluator.", table=_DET_EVAL_OPTIONS),
        Flag(
            ("--options",),
            "+",
            "pairs",
            "test_evaluator.",
            note="in 2.x test.py the old name of --eval-options",
            table=_DET_EVAL_OPTIONS,
            old_name_of="--eval-options",
        ),
        _GPU_COLLECT,
        Flag(("--show-score-thr",), 1, "cfg", "default_hooks.visualization.score_thr", kind="float"),
        _TMPDIR,
        _GPU_ID,
        _GPU_IDS,
        _GPUS,
        _FUSE,
    ),
)

_SEG_METRICS = (("mIoU", ""), ("mDice", ""), ("mFscore", ""))
MMSEG = RuleSet(
    "mmseg",
    "MMSegmentation 0.x -> 1.x",
    ("mmseg", "mmsegmentation"),
    train=(_LOAD, _RESUME, _NO_VAL, _GPUS, _GPU_IDS, _GPU_ID, _SEED, _DIFF_US, _DET, _OPTIONS_TRAIN, _AUTO),
    test=(
        Flag(("--aug-test",), 0, "option", "--tta", note="the config's tta_pipeline/tta_model"),
        Flag(
            ("--out",),
            1,
            "out_pkl",
            note="in MMSegmentation 1.x --out is the directory prediction images are "
            "written to, not a results .pkl; give a directory (and add --cfg-options "
            "test_evaluator.format_only=True to only write them)",
        ),
        Flag(("--format-only",), 0, "format", "output_dir"),
        Flag(
            ("--eval",),
            "+",
            "cfg",
            "test_evaluator.iou_metrics",
            table=_SEG_METRICS,
            note="IoUMetric.iou_metrics; 'cityscapes' is CityscapesMetric in 1.x: set test_evaluator in the config",
        ),
        _GPU_COLLECT,
        _GPU_ID,
        _TMPDIR,
        Flag(
            ("--options",),
            "+",
            "pairs",
            "",
            note="in 0.x test.py the old name of --cfg-options",
            old_name_of="--cfg-options",
        ),
        Flag(
            ("--eval-options",),
            "+",
            "pairs",
            "test_evaluator.",
            table=(
                ("imgfile_prefix", "output_dir"),
                (
                    "efficient_test",
                    (":1.x evaluation is always memory-efficient (it keeps per-image statistics, not predictions)"),
                ),
            ),
        ),
        Flag(("--opacity",), 1, "cfg", "visualizer.alpha", kind="float"),
    ),
)

_CLS_DEVICE = Flag(("--device",), 1, "device", note="MMEngine picks the device itself; cpu hides the GPUs")
MMPRETRAIN = RuleSet(
    "mmpretrain",
    "MMClassification 0.x -> MMPretrain 1.x",
    ("mmpretrain", "mmcls", "mmclassification"),
    train=(
        _RESUME,
        _NO_VAL,
        _CLS_DEVICE,
        _GPUS,
        _GPU_IDS,
        _GPU_ID,
        Flag(
            ("--ipu-replicas",),
            1,
            "error",
            note="MMPretrain 1.x (MMEngine) has no IPU support; train on GPUs or the CPU",
        ),
        _SEED,
        _DIFF,
        _DET,
    ),
    test=(
        Flag(("--out-items",), "+", "out_items", "--out-item"),
        Flag(
            ("--metrics",),
            "+",
            "evaluators",
            table=(
                ("accuracy", "Accuracy"),
                ("precision", "SingleLabelMetric|MultiLabelMetric"),
                ("recall", "SingleLabelMetric|MultiLabelMetric"),
                ("f1_score", "SingleLabelMetric|MultiLabelMetric"),
                ("support", "SingleLabelMetric|MultiLabelMetric"),
                ("mAP", "AveragePrecision"),
                ("CP", "MultiLabelMetric"),
                ("CR", "MultiLabelMetric"),
                ("CF1", "MultiLabelMetric"),
                ("OP", "MultiLabelMetric"),
                ("OR", "MultiLabelMetric"),
                ("OF1", "MultiLabelMetric"),
            ),
        ),
        _GPU_COLLECT,
        _TMPDIR,
        Flag(("--metric-options",), "+", "pairs", "test_evaluator.", note="e.g. topk=1,5 -> Accuracy.topk"),
        Flag(
            ("--show-options",),
            "+",
            "error",
            note="1.x draws with the config's visualizer: set its options with --cfg-options visualizer.KEY=VALUE",
        ),
        _GPU_IDS,
        _GPU_ID,
        _CLS_DEVICE,
    ),
)

MMPOSE = RuleSet(
    "mmpose",
    "MMPose 0.x -> 1.x",
    ("mmpose",),
    train=(_RESUME, _NO_VAL, _GPUS, _GPU_IDS, _GPU_ID, _SEED, _DIFF_US, _DET, _AUTOSCALE),
    test=(
        _FUSE,
        _GPU_ID,
        Flag(
            ("--eval",),
            "+",
            "evaluators",
            table=(
                ("mAP", "CocoMetric|CocoWholeBodyMetric|KeypointPartitionMetric"),
                ("AP", "CocoMetric"),
                ("PCK", "PCKAccuracy|MpiiPCKAccuracy|JhmdbPCKAccuracy"),
                ("PCKh", "MpiiPCKAccuracy"),
                ("AUC", "AUC"),
                ("EPE", "EPE"),
                ("NME", "NME"),
            ),
        ),
        _GPU_COLLECT,
        _TMPDIR,
    ),
)

MMDET3D = RuleSet(
    "mmdet3d",
    "MMDetection3D 1.0 -> 1.1+",
    ("mmdet3d", "mmdetection3d"),
    train=(_RESUME, _AUTO, _NO_VAL, _GPUS, _GPU_IDS, _GPU_ID, _SEED, _DIFF, _DET, _OPTIONS_TRAIN, _AUTOSCALE),
    test=(
        Flag(
            ("--out",),
            1,
            "error",
            note="MMDetection3D 1.x test.py writes no results file; keep the "
            "metrics from the log, or add a DumpResults metric to test_evaluator in the config",
        ),
        _FUSE,
        _GPU_IDS,
        _GPU_ID,
        Flag(("--format-only",), 0, "format", "submission_prefix"),
        Flag(("--eval",), "+", "cfg", "test_evaluator.metric"),
        _GPU_COLLECT,
        _TMPDIR,
        _SEED,
        _DET,
        Flag(
            ("--options",),
            "+",
            "pairs",
            "test_evaluator.",
            note="in 1.0 test.py the old name of --eval-options",
            old_name_of="--eval-options",
        ),
        Flag(("--eval-options",), "+", "pairs", "test_evaluator."),
    ),
)

RULESETS: tuple[RuleSet, ...] = (MMDET3D, MMSEG, MMPRETRAIN, MMPOSE, MMDET)  # mmdet3d before mmdet
BY_NAME = {r.name: r for r in RULESETS}


def _marked(name: str, markers: Iterable[str]) -> bool:
    name = name.lower()
    return any(name == m or re.match(re.escape(m) + r"[-_.]", name) is not None for m in markers)


def rules_for(program: str, parser: ParserInfo, imports: Iterable[str] = ()) -> tuple[RuleSet, str]:
    """The toolbox whose legacy flags apply to ``program``, and why (shown by `mmfix translate`).

    In order: the script's path (``<pkg>/.mim/tools/train.py``, a ``mmsegmentation/`` checkout),
    the toolbox packages the script imports, facts only one toolbox's parser has, else MMDetection.
    """
    parts = [p for p in os.path.normpath(os.path.abspath(program)).split(os.sep) if p]
    for part in reversed(parts[:-1]):
        for rules in RULESETS:
            if _marked(part, rules.markers):
                return rules, f"the script's path ({part}/)"
    imported = set(imports)
    for rules in RULESETS:
        hit = sorted(imported & set(rules.markers))
        if hit:
            return rules, f"the script imports {hit[0]}"
    options = parser.options
    if "--task" in options or "--ceph" in options or "--sync_bn" in options:
        return MMDET3D, "its parser (--task/--ceph/--sync_bn)"
    if "--out-item" in options or "--no-pin-memory" in options:
        return MMPRETRAIN, "its parser (--out-item/--no-pin-memory)"
    if "--badcase" in options or "--dump" in options or (parser.tool == "train" and "--show-dir" in options):
        return MMPOSE, "its parser (--badcase/--dump/--show-dir)"
    if parser.tool == "train" and options.get("--resume", "?") == 0:
        return MMSEG, "its parser (--resume is a plain flag)"
    return MMDET, "the default (no other toolbox recognised)"


def all_spellings() -> set[str]:
    return {s for rules in RULESETS for row in (*rules.train, *rules.test) for s in row.spellings}


#: Spellings of one toolbox that exist, renamed, on the 3.x tools (named when such a flag is refused).
RENAMED_3X = {
    "--autoscale-lr": "--auto-scale-lr",
    "--aug-test": "--tta",
    "--options": "--cfg-options",
    "--resume-from": "--resume",
    "--auto-resume": "--resume",
    "--out-items": "--out-item",
    "--show-score-thr": "--cfg-options default_hooks.visualization.score_thr=T",
    "--load-from": "--cfg-options load_from=P",
    "--seed": "--cfg-options randomness.seed=S",
    "--deterministic": "--cfg-options randomness.deterministic=True",
    "--diff-seed": "--cfg-options randomness.diff_rank_seed=True",
    "--diff_seed": "--cfg-options randomness.diff_rank_seed=True",
    "--eval-options": "--cfg-options test_evaluator.KEY=VALUE",
    "--metric-options": "--cfg-options test_evaluator.KEY=VALUE",
    "--gpu-collect": "--cfg-options test_evaluator.collect_device=gpu",
    "--tmpdir": "--cfg-options test_evaluator.collect_dir=DIR",
    "--opacity": "--cfg-options visualizer.alpha=A",
}
