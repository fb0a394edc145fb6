"""A FIFO, a device or a socket where a checkpoint should be: a clear error, never a hang (issue 19, item 7).

Opening a FIFO blocks until a writer comes; /dev/zero never ends. Each loader mmfix
touches is tried in its own process (a fork of the warm interpreter: ``run_python(...,
warm=True)``) under a 4 GiB address-space limit and a 60 s limit (no writer ever opens the FIFO).
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from conftest import REPO, clean_env, run_mmfix_cli, run_python

pytestmark = pytest.mark.slow  # a subprocess per loader and file

LIMITS = "import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
LOADERS = {
    "torch.load": "import mmfix, torch; torch.load(PATH)",
    "held weights_only=False (MMEngine)": (
        "import mmfix, torch\n"
        "g = {'__name__': 'mmengine.runner.checkpoint', 'torch': torch}\n"
        "exec('def f(p):\\n    return torch.load(p, weights_only=False)', g)\n"
        "g['f'](PATH)"
    ),
    "CheckpointLoader": "import mmfix; from mmengine.runner import CheckpointLoader; CheckpointLoader.load_checkpoint(PATH)",
    "Runner.resume": (
        "import mmfix; from mmengine.runner import Runner; runner = object.__new__(Runner); Runner.resume(runner, PATH)"
    ),
    "auto-resume check": (
        "import mmfix, mmengine.runner; from mmfix._patches.resume_fallback import unreadable_reason\n"
        "print('REASON', unreadable_reason(PATH))"
    ),
}


@pytest.fixture(scope="module")
def specials(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("special")
    os.mkfifo(tmp / "fifo.pth")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp / "socket.pth"))
    server.close()  # the socket file stays
    return {"FIFO": str(tmp / "fifo.pth"), "character device": "/dev/zero", "socket": str(tmp / "socket.pth")}


def _run(code: str, path: str, env: dict[str, str] | None = None):
    return run_python(LIMITS + f"PATH = {path!r}\n" + code, env=env or clean_env(), check=False, timeout=60, warm=True)


@pytest.mark.parametrize("kind", ["FIFO", "character device", "socket"])
@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_special_file_is_a_clear_error_in_every_loader(specials: dict[str, str], kind: str, loader: str) -> None:
    proc = _run(LOADERS[loader], specials[kind])  # a hang would raise TimeoutExpired here
    out = proc.stdout + proc.stderr
    if loader == "auto-resume check":
        assert proc.returncode == 0 and f"REASON it is a {kind}" in out, out[-2000:]
    elif loader in ("CheckpointLoader", "Runner.resume"):
        # MMEngine's local loader checks os.path.isfile before torch.load sees the path.
        assert proc.returncode == 1 and "FileNotFoundError" in out and "can not be found" in out, out[-2000:]
    else:
        assert proc.returncode == 1, out[-2000:]
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("mmfix.CheckpointCorruptError: cannot load checkpoint"), last
        assert f"it is a {kind}" in last and "not a regular file" in last


@pytest.mark.parametrize("kind", ["FIFO", "character device", "socket"])
def test_inspect_says_what_the_file_is(specials: dict[str, str], kind: str) -> None:
    proc = run_mmfix_cli("inspect", specials[kind], timeout=60)
    assert proc.returncode == 1 and f"it is a {kind}" in proc.stderr and "not a regular file" in proc.stderr, (
        proc.stderr
    )


def test_auto_resume_skips_a_fifo_for_the_newest_readable_checkpoint(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copyfile(REPO / "tests" / "fixtures" / "runner_numpy2.pth", work / "epoch_1.pth")
    os.mkfifo(work / "epoch_2.pth")
    (work / "last_checkpoint").write_text(str(work / "epoch_2.pth"))
    code = (
        "import mmfix; from mmengine.runner.checkpoint import find_latest_checkpoint\n"
        f"print('LATEST', find_latest_checkpoint({str(work)!r}))"
    )
    proc = _run(code, str(work))
    assert f"LATEST {work / 'epoch_1.pth'}" in proc.stdout, proc.stderr[-2000:]
    assert "epoch_2.pth is unreadable (it is a FIFO" in proc.stdout + proc.stderr
    # last_checkpoint itself a FIFO: MMEngine would block reading it; the files decide instead.
    (work / "last_checkpoint").unlink()
    os.mkfifo(work / "last_checkpoint")
    proc = _run(code, str(work))
    assert f"LATEST {work / 'epoch_1.pth'}" in proc.stdout, proc.stderr[-2000:]
