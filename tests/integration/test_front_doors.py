"""Each zero-code front door, in real interpreters started the way users start them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

from conftest import REPO, clean_env, run, sigint_as_in_a_terminal

SCRIPT = """
import json, os, sys
import torch
import mmfix
print("RESULT " + json.dumps({
    "active": hasattr(torch.load, "__wrapped__"),
    "depth": (lambda f: sum(1 for _ in iter(lambda: (f := getattr(f, "__wrapped__", None)), None)))(torch.load),
    "doors": mmfix.status()["front_doors"],
    "user_site": os.environ.get("USER_SITECUSTOMIZE_RAN"),
}))
"""
# The script imports mmfix only to *read* status after torch: if no door activated
# mmfix earlier, importing it now would activate it; "active" is therefore read
# before that import.
SCRIPT_NO_IMPORT = """
import json, os, sys
import torch
active = hasattr(torch.load, "__wrapped__")
depth = 0
f = torch.load
while hasattr(f, "__wrapped__"):
    depth += 1
    f = f.__wrapped__
doors = sys.modules["mmfix"].status()["front_doors"] if "mmfix" in sys.modules else []
print("RESULT " + json.dumps({"active": active, "depth": depth, "doors": doors,
                              "user_site": getattr(sys.modules.get("sitecustomize"), "USER_MARK", None)}))
"""


def result(proc: subprocess.CompletedProcess[str]) -> dict:
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise AssertionError(f"no RESULT line\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train_like.py"
    path.write_text(SCRIPT_NO_IMPORT)
    return path


# 1. `import mmfix` as the first line --------------------------------------------------------


@pytest.mark.slow
def test_import_first_line_of_script_and_of_a_package_main(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import mmfix\n" + SCRIPT_NO_IMPORT)
    out = result(run([sys.executable, str(script)], check=True))
    assert out == {"active": True, "depth": 1, "doors": ["import"], "user_site": None}
    pkg = tmp_path / "mytool"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import mmfix\n" + SCRIPT_NO_IMPORT)
    out = result(run([sys.executable, "-m", "mytool"], cwd=tmp_path, check=True))
    assert out["active"] and out["depth"] == 1


# 2. sitecustomize_example --------------------------------------------------------------------


def _user_sitecustomize(tmp_path: Path) -> Path:
    user = tmp_path / "user_site"
    user.mkdir()
    (user / "sitecustomize.py").write_text("USER_MARK = 'ran'\n")
    return user


def test_sitecustomize_activates_and_chains_to_the_users_own(tmp_path: Path, script: Path) -> None:
    user = _user_sitecustomize(tmp_path)
    example = REPO / "sitecustomize_example"
    env = clean_env(PYTHONPATH=os.pathsep.join([str(example), str(user), str(REPO)]))
    out = result(run([sys.executable, str(script)], env=env, check=True))
    assert out == {"active": True, "depth": 1, "doors": ["sitecustomize"], "user_site": "ran"}


def test_sitecustomize_listed_twice_does_not_loop(tmp_path: Path, script: Path) -> None:
    user = _user_sitecustomize(tmp_path)
    example = REPO / "sitecustomize_example"
    env = clean_env(PYTHONPATH=os.pathsep.join([str(example), str(example) + "/", str(user), str(REPO)]))
    out = result(run([sys.executable, str(script)], env=env, check=True, timeout=60))
    assert out["active"] and out["depth"] == 1 and out["user_site"] == "ran"


def test_sitecustomize_with_python_m(tmp_path: Path) -> None:
    pkg = tmp_path / "tool"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(SCRIPT_NO_IMPORT)
    env = clean_env(PYTHONPATH=os.pathsep.join([str(REPO / "sitecustomize_example"), str(REPO)]))
    out = result(run([sys.executable, "-m", "tool"], env=env, cwd=tmp_path, check=True))
    assert out["active"] and out["doors"] == ["sitecustomize"]


@pytest.mark.slow
def test_sitecustomize_is_skipped_by_dash_s_and_dash_i(script: Path) -> None:
    site_packages = [p for p in sys.path if p.endswith("site-packages")]
    env = clean_env(PYTHONPATH=os.pathsep.join([str(REPO / "sitecustomize_example"), str(REPO), *site_packages]))
    # Control: the same environment without -S/-I activates.
    assert result(run([sys.executable, str(script)], env=env, check=True))["active"] is True
    # -S: no site module, so no sitecustomize (documented); site-packages come from PYTHONPATH here.
    assert result(run([sys.executable, "-S", str(script)], env=env, check=True))["active"] is False
    # -I: PYTHONPATH is ignored, so the folder is not on the path (documented);
    # the .pth hook is the door that survives -I.
    assert result(run([sys.executable, "-I", str(script)], env=env, check=True))["active"] is False


def test_broken_user_sitecustomize_does_not_stop_mmfix(tmp_path: Path, script: Path) -> None:
    user = tmp_path / "user_site"
    user.mkdir()
    (user / "sitecustomize.py").write_text("raise RuntimeError('user bug')\n")
    env = clean_env(PYTHONPATH=os.pathsep.join([str(REPO / "sitecustomize_example"), str(user), str(REPO)]))
    proc = run([sys.executable, str(script)], env=env, check=True)
    assert result(proc)["active"] is True
    assert "user bug" in proc.stderr


# 3. .pth / .start hook in a real virtual environment ----------------------------------------


@pytest.fixture(scope="module")
def hooked_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(root)
    py = root / "bin" / "python"
    purelib = subprocess.check_output(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    # The new environment sees the test environment's packages and this checkout
    # through a path-only .pth, processed before mmfix.pth ('_' sorts first).
    outer = [p for p in sys.path if p.endswith("site-packages")]
    Path(purelib, "_outer.pth").write_text("\n".join([str(REPO), *outer]) + "\n")
    return py


@pytest.mark.slow
def test_hook_install_status_uninstall(hooked_venv: Path, script: Path) -> None:
    py = str(hooked_venv)
    proc = run([py, "-m", "mmfix", "hook", "status", "--json"], check=True)
    assert json.loads(proc.stdout)["installed"] is False
    assert result(run([py, str(script)], check=True))["active"] is False

    run([py, "-m", "mmfix", "hook", "install"], check=True)
    run([py, "-m", "mmfix", "hook", "install"], check=True)  # idempotent
    status = json.loads(run([py, "-m", "mmfix", "hook", "status", "--json"], check=True).stdout)
    assert status["installed"] is True
    expect_start = sys.version_info >= (3, 15)
    assert (status["files"]["mmfix.start"] == "installed") is expect_start

    out = result(run([py, str(script)], check=True))
    assert out == {"active": True, "depth": 1, "doors": ["pth"], "user_site": None}
    # `mmfix status` answers for a `python` started from a shell with this environment active.
    shell = clean_env(PATH=f"{hooked_venv.parent}{os.pathsep}{os.environ['PATH']}")
    status = json.loads(run([py, "-m", "mmfix", "status", "--json"], env=shell, check=True).stdout)
    assert status["active"] and status["front_doors"] == ["pth"] and status["doors"]["pth_hook_installed"]
    # -I keeps site-packages (and so the .pth); -S skips it.
    assert result(run([py, "-I", str(script)], check=True))["active"] is True
    assert (
        result(run([py, "-S", "-c", f"import sys; sys.path[:0] = {sys.path!r}\n" + SCRIPT_NO_IMPORT], check=True))[
            "active"
        ]
        is False
    )
    # the global switch still wins over an installed hook
    assert result(run([py, str(script)], env=clean_env(MMFIX_DISABLE="1"), check=True))["active"] is False

    # A .pth processed twice (CPython issue 75723) still patches once.
    twice = "import site, sysconfig; site.addsitedir(sysconfig.get_paths()['purelib'])\n" + SCRIPT_NO_IMPORT
    out = result(run([py, "-c", twice], check=True))
    assert out["active"] and out["depth"] == 1

    run([py, "-m", "mmfix", "hook", "uninstall"], check=True)
    assert result(run([py, str(script)], check=True))["active"] is False
    assert "nothing to remove" in run([py, "-m", "mmfix", "hook", "uninstall"], check=True).stdout


#: What the start-up path (``import mmfix``, the .pth hook) must not import: the libraries
#: it patches (they are hooked, never loaded), and the standard-library packages that cost
#: milliseconds at every interpreter start (importlib.metadata pulls in email, zipfile,
#: typing ... ~35 ms; wrapt ~80 ms). A list of modules, not a timing: it holds on a busy machine.
FORBIDDEN_AT_START = (
    "torch",
    "mmengine",
    "mmcv",
    "mmdet",
    "wrapt",
    "importlib.metadata",
    "email",
    "zipfile",
    "typing",
    "threading",
    "pickle",
    "logging",
)
_STARTUP_PROBE = """
import sys
at_start = sorted(sys.modules)
{statement}
new = sorted(set(sys.modules) - set(at_start))
import json
print("RESULT " + json.dumps({{
    "new": new,
    "all": at_start,
    "pending": [n for n, p in mmfix.status()["patches"].items() if p["state"] in ("pending", "active")],
    "doors": mmfix.status()["front_doors"],
}}))
"""


def test_import_mmfix_and_the_hook_import_nothing_heavy(hooked_venv: Path) -> None:
    """Item 2 of issue 27: ``import mmfix`` (active) and the installed hook load none of
    FORBIDDEN_AT_START. A fresh interpreter each; the hook is installed for this test only."""
    # `import mmfix` in this environment: only what the import itself added counts (site
    # may have loaded modules of its own before).
    out = result(run([sys.executable, "-c", _STARTUP_PROBE.format(statement="import mmfix")], check=True))
    assert out["doors"] == ["import"] and "torch_load" in out["pending"], out  # mmfix really ran
    assert [m for m in FORBIDDEN_AT_START if m in out["new"]] == []
    # The hook: `python -c` in a venv with mmfix.pth. By the time `-c` runs, everything the hook
    # did is in sys.modules; nothing on the list may be there at all.
    py = str(hooked_venv)
    run([py, "-m", "mmfix", "hook", "install"], check=True)
    try:
        out = result(run([py, "-c", _STARTUP_PROBE.format(statement="import mmfix")], check=True))
    finally:
        run([py, "-m", "mmfix", "hook", "uninstall"], check=True)
    assert "mmfix" in out["all"] and out["doors"] == ["pth"] and "torch_load" in out["pending"], out
    assert [m for m in FORBIDDEN_AT_START if m in out["all"]] == []


def test_stale_pth_without_mmfix_is_silent(tmp_path: Path) -> None:
    root = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(root)
    py = root / "bin" / "python"
    from mmfix import _pth_installer as hook

    purelib = subprocess.check_output(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    hook.install(purelib)
    proc = run([str(py), "-c", "print('alive')"], check=True)
    assert proc.stdout.strip() == "alive" and proc.stderr == ""


# 4. mmfix-run ----------------------------------------------------------------------------


def _mmfix_run() -> str:
    return str(Path(sys.executable).parent / "mmfix-run")


@pytest.mark.slow
def test_mmfix_run_activates_in_command_and_python_children(tmp_path: Path, script: Path) -> None:
    user = _user_sitecustomize(tmp_path)
    parent = tmp_path / "parent.py"
    parent.write_text(
        textwrap.dedent(f"""
        import subprocess, sys
        exec(open({str(script)!r}).read())
        sys.stdout.flush()
        subprocess.run([sys.executable, {str(script)!r}], check=True)
    """)
    )
    env = clean_env(PYTHONPATH=str(user))
    proc = run([_mmfix_run(), sys.executable, str(parent)], env=env, check=True)
    lines = [json.loads(x[7:]) for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert len(lines) == 2
    for out in lines:
        assert out["active"] and out["depth"] == 1 and out["doors"] == ["mmfix-run"]
        assert out["user_site"] == "ran"  # the user's sitecustomize still runs


def test_mmfix_run_passes_exit_codes_and_signals(tmp_path: Path) -> None:
    exit7 = tmp_path / "exit7.py"
    exit7.write_text("import sys; sys.exit(7)\n")
    assert run([_mmfix_run(), sys.executable, str(exit7)]).returncode == 7
    assert run([sys.executable, "-m", "mmfix", "run", "--", sys.executable, str(exit7)]).returncode == 7
    killed = tmp_path / "killed.py"
    killed.write_text("import os, signal; os.kill(os.getpid(), signal.SIGTERM)\n")
    assert run([_mmfix_run(), sys.executable, str(killed)]).returncode == -signal.SIGTERM
    # The command replaces mmfix-run: a signal sent to the pid we started reaches it.
    sleeper = subprocess.Popen(
        [_mmfix_run(), sys.executable, "-c", "import time, sys; print('up', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
        env=clean_env(),
        preexec_fn=sigint_as_in_a_terminal,
    )
    assert sleeper.stdout.readline().strip() == "up"
    sleeper.send_signal(signal.SIGINT)
    # Python exits "killed by SIGINT" after an unhandled KeyboardInterrupt: the signal got there.
    assert sleeper.wait(timeout=120) == -signal.SIGINT


def test_mmfix_run_usage_errors() -> None:
    proc = run([_mmfix_run()])
    assert proc.returncode == 2 and "no command given" in proc.stderr and "Traceback" not in proc.stderr
    proc = run([_mmfix_run(), "definitely-not-a-command-xyz"])
    assert proc.returncode == 127 and "command not found" in proc.stderr


# 5. PYTHONSTARTUP --------------------------------------------------------------------------


@pytest.mark.slow
def test_pythonstartup_is_interactive_only(script: Path) -> None:
    path = run([sys.executable, "-m", "mmfix", "startup-file"], check=True).stdout.strip()
    env = clean_env(PYTHONSTARTUP=path)
    interactive = subprocess.run(
        [sys.executable, "-i", "-q"],
        input=f"exec(open({str(script)!r}).read())\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result(interactive)
    assert out["active"] is True and out["doors"] == ["pythonstartup"]
    # Python never reads PYTHONSTARTUP for a script: documented, and asserted here.
    assert result(run([sys.executable, str(script)], env=env, check=True))["active"] is False
