"""The pure legacy-command translator: every row of both tables, the errors, and properties."""

from __future__ import annotations

import argparse
import runpy
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmfix._launch.parser_info import parser_info
from mmfix._launch.plan import ParserInfo
from mmfix._launch.rules import MMDET
from mmfix._launch.translate import LegacyUsageError, UnknownArgumentsError, translate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tools"


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _real_argparse(script: Path) -> argparse.ArgumentParser:
    """The parser the bundled 3.x-shaped tool really builds (captured at parse time)."""
    original = argparse.ArgumentParser.parse_args

    def capture(self, *a, **k):
        raise _Captured(self)

    argparse.ArgumentParser.parse_args = capture
    try:
        runpy.run_path(str(script), run_name="__main__")
    except _Captured as c:
        return c.parser
    finally:
        argparse.ArgumentParser.parse_args = original
    raise AssertionError("the script never parsed its arguments")


def _real_parser(script: Path) -> ParserInfo:
    return parser_info(_real_argparse(script))


TRAIN_PARSER = _real_argparse(EXAMPLES / "train.py")
TRAIN = parser_info(TRAIN_PARSER)
TEST = _real_parser(EXAMPLES / "test.py")
CFG = "configs/faster_rcnn.py"


def t(argv: str, env: dict | None = None, parser: ParserInfo = TRAIN, gpus: int | None = None, **kw):
    return translate(argv.split(), env or {}, parser, visible_gpus=gpus, **kw)


def test_real_parsers_are_recognised() -> None:
    assert TRAIN.tool == "train" and TEST.tool == "test"
    assert {"--work-dir", "--resume", "--cfg-options", "--launcher", "--local_rank", "--local-rank"} <= set(
        TRAIN.options
    )


# --- train.py table ------------------------------------------------------------------------------


def test_gpus_n_launches_torchrun_with_launcher_pytorch() -> None:
    plan = t(f"{CFG} --gpus 2", gpus=4)
    assert plan.launch is not None and plan.launch.nproc_per_node == 2
    assert plan.launch.torchrun_args() == ["--standalone", "--nproc_per_node", "2"]
    assert plan.argv == (CFG, "--launcher", "pytorch") and plan.warnings == ()


def test_gpus_on_a_cpu_host_runs_cpu_workers_with_one_warning() -> None:
    plan = t(f"{CFG} --gpus 3", gpus=None)
    assert plan.launch.nproc_per_node == 3
    assert len(plan.warnings) == 1 and "CPU worker" in plan.warnings[0]


def test_gpus_1_runs_in_place() -> None:
    plan = t(f"{CFG} --gpus 1 --work-dir w", gpus=2)
    assert plan.launch is None and plan.env == {} and plan.argv == (CFG, "--work-dir", "w")


def test_gpu_ids_become_cuda_visible_devices_through_the_users_own() -> None:
    plan = t(f"{CFG} --gpu-ids 0 2", gpus=4)
    assert plan.env == {"CUDA_VISIBLE_DEVICES": "0,2"} and plan.launch.nproc_per_node == 2
    plan = t(f"{CFG} --gpu-ids 1 3", {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, gpus=4)
    assert plan.env == {"CUDA_VISIBLE_DEVICES": "5,7"}
    plan = t(f"{CFG} --gpu-id 1", {"CUDA_VISIBLE_DEVICES": "6,7"}, gpus=2)
    assert plan.env == {"CUDA_VISIBLE_DEVICES": "7"} and plan.launch is None


@pytest.mark.parametrize(
    "legacy,expected",
    [
        ("--resume-from w/epoch_3.pth", ("--resume", "w/epoch_3.pth")),
        ("--auto-resume", ("--resume",)),
        ("--seed 7", ("--cfg-options", "randomness.seed=7")),
        ("--deterministic", ("--cfg-options", "randomness.deterministic=True")),
        ("--diff-seed", ("--cfg-options", "randomness.diff_rank_seed=True")),
        ("--no-validate", ("--cfg-options", "val_cfg=None", "val_dataloader=None", "val_evaluator=None")),
        ("--options a.b=1 c=[1,2]", ("--cfg-options", "a.b=1", "c=[1,2]")),
        ("--seed=3", ("--cfg-options", "randomness.seed=3")),
        ("--load-from pre.pth", ("--cfg-options", "load_from=pre.pth")),
    ],
)
def test_train_rows(legacy: str, expected: tuple) -> None:
    plan = t(f"{CFG} {legacy}")
    assert plan.argv == (CFG, *expected) and plan.launch is None and plan.notes


def test_resume_from_wins_over_auto_resume_and_bare_resume_goes_last() -> None:
    assert t(f"{CFG} --auto-resume --resume-from p.pth").argv == (CFG, "--resume", "p.pth")
    assert t(f"--auto-resume {CFG} --seed 1").argv == (CFG, "--cfg-options", "randomness.seed=1", "--resume")


def test_flags_combine_into_one_cfg_options_group_beside_the_users_own() -> None:
    plan = t(f"{CFG} --gpus 2 --seed 0 --no-validate --cfg-options model.x=1", gpus=2)
    assert plan.argv == (
        CFG,
        "--cfg-options",
        "model.x=1",
        "--cfg-options",
        "randomness.seed=0",
        "val_cfg=None",
        "val_dataloader=None",
        "val_evaluator=None",
        "--launcher",
        "pytorch",
    )


def test_local_rank_spelling_is_accepted_by_a_parser_that_knows_the_other() -> None:
    old = ParserInfo(options={"--launcher": None, "--local_rank": None, "--gpus": None}, positionals=("config",))
    assert t(f"{CFG} --launcher pytorch --local-rank=1", {"LOCAL_RANK": "1"}, parser=old).argv == (
        CFG,
        "--launcher",
        "pytorch",
        "--local_rank=1",
    )
    new_only = ParserInfo(options={"--launcher": None, "--local-rank": None}, positionals=("config",))
    assert t(f"{CFG} --local_rank 0", parser=new_only).argv == (CFG, "--local-rank", "0")


# --- test.py table --------------------------------------------------------------------------------

CK = "epoch_12.pth"


@pytest.mark.parametrize(
    "legacy,expected",
    [
        ("--eval bbox segm", ("--cfg-options", "test_evaluator.metric=[bbox,segm]")),
        ("--eval bbox", ("--cfg-options", "test_evaluator.metric=[bbox]")),
        (
            "--format-only --eval-options jsonfile_prefix=out/res",
            ("--cfg-options", "test_evaluator.format_only=True", "test_evaluator.outfile_prefix=out/res"),
        ),
        ("--eval-options classwise=True", ("--cfg-options", "test_evaluator.classwise=True")),
        ("--options classwise=True", ("--cfg-options", "test_evaluator.classwise=True")),
        ("--gpu-collect", ("--cfg-options", "test_evaluator.collect_device=gpu")),
        ("--show-score-thr 0.3", ("--cfg-options", "default_hooks.visualization.score_thr=0.3")),
        ("--tmpdir /tmp/x", ("--cfg-options", "test_evaluator.collect_dir=/tmp/x")),
    ],
)
def test_test_rows(legacy: str, expected: tuple) -> None:
    plan = t(f"{CFG} {CK} {legacy}", parser=TEST)
    assert plan.argv == (CFG, CK, *expected)


def test_format_only_without_prefix_picks_one_and_says_so() -> None:
    plan = t(f"{CFG} {CK} --format-only", parser=TEST)
    assert "test_evaluator.outfile_prefix=./work_dirs/format_only/results" in plan.argv
    assert any("format-only writes" in n for n in plan.notes)


def test_tmpdir_asks_the_shell_to_check_the_metric() -> None:
    assert t(f"{CFG} {CK} --tmpdir d", parser=TEST).checks == (("collect_dir", "d"),)


def test_test_gpu_ids_and_gpus() -> None:
    assert t(f"{CFG} {CK} --gpu-id 1", parser=TEST, gpus=2).env == {"CUDA_VISIBLE_DEVICES": "1"}
    assert t(f"{CFG} {CK} --gpu-ids 0 1", parser=TEST, gpus=2).launch.nproc_per_node == 2


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,env,gpus,needle",
    [
        (f"{CFG} --gpus 0", {}, 2, "--gpus must be at least 1"),
        (f"{CFG} --gpus -2", {}, 2, "--gpus must be at least 1"),
        (f"{CFG} --gpus two", {}, 2, "--gpus expects a whole number"),
        (f"{CFG} --gpus", {}, 2, "--gpus needs a value"),
        (f"{CFG} --gpus 8", {}, 2, "more GPUs than this process can see (2"),
        (f"{CFG} --gpus 2 --gpu-ids 0 1", {}, 2, "--gpus and --gpu-ids were both given"),
        (f"{CFG} --gpu-ids 0 0", {}, 2, "lists a GPU twice"),
        (f"{CFG} --gpu-ids 0 5", {"CUDA_VISIBLE_DEVICES": "3,4"}, 2, "out of range"),
        (f"{CFG} --options a=1 --cfg-options b=2", {}, None, "--options and --cfg-options were both given"),
        (f"{CFG} --seed 1 --cfg-options randomness.seed=2", {}, None, "randomness.seed is set twice"),
        (f"{CFG} --gpus 1", {"NNODES": "2", "NODE_RANK": "0"}, None, "needs MASTER_ADDR"),
        (f"{CFG} --gpus 1", {"NNODES": "2", "NODE_RANK": "2", "MASTER_ADDR": "a"}, None, "must be smaller than NNODES"),
        (f"{CFG} --launcher pytorch", {}, None, "no launcher started this process"),
        (f"{CFG} --gpus 2 --launcher slurm", {}, None, "needs --launcher pytorch"),
        (f"{CFG} --options novalue", {}, None, "expects key=value pairs"),
        (f"{CFG} --auto-resume=yes", {}, None, "takes no value"),
    ],
)
def test_clear_errors(argv: str, env: dict, gpus, needle: str) -> None:
    with pytest.raises(LegacyUsageError) as info:
        t(argv, env, gpus=gpus)
    assert needle in info.value.message and info.value.code == 2


def test_fuse_conv_bn_is_an_error_not_dropped() -> None:
    with pytest.raises(LegacyUsageError, match=r"--fuse-conv-bn has no 3\.x equivalent"):
        t(f"{CFG} {CK} --fuse-conv-bn --eval bbox", parser=TEST)


def test_launcher_pytorch_with_gpus_is_launched_even_for_one() -> None:
    plan = t(f"{CFG} --gpus 1 --launcher pytorch", gpus=1)
    assert plan.launch.nproc_per_node == 1 and plan.argv.count("--launcher") == 1


# --- launch environment -----------------------------------------------------------------------------


def test_multi_node_from_dist_train_variables() -> None:
    env = {"NNODES": "2", "NODE_RANK": "1", "MASTER_ADDR": "10.0.0.1", "PORT": "29600"}
    plan = t(f"{CFG} --gpus 4", env, gpus=4)
    assert plan.launch.torchrun_args() == [
        "--nnodes",
        "2",
        "--node_rank",
        "1",
        "--nproc_per_node",
        "4",
        "--master_addr",
        "10.0.0.1",
        "--master_port",
        "29600",
    ]
    assert not [c for c in plan.checks if c[0] == "port_free"]  # only the master's node binds the port
    env["NODE_RANK"] = "0"
    assert ("port_free", "29600") in t(f"{CFG} --gpus 4", env, gpus=4).checks


def test_a_given_port_on_one_node_is_used_and_checked() -> None:
    plan = t(f"{CFG} --gpus 2", {"MASTER_PORT": "29555"}, gpus=2)
    assert "--master_port" in plan.launch.torchrun_args() and ("port_free", "29555") in plan.checks


def test_inside_a_torchrun_worker_nothing_launches_and_the_launcher_is_added() -> None:
    env = {"LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x"}
    plan = t(f"{CFG} --gpus 2 --seed 1", env, gpus=2)
    assert plan.launch is None and plan.env == {}
    assert plan.argv == (CFG, "--cfg-options", "randomness.seed=1", "--launcher", "pytorch")
    assert t(f"{CFG} --launcher pytorch", env).argv == (CFG, "--launcher", "pytorch")


def test_under_srun_tasks_get_the_slurm_launcher_and_gpus_is_explained() -> None:
    env = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NTASKS": "2"}
    plan = t(f"{CFG} --gpus 2", env, gpus=None)
    assert plan.launch is None and plan.argv == (CFG, "--launcher", "slurm")
    assert any("under srun each of the 2 tasks is one process" in n for n in plan.notes)
    single = {**env, "SLURM_NTASKS": "1"}
    assert t(f"{CFG}", single).argv == (CFG,)


def test_torchrun_inside_a_multitask_srun_step_is_refused_with_both_commands() -> None:
    env = {
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "2",
        "LOCAL_RANK": "0",
        "TORCHELASTIC_RUN_ID": "j",
        "WORLD_SIZE": "4",
    }
    with pytest.raises(LegacyUsageError) as info:
        t(f"{CFG} --launcher pytorch", env)
    assert "srun -n 2 python" in info.value.message and "--launcher slurm" in info.value.message
    assert "torch.distributed.run" in info.value.message


def test_other_programs_are_untouched() -> None:
    plain = ParserInfo(options={"--gpus": None}, positionals=("data",))
    assert t("data --seed 1 --gpus 2", parser=plain).argv == ("data", "--seed", "1", "--gpus", "2")
    own_gpus = ParserInfo(options={"--launcher": None, "--gpus": None, "--seed": None}, positionals=("config",))
    plan = t(f"{CFG} --gpus 2 --seed 1", parser=own_gpus, gpus=2)
    assert plan.argv == (CFG, "--gpus", "2", "--seed", "1") and plan.launch is None and not plan.changed
    opted_in = t("data --seed 1", parser=plain, any_parser=True)
    assert opted_in.argv == ("data", "--cfg-options", "randomness.seed=1")


# --- properties ----------------------------------------------------------------------------------

KNOWN = [
    "--work-dir",
    "w",
    "--amp",
    "--resume",
    "--cfg-options",
    "a=1",
    "b=2",
    "--launcher",
    "none",
    "--auto-scale-lr",
    CFG,
]
LEGACY = [
    "--gpus",
    "--gpu-ids",
    "--gpu-id",
    "--resume-from",
    "--auto-resume",
    "--no-validate",
    "--seed",
    "--deterministic",
    "--diff-seed",
    "--options",
    "--fuse-conv-bn",
    "--eval",
    "1",
    "0",
    "-1",
    "x=1",
]
tokens = st.lists(st.sampled_from(KNOWN + LEGACY) | st.text(min_size=0, max_size=8), max_size=12)
envs = st.fixed_dictionaries(
    {},
    optional={
        "NNODES": st.sampled_from(["1", "2", "x", ""]),
        "NODE_RANK": st.sampled_from(["0", "1", "-1"]),
        "MASTER_ADDR": st.just("127.0.0.1"),
        "PORT": st.sampled_from(["29500", "0", "abc", "70000"]),
        "LOCAL_RANK": st.just("0"),
        "WORLD_SIZE": st.sampled_from(["1", "2"]),
        "CUDA_VISIBLE_DEVICES": st.sampled_from(["", "0", "3,4"]),
    },
)


@settings(max_examples=400, deadline=None)
@given(argv=tokens, env=envs, gpus=st.sampled_from([None, 1, 2, 8]), parser=st.sampled_from([TRAIN, TEST]))
def test_property_only_usage_errors_and_unknowns_keep_their_order(argv, env, gpus, parser) -> None:
    try:
        plan = translate(argv, env, parser, visible_gpus=gpus, strict=False)
    except LegacyUsageError:
        return
    legacy = set(LEGACY[:12]) | {"--eval-options", "--format-only", "--gpu-collect", "--show-score-thr", "--tmpdir"}
    unknown = [
        a for a in argv if a.startswith("--") and a.split("=")[0] not in legacy and not parser.knows(a.split("=")[0])
    ]
    kept = [a for a in plan.argv if a in unknown]
    assert kept == [a for a in unknown]  # every unknown option survives, in its order


@settings(max_examples=300, deadline=None)
@given(argv=tokens, gpus=st.sampled_from([None, 1, 2, 8]), parser=st.sampled_from([TRAIN, TEST]))
def test_property_unknown_options_are_refused_all_at_once_before_anything(argv, gpus, parser) -> None:
    legacy = set(MMDET.lookup(parser.tool))  # this tool's 2.x flags
    options = argv[: argv.index("--")] if "--" in argv else argv  # after "--" everything is positional
    unknown = [
        a for a in options if a.startswith("--") and a.split("=")[0] not in legacy and not parser.knows(a.split("=")[0])
    ]
    try:
        translate(argv, {}, parser, visible_gpus=gpus)
    except UnknownArgumentsError as exc:
        named = [a for a in exc.arguments if a.startswith("--")]
        assert named == unknown or (not exc.arguments and exc.message.startswith("argument "))
        return
    except LegacyUsageError:
        return
    assert not unknown


@settings(max_examples=300, deadline=None)
@given(argv=st.lists(st.sampled_from(KNOWN), max_size=10), gpus=st.sampled_from([None, 2]))
def test_property_a_3x_command_passes_through_unchanged(argv, gpus) -> None:
    try:
        plan = translate(argv, {}, TRAIN, visible_gpus=gpus)
    except UnknownArgumentsError as exc:
        # refused only what the real parser refuses too (here: positionals beyond `config`)
        with pytest.raises((SystemExit, ValueError)):  # ValueError: MMEngine's DictAction on a non-pair
            TRAIN_PARSER.parse_args(argv)
        assert exc.message.startswith(("unrecognized arguments: ", "argument "))
        return
    assert list(plan.argv) == argv and plan.launch is None and plan.env == {} and not plan.notes


# --- the start-up path reads the parser from the source -----------------------------------------


def test_static_parser_matches_the_real_one_for_both_tools() -> None:
    from mmfix._launch.static_parser import parser_info_from_source

    for script, real in ((EXAMPLES / "train.py", TRAIN), (EXAMPLES / "test.py", TEST)):
        static = parser_info_from_source(script.read_text())
        assert static is not None
        assert static.positionals == real.positionals
        assert set(static.options) == set(real.options) - {"-h", "--help"}
        assert {k: v for k, v in static.options.items()} == {k: real.options[k] for k in static.options}


@pytest.mark.parametrize(
    "source",
    [
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('config')\n",  # no --launcher
        "import argparse\np = argparse.ArgumentParser()\np.add_argument(*NAMES)\np.add_argument('--launcher')\n",
        "import argparse\na = argparse.ArgumentParser()\nb = argparse.ArgumentParser()\n"
        "a.add_argument('config')\na.add_argument('--launcher')\n",  # two parsers
        "def broken(:\n",
    ],
)
def test_static_parser_answers_only_when_certain(source: str) -> None:
    from mmfix._launch.static_parser import parser_info_from_source

    assert parser_info_from_source(source) is None


# --- issue 11: CPU workers bounded by the usable cores; files checked before a launch -------------


def test_gpus_above_the_usable_cpus_on_a_cpu_host_is_refused_unless_allowed() -> None:
    with pytest.raises(LegacyUsageError) as info:
        t(f"{CFG} --gpus 99", gpus=None, usable_cpus=2)
    message = info.value.message
    assert "--gpus 99 would start 99 CPU workers" in message and "only 2 CPU cores" in message
    assert "--gpus 2 or fewer" in message and "MMFIX_ALLOW_CPU_OVERSUBSCRIBE=1" in message
    with pytest.raises(LegacyUsageError):
        t(f"{CFG} --gpu-ids 0 1 2", gpus=None, usable_cpus=2)
    assert t(f"{CFG} --gpus 2", gpus=None, usable_cpus=2).launch.nproc_per_node == 2
    assert t(f"{CFG} --gpus 99", gpus=None, usable_cpus=2, allow_cpu_oversubscribe=True).launch.nproc_per_node == 99
    # GPUs visible: the GPU count is the limit, not the cores; under srun, srun decides.
    assert t(f"{CFG} --gpus 8", gpus=8, usable_cpus=2).launch.nproc_per_node == 8
    srun = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}
    assert t(f"{CFG} --gpus 4", srun, gpus=None, usable_cpus=2).launch is None


def test_a_launch_asks_the_shell_to_check_config_and_checkpoints_first() -> None:
    plan = t(f"{CFG} --gpus 2 --resume-from w/epoch_3.pth --load-from pre.pth", gpus=2)
    assert ("config_file", CFG) in plan.checks
    assert ("checkpoint_file", "w/epoch_3.pth") in plan.checks and ("checkpoint_file", "pre.pth") in plan.checks
    plan = t(f"{CFG} w/epoch_3.pth --gpus 2", parser=TEST, gpus=2)
    assert plan.checks == (("config_file", CFG), ("checkpoint_file", "w/epoch_3.pth"))
    assert t(f"{CFG} --resume-from w/epoch_3.pth", gpus=2).checks == ()  # in place: the tool reads them itself
