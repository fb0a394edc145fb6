"""The OpenMMLab family's legacy flags, against the parsers of the real 3.x-era tools.

Every row of every toolbox's table (mmfix._launch.rules) is translated here against the
parser its installed 3.x-era tool really builds (captured at parse time from
``<pkg>/.mim/tools/{train,test}.py``), and the translated command is parsed by that same
parser. The 2.x-era tools (tests/data/legacy_tools) say which flags need a row.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmfix._launch.parser_info import parser_info
from mmfix._launch.plan import ParserInfo
from mmfix._launch.rules import BY_NAME, RULESETS, rules_for
from mmfix._launch.static_parser import parser_info_from_source
from mmfix._launch.translate import LegacyUsageError, UnknownArgumentsError, translate
from toolbox_support import TOOLBOXES, tools_dir

LEGACY_TOOLS = Path(__file__).resolve().parents[1] / "data" / "legacy_tools"
NAMES = ["mmseg", "mmpretrain", "mmpose", "mmdet3d"]


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


_CACHE: dict[tuple[str, str], tuple[argparse.ArgumentParser, str]] = {}


def real(name: str, tool: str) -> tuple[argparse.ArgumentParser, str]:
    """The argparse parser the installed 3.x-era tool builds, and the tool's path."""
    if (name, tool) not in _CACHE:
        script = str(tools_dir(TOOLBOXES[name].package, runs=False) / f"{tool}.py")
        original, argv = argparse.ArgumentParser.parse_args, sys.argv

        def capture(self, *a, **k):
            raise _Captured(self)

        argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign]
        sys.argv = [script]
        try:
            runpy.run_path(script, run_name="__main__")
        except _Captured as c:
            _CACHE[(name, tool)] = (c.parser, script)
        finally:
            argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
            sys.argv = argv
    return _CACHE[(name, tool)]


def info(name: str, tool: str) -> ParserInfo:
    return parser_info(real(name, tool)[0])


def t(name: str, tool: str, argv: str, gpus: int | None = 4, env: dict | None = None, **kw):
    parser, script = real(name, tool)
    return translate(argv.split(), env or {}, parser_info(parser), visible_gpus=gpus, program=script, **kw)


def parses(name: str, tool: str, argv) -> argparse.Namespace:
    """The translated command, parsed by the real 3.x parser (SystemExit on any refusal)."""
    return real(name, tool)[0].parse_args(list(argv))


def legacy_info(name: str, tool: str) -> ParserInfo:
    path = LEGACY_TOOLS / name / f"{tool}.py"
    parsed = parser_info_from_source(path.read_text(), str(path))
    assert parsed is not None and parsed.tool == tool
    return parsed


POS = {"train": "cfg.py", "test": "cfg.py ck.pth"}
VALUES = {
    "--gpus": "2",
    "--gpu-ids": "0 1",
    "--gpu-id": "1",
    "--resume-from": "w/epoch_1.pth",
    "--load-from": "pre.pth",
    "--seed": "3",
    "--options": "a.b=1",
    "--eval-options": "k=v",
    "--metric-options": "topk=1,5",
    "--tmpdir": "t",
    "--opacity": "0.3",
    "--device": "cpu",
    "--ipu-replicas": "2",
    "--out-items": "all",
    "--out": "r.pkl",
    "--show-options": "a=1",
    "--metrics": "accuracy",
}
EVAL = {"mmseg": "mIoU", "mmpose": "EPE", "mmdet3d": "bbox"}
ROWS = [
    (name, tool, spelling)
    for name in NAMES
    for tool in ("train", "test")
    for row in BY_NAME[name].flags(tool)
    for spelling in row.spellings
]


# --- the tables are complete and name only real 2.x flags ------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("tool", ["train", "test"])
def test_every_2x_flag_the_3x_tool_lacks_has_a_row(name: str, tool: str) -> None:
    old, new = legacy_info(name, tool), info(name, tool)
    missing = set(old.options) - set(new.options) - {"-h", "--help"}
    table = {s for row in BY_NAME[name].flags(tool) for s in row.spellings}
    assert missing - table == set(), f"{name} {tool}.py: 2.x flags without a row"
    # and no invented rows: every spelling was a flag of the 2.x-era tool (--diff-seed/--diff_seed
    # are both accepted where one of them was)
    assert {s for s in table if s not in ("--diff-seed", "--diff_seed")} <= set(old.options)
    assert old.positionals == new.positionals


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("tool", ["train", "test"])
def test_a_real_2x_era_tool_keeps_every_flag_it_knows(name: str, tool: str) -> None:
    old = legacy_info(name, tool)
    argv = POS[tool].split()
    for row in BY_NAME[name].flags(tool):
        spelling = next((s for s in row.spellings if s in old.options), None)
        if spelling is not None and spelling not in ("--gpu-ids", "--gpu-id"):  # one of the GPU group
            value = EVAL.get(name, "") if spelling == "--eval" else VALUES.get(spelling, "")
            argv += [spelling, *value.split()]
    plan = translate(argv, {}, old, visible_gpus=4, program=str(LEGACY_TOOLS / name / f"{tool}.py"))
    assert list(plan.argv) == argv and plan.launch is None and not plan.notes and plan.env == {}


@pytest.mark.parametrize("name", NAMES)
def test_the_toolbox_is_recognised_from_its_tools_path_and_shown(name: str) -> None:
    for tool in ("train", "test"):
        rules, why = rules_for(real(name, tool)[1], info(name, tool))
        assert rules.name == name and "path" in why
        assert rules.label.split()[0] in t(name, tool, POS[tool]).rules
    # the 2.x-era tools stored under tests/data/legacy_tools/<name>/ are recognised the same way
    assert rules_for(str(LEGACY_TOOLS / name / "train.py"), legacy_info(name, "train"))[0].name == name


def test_translate_command_data_names_the_rules() -> None:
    from mmfix._launch.early import translate_statically

    _, script = real("mmpose", "train")
    data = translate_statically(sys.executable, script, ["cfg.py", "--gpus", "2", "--autoscale-lr"])
    assert data is not None and data["rules"] == "MMPose 0.x -> 1.x (the script's path (mmpose/))"
    assert data["command"][-3:] == ["--auto-scale-lr", "--launcher", "pytorch"]
    with pytest.raises(UnknownArgumentsError) as exc:
        translate_statically(sys.executable, script, ["cfg.py", "--bogus"])
    assert exc.value.usage == real("mmpose", "train")[0].format_usage()


def test_parser_facts_pick_the_toolbox_when_the_path_does_not_say() -> None:
    for name, tool in (("mmdet3d", "test"), ("mmpretrain", "test"), ("mmpose", "test"), ("mmseg", "train")):
        assert rules_for("/work/tools/x.py", info(name, tool))[0].name == name
    assert rules_for("/work/tools/x.py", info("mmseg", "train"), imports={"mmpose"})[0].name == "mmpose"
    assert rules_for("/work/tools/x.py", info("mmseg", "test"))[0].name == "mmdet"  # same parser as mmdet's


# --- every row of every toolbox ------------------------------------------------------------------


@pytest.mark.parametrize("name,tool,spelling", ROWS)
def test_every_row_translates_into_what_the_real_3x_parser_accepts(name: str, tool: str, spelling: str) -> None:
    row = BY_NAME[name].lookup(tool)[spelling]
    value = EVAL.get(name, "") if spelling == "--eval" else VALUES.get(spelling, "")
    argv = f"{POS[tool]} {spelling} {value}".strip()
    if row.action in ("error", "out_pkl"):
        with pytest.raises(LegacyUsageError) as exc:
            t(name, tool, argv)
        assert (spelling in exc.value.message and "3.x" in exc.value.message) or "1.x" in exc.value.message
        return
    plan = t(name, tool, argv)
    if info(name, tool).knows(spelling):  # kept by the 3.x tool (MMPretrain's --no-validate): passed through
        assert spelling in plan.argv and not plan.notes
        parses(name, tool, plan.argv)
        return
    assert spelling not in plan.argv, plan
    assert any(n.startswith(spelling) for n in plan.notes) or plan.launch is not None or plan.env, plan
    parses(name, tool, plan.argv)


# --- each toolbox's meanings, spelled out ----------------------------------------------------------


def test_mmseg_train_the_issue_command() -> None:
    plan = t("mmseg", "train", "cfg.py --gpus 2 --load-from ck.pth --diff_seed")
    assert plan.launch is not None and plan.launch.nproc_per_node == 2
    assert plan.argv == (
        "cfg.py",
        "--cfg-options",
        "load_from=ck.pth",
        "randomness.diff_rank_seed=True",
        "--launcher",
        "pytorch",
    )
    args = parses("mmseg", "train", plan.argv)
    assert args.cfg_options == {"load_from": "ck.pth", "randomness.diff_rank_seed": True}


def test_resume_from_follows_the_shape_of_each_tools_resume() -> None:
    # MMSegmentation 1.x: --resume is a plain flag, so the path goes to load_from
    plan = t("mmseg", "train", "cfg.py --resume-from S1/epoch_2.pth")
    assert plan.argv == ("cfg.py", "--resume", "--cfg-options", "load_from=S1/epoch_2.pth")
    args = parses("mmseg", "train", plan.argv)
    assert args.resume is True and args.cfg_options == {"load_from": "S1/epoch_2.pth"}
    # MMPretrain / MMPose / MMDetection3D: --resume takes an optional path
    for name in ("mmpretrain", "mmpose", "mmdet3d"):
        plan = t(name, "train", "cfg.py --resume-from S1/epoch_2.pth")
        assert plan.argv == ("cfg.py", "--resume", "S1/epoch_2.pth")
        assert parses(name, "train", plan.argv).resume == "S1/epoch_2.pth"
    # --auto-resume: bare --resume, placed last where it takes an optional path
    assert parses("mmseg", "train", t("mmseg", "train", "cfg.py --auto-resume").argv).resume is True
    plan = t("mmdet3d", "train", "cfg.py --auto-resume --work-dir w")
    assert plan.argv[-1] == "--resume" and parses("mmdet3d", "train", plan.argv).resume == "auto"
    # --resume-from wins over --load-from, as in 0.x
    plan = t("mmseg", "train", "cfg.py --load-from a.pth --resume-from b.pth")
    assert parses("mmseg", "train", plan.argv).cfg_options == {"load_from": "b.pth"}


def test_mmseg_test_flags() -> None:
    plan = t("mmseg", "test", "cfg.py ck.pth --eval mIoU mDice --aug-test --opacity 0.3 --gpu-collect --tmpdir t")
    args = parses("mmseg", "test", plan.argv)
    assert args.tta is True
    assert args.cfg_options == {
        "test_evaluator.iou_metrics": ["mIoU", "mDice"],
        "visualizer.alpha": 0.3,
        "test_evaluator.collect_device": "gpu",
        "test_evaluator.collect_dir": "t",
    }
    plan = t("mmseg", "test", "cfg.py ck.pth --format-only --eval-options imgfile_prefix=out efficient_test=True")
    assert parses("mmseg", "test", plan.argv).cfg_options == {
        "test_evaluator.format_only": True,
        "test_evaluator.output_dir": "out",
    }
    assert any("efficient_test dropped" in n for n in plan.notes)
    # 0.x test.py --options was the old name of --cfg-options (MMDetection's meant --eval-options)
    assert parses("mmseg", "test", t("mmseg", "test", "cfg.py ck.pth --options a=1").argv).cfg_options == {"a": 1}
    with pytest.raises(LegacyUsageError, match=r"cityscapes has no 3\.x meaning"):
        t("mmseg", "test", "cfg.py ck.pth --eval cityscapes")
    with pytest.raises(LegacyUsageError, match="directory prediction images"):
        t("mmseg", "test", "cfg.py ck.pth --out results.pkl")
    assert t("mmseg", "test", "cfg.py ck.pth --out pred_dir").argv == ("cfg.py", "ck.pth", "--out", "pred_dir")
    with pytest.raises(LegacyUsageError, match="expects a number"):
        t("mmseg", "test", "cfg.py ck.pth --opacity half")


def test_mmpretrain_flags() -> None:
    plan = t("mmpretrain", "train", "cfg.py --device cpu --diff-seed --seed 1 --no-validate")
    assert plan.env == {"CUDA_VISIBLE_DEVICES": ""}
    args = parses("mmpretrain", "train", plan.argv)
    assert args.no_validate is True  # MMPretrain 1.x kept --no-validate: passed through
    assert args.cfg_options == {"randomness.diff_rank_seed": True, "randomness.seed": 1}
    assert t("mmpretrain", "train", "cfg.py --device cuda").env == {}
    with pytest.raises(LegacyUsageError, match="IPU"):
        t("mmpretrain", "train", "cfg.py --device ipu")
    plan = t(
        "mmpretrain", "test", "cfg.py ck.pth --metrics accuracy --metric-options topk=1,5 --out r.pkl --out-items none"
    )
    args = parses("mmpretrain", "test", plan.argv)
    assert args.cfg_options == {"test_evaluator.topk": [1, 5]} and args.out_item == "metrics" and args.out == "r.pkl"
    assert ("evaluators", "--metrics accuracy=Accuracy") in plan.checks
    assert (
        parses("mmpretrain", "test", t("mmpretrain", "test", "cfg.py ck.pth --out-items pred_label").argv).out_item
        == "pred"
    )
    with pytest.raises(LegacyUsageError, match="not a metric"):
        t("mmpretrain", "test", "cfg.py ck.pth --metrics top5")


def test_mmpose_flags() -> None:
    plan = t("mmpose", "train", "cfg.py --gpus 2 --autoscale-lr --diff_seed")
    args = parses("mmpose", "train", plan.argv)
    assert args.auto_scale_lr is True and args.launcher == "pytorch"
    assert any("auto_scale_lr.base_batch_size" in n for n in plan.notes)
    plan = t("mmpose", "test", "cfg.py ck.pth --eval PCK AUC")
    assert ("evaluators", "--eval PCK=PCKAccuracy|MpiiPCKAccuracy|JhmdbPCKAccuracy,AUC=AUC") in plan.checks
    assert plan.argv == ("cfg.py", "ck.pth")
    with pytest.raises(LegacyUsageError, match="fuse"):
        t("mmpose", "test", "cfg.py ck.pth --fuse-conv-bn")


def test_mmdet3d_flags() -> None:
    plan = t("mmdet3d", "train", "cfg.py --options a=1 --autoscale-lr --no-validate")
    args = parses("mmdet3d", "train", plan.argv)
    assert args.auto_scale_lr is True
    assert args.cfg_options == {"a": 1, "val_cfg": None, "val_dataloader": None, "val_evaluator": None}
    with pytest.raises(LegacyUsageError, match="old name of --cfg-options"):
        t("mmdet3d", "train", "cfg.py --options a=1 --cfg-options b=2")
    plan = t("mmdet3d", "test", "cfg.py ck.pth --eval bbox --options x=1 --seed 0 --deterministic")
    assert parses("mmdet3d", "test", plan.argv).cfg_options == {
        "test_evaluator.metric": ["bbox"],
        "test_evaluator.x": 1,
        "randomness.seed": 0,
        "randomness.deterministic": True,
    }
    plan = t("mmdet3d", "test", "cfg.py ck.pth --format-only --eval-options submission_prefix=sub")
    assert parses("mmdet3d", "test", plan.argv).cfg_options == {
        "test_evaluator.format_only": True,
        "test_evaluator.submission_prefix": "sub",
    }
    with pytest.raises(LegacyUsageError, match="no results file"):
        t("mmdet3d", "test", "cfg.py ck.pth --out r.pkl")


# --- unknown arguments: refused once, before anything starts ---------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_unknown_flags_are_refused_before_launch_naming_the_3x_spelling(name: str) -> None:
    with pytest.raises(UnknownArgumentsError) as exc:
        t(name, "train", "cfg.py --gpus 2 --work_dir w --bogus")
    message = exc.value.message
    assert message.startswith("unrecognized arguments: --work_dir w --bogus")
    assert "--work_dir is spelled --work-dir" in message and "Nothing was started" in message
    assert BY_NAME[name].label in message
    with pytest.raises(SystemExit):  # the real parser refuses the same arguments
        parses(name, "train", ["cfg.py", "--work_dir", "w", "--bogus"])


def test_a_flag_of_another_toolbox_names_its_3x_spelling_where_this_tool_has_one() -> None:
    # --autoscale-lr was MMPose's and MMDetection3D's; MMPretrain 1.x has --auto-scale-lr
    with pytest.raises(UnknownArgumentsError, match="--autoscale-lr is spelled --auto-scale-lr"):
        t("mmpretrain", "train", "cfg.py --autoscale-lr")
    # MMSegmentation 1.x has none: refused without a suggestion
    with pytest.raises(UnknownArgumentsError) as exc:
        t("mmseg", "train", "cfg.py --autoscale-lr")
    assert "spelled" not in exc.value.message


def test_parse_known_args_callers_keep_their_unknowns() -> None:
    plan = t("mmseg", "train", "cfg.py --bogus --seed 1", strict=False)
    assert plan.argv == ("cfg.py", "--bogus", "--cfg-options", "randomness.seed=1")


def test_the_static_usage_line_is_the_real_parsers() -> None:
    for name in NAMES:
        for tool in ("train", "test"):
            parser, script = real(name, tool)
            static = parser_info_from_source(Path(script).read_text(), script)
            assert static is not None and static.usage == parser.format_usage()


# --- properties over the new tables --------------------------------------------------------------

_ALL = sorted({s for r in RULESETS for row in (*r.train, *r.test) for s in row.spellings})
_TOKENS = st.lists(
    st.sampled_from(
        _ALL
        + ["1", "0", "x=1", "a.pth", "mIoU", "cpu", "--work-dir", "w", "--cfg-options", "b=2", "--launcher", "none"]
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(NAMES), tool=st.sampled_from(["train", "test"]), argv=_TOKENS, gpus=st.sampled_from([None, 4])
)
def test_property_a_translation_is_refused_cleanly_or_parses_with_the_real_3x_parser(name, tool, argv, gpus):
    full = POS[tool].split() + argv
    try:
        plan = t(name, tool, " ".join(full), gpus=gpus, usable_cpus=64)
    except LegacyUsageError as exc:
        assert exc.message and "\n" not in exc.message.strip()
        return
    legacy = set(BY_NAME[name].lookup(tool)) - set(info(name, tool).options)
    assert not legacy & {a.partition("=")[0] for a in plan.argv}  # no legacy flag survives
    parses(name, tool, plan.argv)  # and the real tool accepts everything it is given


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    argv=st.lists(
        st.sampled_from(["--work-dir", "w", "--amp", "--launcher", "none", "--cfg-options", "a=1"]), max_size=6
    ),
)
def test_property_3x_commands_pass_through_every_toolbox_unchanged(name, argv) -> None:
    full = ["cfg.py", *argv]
    try:
        plan = t(name, "train", " ".join(full))
    except UnknownArgumentsError:
        with pytest.raises((SystemExit, ValueError)):
            parses(name, "train", full)
        return
    assert list(plan.argv) == full and plan.launch is None and not plan.notes


@pytest.mark.parametrize("name", NAMES)
def test_an_invalid_launcher_is_refused_before_anything_starts(name: str) -> None:
    # found by the property above: a value argparse would reject in every worker
    with pytest.raises(LegacyUsageError, match=r"--launcher: invalid choice: '1'"):
        t(name, "train", POS["train"] + " --gpus 2 --launcher 1", gpus=None, usable_cpus=64)
