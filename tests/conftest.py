from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import settings

# The test process itself stays stock: tests that need mmfix active start a
# subprocess or apply a patch explicitly. Subprocesses get clean_env(), which
# drops every MMFIX_* variable again.
os.environ["MMFIX_DISABLE"] = "1"

# The suite starts over a thousand interpreters that import torch, MMEngine and often MMDetection.
# Where the environment says PYTHONDONTWRITEBYTECODE (this project's machines do, and pip installs
# here compile nothing), none of them finds those packages' bytecode and each compiles their
# sources again: `import torch` 4.0 s of CPU instead of 1.8, with MMEngine's runner and
# MMDetection's apis 9 s instead of 3.9 (issue 29). The tests' processes write it on first import.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# One compute thread per test process. The suite runs its tests two at a time (-n auto on the
# CI's 2 cores), and many of them start processes of their own (2-rank trainings, the 0.x
# environments): with torch's default of a thread per core each, OpenMP's threads outnumber the
# cores and spin waiting for one another. Two copies of one zoo-model test side by side took
# 48.8 s at the default and 26.4 s at one thread each (2026-12-06; issue 29). Subprocesses
# inherit it; a value set outside the suite is kept.
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")
if "torch" in sys.modules:  # imported before this file (a plugin): its pool is sized already
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# Hypothesis draws the same examples on every run (derandomize): a suite that passes once passes
# again, and CI never turns red on a draw. HYPOTHESIS_PROFILE=explore draws new ones to hunt bugs.
settings.register_profile("suite", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))
# MMDetection's models need mmcv's ops. The README's test environment has mmcv-lite (no compiled
# extension): there the test process gets mmfix's stand-in `mmcv._ext` exactly as the mmcv_ops
# patch gives it to a user's process (a compiled extension, where installed, still wins).
from mmfix._patches import mmcv_ops as _mmcv_ops  # noqa: E402

sys.meta_path.insert(0, _mmcv_ops._ExtFinder())
# With mmcv 2.2 (the version matrix's `ceiling` cell), MMDetection 3.3.0 and the toolboxes refuse
# to import below their `mmcv < 2.2.0` bound: the test process gets the mmcv_bound patch's finder,
# as a user's process does (with mmcv 2.1 it changes nothing).
from mmfix._patches import mmcv_bound as _mmcv_bound  # noqa: E402

sys.meta_path.insert(0, _mmcv_bound._BoundFinder())

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
TRAIN = EXAMPLES / "tools" / "train.py"
TEST = EXAMPLES / "tools" / "test.py"
CONFIG = EXAMPLES / "configs" / "toy_det.py"


def sigint_as_in_a_terminal() -> None:
    """A ``preexec_fn`` for processes a test sends SIGINT to: its default action, as under a
    terminal. A shell starts background jobs with SIGINT ignored (``nohup .ci/run &``), a child
    inherits that, and Python then installs no KeyboardInterrupt handler: Ctrl-C would do nothing."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def clean_env(**overrides: str | None) -> dict[str, str]:
    """The test process's environment without any MMFIX_* or launcher variables."""
    drop = (
        "MMFIX_",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "MASTER_",
        "TORCHELASTIC",
        "SLURM_",
        "GROUP_RANK",
        "ROLE_",
        "OMPI_",
        "PMI_",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONSTARTUP", None)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 300,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        args, env=env if env is not None else clean_env(), cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    return _checked(proc, check)


def _checked(proc: subprocess.CompletedProcess[str], check: bool) -> subprocess.CompletedProcess[str]:
    if check and proc.returncode != 0:
        raise AssertionError(f"{proc.args} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def run_python(
    code: str,
    *flags: str,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    check: bool = True,
    timeout: float = 300,
    warm: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``python -c CODE``. ``warm=True`` (without interpreter flags): in a fork of a warm
    interpreter of the same environment (tests/warm_python.py: torch and MMEngine imported, mmfix
    not), ~0.05 s instead of 2-5 s — for a test of what a load does, not of how a process starts
    (import order, start-up hooks and the like need ``warm=False``)."""
    code = textwrap.dedent(code)
    if warm and not flags:
        env = env if env is not None else clean_env()
        return _WarmPython.serving(env).run(code, env=env, cwd=cwd, check=check, timeout=timeout)
    return run([sys.executable, *flags, "-c", code], env=env, cwd=cwd, check=check, timeout=timeout)


def run_mmfix_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m mmfix ARGS`` in a fork of the warm interpreter (``runpy`` sets ``sys.argv`` as
    ``-m`` does): for tests of what a command says about a file, not of its start-up."""
    code = f"import runpy, sys\nsys.argv = ['mmfix', *{list(args)!r}]\nrunpy.run_module('mmfix', run_name='__main__', alter_sys=True)\n"
    return run_python(code, env=env, timeout=timeout, check=False, warm=True)


def run_tool_warm(
    script: str | Path,
    *args: str,
    env: dict[str, str],
    cwd: str | Path | None = None,
    timeout: float = 300,
    mmfix: bool = True,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``mmfix-run python SCRIPT ARGS`` in a fork of the warm interpreter: the script run as
    ``__main__`` with its own folder first on ``sys.path`` and mmfix activated first through
    mmfix-run's door (its start steps, and the bootstrap on PYTHONPATH for the run's Python
    children), as the bootstrap ``sitecustomize`` does in a fresh interpreter — only torch and
    MMEngine's runner are imported already, as in a training script that imports mmfix after
    them. Saves the 3 s of CPU of their import for a test of what a run does (its saves, its
    errors), not of how it starts (issue 29); a command that re-launches itself (``--gpus N``)
    needs the real ``mmfix-run``. ``mmfix=False``: ``python SCRIPT ARGS``, mmfix never imported."""
    code = (
        "import os, runpy, sys\n"
        f"script = {str(script)!r}\n"
        f"sys.argv = [script, *{list(args)!r}]\n"
        "sys.path[0] = os.path.dirname(os.path.abspath(script))  # `python SCRIPT` puts its folder first\n"
    )
    if mmfix:
        code += (
            "from mmfix._run import environment_for\n"
            "os.environ.update(environment_for(dict(os.environ)))\n"
            "from mmfix import _startup\n"
            "_startup._activate('mmfix-run')\n"
            "_startup._start_steps()\n"
        )
    code += "runpy.run_path(script, run_name='__main__')\n"
    return run_python(code, env=env, cwd=cwd, check=check, timeout=timeout, warm=True)


# Variables no preloaded module reads at import: mmfix's (only mmfix reads them, and only when a
# request's code imports it), pytest's name of the running test, TORCH_HOME (read when torch.hub
# looks for a file), and those of the tests' own probe hooks (tests/ddp_probe.py reads them when
# a run trains or saves).
_NOT_READ_AT_IMPORT = ("MMFIX_", "PYTEST_CURRENT_TEST", "TORCH_HOME", "KILL_", "PROBE_", "DISTURB")


class _WarmPython:
    """A warm interpreter of this test process: one per environment (less its MMFIX_* variables,
    which only mmfix reads, and only when the request's code imports it, and TORCH_HOME, which
    torch.hub reads when it looks for a file; see _NOT_READ_AT_IMPORT), started on first use,
    ended with the test process. A test process's environment does change: importing cv2 sets
    LD_LIBRARY_PATH and Qt's variables, and an interpreter started before would differ from a
    fresh one; the warm interpreter of the new environment serves the requests from then on."""

    _running: ClassVar[dict[tuple[tuple[str, str], ...], _WarmPython]] = {}

    @staticmethod
    def _base(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
        # pytest's PYTEST_CURRENT_TEST names the test that runs: it changes with each, nothing reads it.
        # TORCH_HOME (a test's own torch.hub cache) is read when torch.hub looks for a file, never
        # at import: the fork takes the request's value, and one warm interpreter serves every test.
        return tuple(sorted((k, v) for k, v in env.items() if not k.startswith(_NOT_READ_AT_IMPORT)))

    @classmethod
    def serving(cls, env: dict[str, str]) -> _WarmPython:
        key = cls._base(env)
        server = cls._running.get(key)
        if server is None or server.proc.poll() is not None:
            server = cls._running[key] = cls(dict(key))
        return server

    def __init__(self, env: dict[str, str]) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")  # its own stderr, for an error that ends it
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "warm_python.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
            text=True,
        )
        ready = self.proc.stdout.readline() if self.proc.stdout else ""
        if not ready.startswith('{"ready"'):
            raise AssertionError(f"the warm interpreter did not start:\n{self._stderr()}")
        atexit.register(self.close)

    def _stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()[-3000:]

    def run(
        self, code: str, *, env: dict[str, str], cwd: str | Path | None, check: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        assert self.proc.stdin and self.proc.stdout
        request = {"code": code, "env": env, "cwd": str(cwd or os.getcwd()), "timeout": timeout}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the warm interpreter ended:\n{self._stderr()}")
        reply = json.loads(line)
        args = [sys.executable, "-c", code]
        if reply["timed_out"]:
            raise subprocess.TimeoutExpired(args, timeout, reply["stdout"], reply["stderr"])
        return _checked(subprocess.CompletedProcess(args, reply["returncode"], reply["stdout"], reply["stderr"]), check)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def env() -> dict[str, str]:
    return clean_env()


def processes_mentioning(marker: str) -> list[int]:
    """PIDs whose command line contains ``marker`` (to prove a job left nothing behind)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every process of this pytest run shares: pytest's base temporary folder, or under
    pytest-xdist (the README's test command) the folder above the workers' own ones."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def run_lock(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """Holds this run's lock called ``name`` (an exclusive flock shared by the xdist workers) and
    yields the run-wide folder ``name``: what one worker builds there, the others find built
    (the lock is released at any exit, a crashed worker's with its process)."""
    import fcntl

    folder = run_folder(tmp_path_factory) / name
    with open(run_folder(tmp_path_factory) / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder.mkdir(exist_ok=True)
        yield folder


@pytest.fixture(scope="session")
def mmdet2_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a real MMDetection 2.28.2 environment (tests/mmdet2_support.py), built once
    per run whichever worker asks first."""
    from mmdet2_support import find_or_build

    with run_lock(tmp_path_factory, "mmdet2-env") as folder:
        return find_or_build(folder)


@pytest.fixture(scope="session")
def mmpose_runs() -> None:
    """MMPose 1.x importable with its xtcocotools, or a skip (a failure under REQUIRE_TOOLBOXES):
    the MMPose 0.x tests run in the version matrix's `mmpose` cell."""
    from toolbox_support import tools_dir

    tools_dir("mmpose")


@pytest.fixture(scope="session")
def torchvision_path(mmdet2_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PYTHONPATH folder with a torchvision for MMPretrain's models (tests/family0x_support.py)."""
    from family0x_support import torchvision_overlay

    with run_lock(tmp_path_factory, "torchvision-overlay") as folder:
        return torchvision_overlay(mmdet2_python, folder)


#: Test files by their cost (seconds on one worker of a parallel run on the 2-core machine), the
#: heaviest first. Under pytest-xdist's `--dist loadfile` a file runs on one worker from its first
#: test to its last; started last, a five-minute file keeps one worker busy while the other idles. So these start first and the many short files fill in at the end
#: (longest-first scheduling). The order inside each file, and of every other file, is kept.
HEAVY_FIRST = (  # seconds of a worker: measured 2026-12-07 (pytest's junit times, -n 2)
    "integration/test_faults.py",  # ~380 (484 with 100 MB checkpoints)
    "integration/test_legacy_checkpoints.py",  # 272
    "integration/test_zoo_ops.py",  # 195
    "integration/test_patch_orderings.py",  # 187
    "integration/test_bounded_cost.py",  # 181
    "integration/test_legacy_toolboxes.py",  # 160
    "integration/test_mmdet2_prediction_parity.py",  # 157
    "ops/test_mmdet3d_models.py",  # 142
    "integration/test_crafted_checkpoints.py",  # 132
    "integration/test_legacy_commands.py",  # 122
    "integration/test_legacy_configs.py",  # 120
    "integration/test_checkpoints.py",  # 85
    "integration/test_shared_load_crafted.py",  # 79
    "integration/test_rebuilt_families_detr.py",  # 71
    "ops/test_iou3d.py",  # 67
    "integration/test_distributed.py",  # 65
    "integration/test_rebuilt_families_maskformer.py",  # 63
    "integration/test_family_0x_mmseg.py",  # 61
    "integration/test_fuzz_checkpoints.py",  # 44
    "integration/test_front_doors.py",  # 42
    "integration/test_family_0x_mmcls.py",  # 38
    "integration/test_url_checkpoints.py",  # 31 (156 before the warm interpreter)
)


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist (3.x) hands out a `--dist loadfile` run's files by their number of tests, most
    # first, unless told not to: that overrode HEAVY_FIRST and sent the heaviest files (a few slow
    # tests each) last, so one worker ran test_mmdet3d_models.py alone for minutes at the end.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(HEAVY_FIRST)}
    root = Path(__file__).resolve().parent

    def cost_rank(item: pytest.Item) -> int:
        try:
            name = Path(str(item.path)).resolve().relative_to(root).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(name, len(rank))

    items.sort(key=cost_rank)  # stable
