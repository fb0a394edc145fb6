"""Every patch through every ordering of import / enable / disable / enable (issue 11, item 9).

As ddtrace's patch test base does: whatever the order in which the patched modules
are imported and mmfix is enabled and disabled, each patched name ends up wrapped
exactly once when mmfix is on, and holds the original when it is off. Each ordering
runs in a process that has done its events and nothing else (imports cannot be undone), with
every patch applicable: LOCAL_RANK for cuda_device, TORCHELASTIC_ERROR_FILE for worker_errors,
and MMFIX_LEGACY_ANY_PARSER for legacy_cli, MMFIX_MEMORY_REPORT for memory_report.

The orderings share beginnings (28 of them, 66 distinct prefixes): one fresh interpreter walks
their tree and forks where they part, so that a shared prefix (torch, MMEngine and MMDetection
imported; mmfix imported and enabled) is done once, and each ordering's last process is exactly
the one a fresh interpreter doing its events would be — at about half the CPU of one
interpreter per ordering (issue 29).
"""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from conftest import clean_env, run
from mmfix._patches import PATCHES

pytestmark = pytest.mark.slow  # every import order in a process of its own

PROBE = r"""
import glob, importlib, importlib.util, json, os, sys
given = json.loads(sys.argv[1])  # the orderings to walk, each a list of events
# Two stages, so that a patch can be applied while a module its apply() hooks for
# (mmengine.model, for cpu_distributed) is not imported yet.
FIRST = ("argparse", "torch", "mmengine.dist")
MODULES = FIRST + ("mmengine.logging", "mmengine.model", "mmengine.runner", "mmengine.hooks.checkpoint_hook",
                   "mmengine.fileio.backends.local_backend", "mmengine.config", "mmengine.infer.infer", "mmcv",
                   "mmcv.ops", "mmdet.models.dense_heads.ssd_head")
TARGETS = {
    "torch_load": [("torch", "load"), ("torch.serialization", "load"), ("torch.hub", "_is_legacy_zip_format")],
    "mmengine_checkpoint": [("mmengine.runner.checkpoint", "_load_checkpoint"),
                            ("mmengine.runner.checkpoint", "load_checkpoint"),
                            ("mmengine.runner.checkpoint", "CheckpointLoader.load_checkpoint"),
                            ("mmengine.runner.runner", "Runner.resume"),
                            ("mmengine.runner.runner", "Runner.load_checkpoint")],
    "cuda_device": [("torch.cuda", "_lazy_init")],
    "cpu_distributed": [("mmengine.dist.utils", "init_dist"), ("mmengine.dist", "init_dist"),
                        ("mmengine.runner.runner", "init_dist"),
                        ("mmengine.model.wrappers.distributed", "MMDistributedDataParallel.__init__")],
    "ddp_errors": [("mmengine.runner.runner", "Runner.wrap_model"),
                   ("mmengine.model.wrappers.distributed", "MMDistributedDataParallel.train_step")],
    "memory_report": [("mmengine.runner.runner", "Runner.train")],
    "legacy_cli": [("argparse", "ArgumentParser.parse_known_args")],
    "atomic_save": [("mmengine.runner.checkpoint", "save_checkpoint"),
                    ("mmengine.fileio.backends.local_backend", "LocalBackend.put")],
    "resume_fallback": [("mmengine.runner.checkpoint", "find_latest_checkpoint")],
    "runner_randomness": [("mmengine.runner.runner", "Runner.set_randomness")],
    "legacy_config": [("mmengine.config.config", "Config.fromfile"), ("mmengine.config.config", "Config.merge_from_dict")],
    # load_state_dict, and _load_checkpoint_to_model under each name its callers imported it by.
    "legacy_checkpoint": [("mmengine.runner.checkpoint", "load_state_dict"),
                          ("mmengine.runner.checkpoint", "_load_checkpoint_to_model"),
                          ("mmengine.runner.runner", "_load_checkpoint_to_model"),
                          ("mmengine.infer.infer", "_load_checkpoint_to_model")],
    "mmcv_ops_devices": [("mmcv.ops.furthest_point_sample", "furthest_point_sample"), ("mmcv.ops", "knn"),
                         ("mmcv.ops.points_in_boxes", "points_in_boxes_part"), ("mmcv.ops", "points_in_boxes_all")],
    "mmengine_packages": [("mmengine.utils.package_utils", "is_installed"),
                          ("mmengine.utils.package_utils", "get_installed_path"),
                          ("mmengine.utils", "get_installed_path"),
                          ("mmengine.config.config", "is_installed")],
    "ssd_predict": [("mmdet.models.dense_heads.ssd_head", "SSDHead.__init__")],
}
# Patches that install a meta-path finder instead of wrappers: how many of theirs are on the path.
FINDERS = {"mmcv_ops": "_ExtFinder", "mmcv_bound": "_BoundFinder"}


def raw(module, path):
    owner = importlib.import_module(module)
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
    return getattr(owner, name)


def depth(obj):
    n = 0
    while type(obj).__name__.startswith("Mmfix"):  # mmfix's wrapper types only
        n += 1
        obj = obj.__wrapped__
    return n


def excepthook_depth():
    n, hook = 0, sys.excepthook
    while hasattr(hook, "mmfix_previous"):
        n, hook = n + 1, hook.mmfix_previous
    return n


# mmcv-lite (or an mmcv built without ops): stock `import mmcv.ops` fails for want of mmcv._ext,
# so while mmfix is off it must fail exactly so, and import once mmfix is on again.
COMPILED = bool(glob.glob(os.path.join(os.path.dirname(importlib.util.find_spec("mmcv").origin), "_ext*")))
stock_failures = []


def import_all(names, on):
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if on or COMPILED or exc.name != "mmcv._ext":
                raise
            stock_failures.append(name)  # MMDetection's models import mmcv.ops: both fail


mmfix, on = None, False


def apply(event):
    global mmfix, on
    if event == "mmfix":
        import mmfix
        on = True
    elif event in ("import", "import_first"):
        import_all(MODULES if event == "import" else FIRST, on)
    else:
        getattr(mmfix, event)()
        on = event == "enable"


def finish():
    import_all(MODULES, on)
    if "mmcv.ops" not in sys.modules:  # off, on mmcv-lite: the stock failure; nothing of mmfix's to find
        for name in ("mmcv_ops_devices", "ssd_predict"):
            TARGETS.pop(name)
    from mmfix._checkpoint import atomic as _atomic

    result = {name: [depth(raw(m, p)) for m, p in targets] for name, targets in TARGETS.items()}
    result["worker_errors"] = [excepthook_depth()]
    for patch, finder in FINDERS.items():
        result[patch] = [sum(type(f).__name__ == finder for f in sys.meta_path)]
    hook_module = sys.modules["mmengine.hooks.checkpoint_hook"]
    result["atomic_save"].append(int(vars(hook_module).get("open") is _atomic.open_atomic))
    result["states"] = {k: v["state"] for k, v in mmfix.status()["patches"].items()}
    result["stock_failures"] = stock_failures
    result["compiled"] = COMPILED
    return result


def in_child(work):  # WORK in a forked child, waited for: what it does stays out of this process
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            work()
            status = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    os.waitpid(pid, 0)


def report(ordering, outcome):
    with open(os.path.join(out, str(orderings[ordering])), "w") as f:
        json.dump(outcome, f)


def failed(prefix):  # the error of a step, for each ordering that begins with PREFIX
    import traceback
    error = {"error": f"after {list(prefix)}:\n{traceback.format_exc()}"}
    for ordering in orderings:
        if ordering[: len(prefix)] == prefix:
            report(ordering, error)


def walk(prefix):  # every ordering that begins with PREFIX (this process has done exactly its events)
    if prefix in orderings:
        def leaf():
            try:
                outcome = finish()
            except BaseException:
                return failed(prefix)
            report(prefix, outcome)
        in_child(leaf)
    for event in sorted({o[len(prefix)] for o in orderings if len(o) > len(prefix) and o[:len(prefix)] == prefix}):
        def step(event=event):
            try:
                apply(event)
            except BaseException:
                return failed(prefix + (event,))
            walk(prefix + (event,))
        in_child(step)


orderings = {tuple(o): i for i, o in enumerate(given)}  # each one's outcome goes to OUT/<its index>
out = sys.argv[2]
walk(())
"""


def _insert(base: list[str], i: int, j: int) -> tuple[str, ...]:
    """``base`` with the first import stage at position i and the rest at j >= i."""
    events = base[:j] + ["import"] + base[j:]
    return tuple(events[:i] + ["import_first"] + events[i:])


BASES = [["mmfix", "enable"], ["mmfix", "disable"], ["mmfix", "disable", "enable"]]
ORDERINGS = sorted(
    {_insert(b, i, j) for b in BASES for j in range(len(b) + 1) for i in range(j + 1)}
    | {
        tuple(b[:i] + ["import"] + b[i:])
        for b in [["mmfix", "disable", "enable", "disable", "enable"]]
        for i in range(6)
    }
)


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], dict]:
    """Each selected ordering's outcome, from one walk of their tree (PROBE)."""
    selected = [
        tuple(item.callspec.params["events"])
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    ]
    wanted = sorted(set(selected)) or ORDERINGS
    folder = tmp_path_factory.mktemp("orderings")
    env = clean_env(
        LOCAL_RANK="0",
        TORCHELASTIC_ERROR_FILE=str(folder / "error.json"),
        MMFIX_LEGACY_ANY_PARSER="1",
        MMFIX_MEMORY_REPORT="1",
    )
    proc = run(
        [sys.executable, "-c", PROBE, json.dumps([list(o) for o in wanted]), str(folder)],
        env=env,
        check=True,
        timeout=120 + 30 * len(wanted),
    )
    found = {}
    for index, events in enumerate(wanted):
        path = folder / str(index)
        missing = {"error": f"no outcome (a crashed process?):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"}
        found[events] = json.loads(path.read_text()) if path.exists() else missing
    return found


@pytest.mark.parametrize("events", ORDERINGS, ids=["-".join(o) for o in ORDERINGS])
def test_every_patch_survives_the_ordering(events: tuple[str, ...], outcomes: dict[tuple[str, ...], dict]) -> None:
    result = dict(outcomes[events])
    assert "error" not in result, result.get("error")
    on = [e for e in events if e in ("enable", "disable")][-1] == "enable"
    states = result.pop("states")
    stock_failures, compiled = result.pop("stock_failures"), result.pop("compiled")
    # Replay the imports of `mmcv.ops` (each "import" event, then the probe's final one): on
    # mmcv-lite, one made while mmfix is off fails as stock mmcv does (mmcv._ext is missing) until
    # one made while mmfix is on succeeds; after that the module stays imported.
    now_on, ops_loaded, expect_failure = False, False, False
    for event in (*events, "import"):
        if event in ("mmfix", "enable", "disable"):
            now_on = event != "disable"
        elif event == "import" and not ops_loaded:
            ops_loaded = compiled or now_on
            expect_failure = expect_failure or not ops_loaded
    ssd_head = "mmdet.models.dense_heads.ssd_head"
    assert set(stock_failures) == ({"mmcv.ops", ssd_head} if expect_failure else set()), stock_failures
    assert ("mmcv_ops_devices" in result) == ops_loaded == ("ssd_predict" in result), sorted(result)
    if not ops_loaded:  # nothing of mmfix's to find in modules that never imported
        result["mmcv_ops_devices"] = result["ssd_predict"] = [0]
    assert set(result) == set(PATCHES)
    if importlib.util.find_spec("pkg_resources") is not None:
        # MMEngine's own package helpers work there: the patch skips (and wraps nothing)
        assert states.pop("mmengine_packages") in ("skipped", "removed")
        assert result.pop("mmengine_packages") == [0, 0, 0, 0]
    for name, depths in result.items():
        assert depths == [int(on)] * len(depths), (name, depths, states[name])
        assert states[name] == ("active" if on else "removed"), (name, states[name])
