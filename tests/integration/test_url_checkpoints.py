"""MMEngine's URL and model-zoo loaders keep weights_only=True (issue 19, item 1).

``load_from_http`` (every ``http(s)://``, ``open-mmlab://``, ``mmcls://``, ``torchvision://``
checkpoint; ``init_cfg=dict(type='Pretrained')``, ``load_from=URL``, ``Runner.resume(URL)``)
reaches ``torch.load`` through ``torch.hub.load_state_dict_from_url``, which passes
``weights_only=False`` itself. Nothing is downloaded here: a file is put in torch.hub's cache
(``TORCH_HOME``) under the name the loader gives the URL's download, as a shared cache, a
mirror or anyone answering the download would. Each load runs in its own process under a
4 GiB address-space limit and a time limit (a fork of the warm interpreter, ``run_python(...,
warm=True)``: ``import mmfix`` in it applies mmfix to the torch and MMEngine imported before). The crafted corpus goes through the same URL
loaders in ``test_crafted_checkpoints`` (``crafted_worker.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from checkpoint_payloads import call, g, s, write_checkpoint
from conftest import CONFIG, REPO, TRAIN, clean_env, run_python, run_tool_warm

pytestmark = pytest.mark.slow  # MMEngine loads and short trainings in subprocesses

FIXTURE = REPO / "tests" / "fixtures" / "runner_numpy2.pth"  # a toy_det checkpoint written by stock MMEngine
URL = "http://example.invalid/models/ckpt.pth"
LIMITS = "import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    cache = tmp_path / "torch_home" / "hub" / "checkpoints"
    cache.mkdir(parents=True)
    return cache


def _env(hub: Path, **overrides: str) -> dict[str, str]:
    return clean_env(TORCH_HOME=str(hub.parents[1]), **overrides)


def _crafted(hub: Path, name: str = "ckpt.pth") -> Path:
    marker = hub.parents[2] / "MARKER"
    write_checkpoint(hub / name, call(g("posix", "system"), s(f"touch {marker}")))
    return marker


def _zoo_name(scheme: str) -> tuple[str, str]:
    """A model-zoo name of ``scheme`` and the file name its URL is cached under (read from MMEngine's tables)."""
    code = f"""
import json, os, urllib.parse
from mmengine.runner import checkpoint
table = {{"open-mmlab://": checkpoint.get_external_models, "mmcls://": checkpoint.get_mmcls_models}}[{scheme!r}]()
name = next(n for n, url in table.items() if url.startswith("http"))
print(json.dumps([{scheme!r} + name, os.path.basename(urllib.parse.urlparse(table[name]).path)]))
"""
    return tuple(json.loads(run_python(code, env=clean_env(MMFIX_DISABLE="1"), warm=True).stdout))  # type: ignore[return-value]


PRETRAINED = """
from mmengine.model import BaseModule
class Model(BaseModule):
    def __init__(self):
        super().__init__(init_cfg=dict(type="Pretrained", checkpoint=URL))
        self.fc = torch.nn.Linear(8, 16)
Model().init_weights()
"""
# loader -> (code that loads URL, the scheme whose cache name the file takes: None for URL itself)
LOADERS = {
    "CheckpointLoader http://": ("CheckpointLoader.load_checkpoint(URL)", None),
    "CheckpointLoader https://": ("CheckpointLoader.load_checkpoint(URL.replace('http:', 'https:'))", None),
    "_load_checkpoint": ("from mmengine.runner.checkpoint import _load_checkpoint; _load_checkpoint(URL)", None),
    "load_checkpoint(model, URL)": ("load_checkpoint(torch.nn.Linear(1, 1), URL)", None),
    "init_cfg Pretrained": (PRETRAINED, None),
    "load_from_http": ("from mmengine.runner.checkpoint import load_from_http; load_from_http(URL)", None),
    "open-mmlab://": ("CheckpointLoader.load_checkpoint(ZOO)", "open-mmlab://"),
    "mmcls://": ("load_checkpoint(torch.nn.Linear(1, 1), ZOO)", "mmcls://"),
    "a scheme loader the user registered": (
        "@CheckpointLoader.register_scheme(prefixes='mine://')\n"
        "def mine(filename, map_location=None):\n"
        "    return torch.hub.load_state_dict_from_url(URL, map_location=map_location)\n"
        "CheckpointLoader.load_checkpoint('mine://x')",
        None,
    ),
}


def _load(hub: Path, loader: str | tuple[str, str | None], *, mmfix: bool = True, env: dict[str, str] | None = None):
    body, scheme = LOADERS[loader] if isinstance(loader, str) else loader
    zoo = ""
    if scheme is not None:
        zoo, cached = _zoo_name(scheme)
        shutil.copyfile(hub / "ckpt.pth", hub / cached)
    code = (
        LIMITS
        + ("import mmfix\n" if mmfix else "")
        + f"import torch\nfrom mmengine.runner import CheckpointLoader, load_checkpoint\nURL = {URL!r}\nZOO = {zoo!r}\n"
        + "try:\n"
        + "".join(f"    {line}\n" for line in body.strip().splitlines())
        + "    print('RESULT loaded')\n"
        + "except Exception as e:\n"
        + "    print('RESULT', type(e).__name__, '|', str(e).replace(chr(10), ' '))\n"
    )
    env = env or (_env(hub) if mmfix else _env(hub, MMFIX_DISABLE="1"))
    proc = run_python(code, env=env, timeout=120, check=False, warm=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert lines, proc.stderr[-2000:]
    return lines[-1][7:], proc


def test_control_stock_url_loader_runs_code_from_the_hub_cache(hub: Path) -> None:
    marker = _crafted(hub)
    result, _ = _load(hub, "CheckpointLoader http://", mmfix=False)
    assert marker.exists(), result  # the payload is real: stock torch.hub loads with weights_only=False


@pytest.mark.parametrize("loader", list(LOADERS))
def test_crafted_file_in_the_hub_cache_is_refused_through_every_url_loader(hub: Path, loader: str) -> None:
    marker = _crafted(hub)
    result, proc = _load(hub, loader)
    assert result.startswith("CheckpointRefusedError |"), result
    assert "posix.system" in result and "malicious" in result and str(hub) in result
    assert "mmfix holds it to the safe loader" in proc.stdout + proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_real_mmengine_checkpoint_in_the_hub_cache_loads(hub: Path, loader: str) -> None:
    shutil.copyfile(FIXTURE, hub / "ckpt.pth")
    result, _ = _load(hub, loader)
    assert result == "loaded", result


def test_the_caller_gets_mmengines_own_classes_and_they_work(hub: Path) -> None:
    shutil.copyfile(FIXTURE, hub / "ckpt.pth")
    body = (
        "ckpt = CheckpointLoader.load_checkpoint(URL)\n"
        "buf = ckpt['message_hub']['log_scalars']['train/loss']\n"
        "from mmengine.logging.history_buffer import HistoryBuffer\n"
        "assert type(buf) is HistoryBuffer and float(buf.mean()) > 0, buf"
    )
    result, _ = _load(hub, (body, None))
    assert result == "loaded", result


def test_torchvision_scheme_is_held_too(hub: Path) -> None:
    pytest.importorskip("torchvision")
    code = """
import os, urllib.parse, json
from mmengine.runner.checkpoint import get_torchvision_models
url = get_torchvision_models()["resnet18"]
print(json.dumps(os.path.basename(urllib.parse.urlparse(url).path)))
"""
    cached = json.loads(run_python(code, env=clean_env(MMFIX_DISABLE="1")).stdout)
    marker = _crafted(hub, cached)
    result, _ = _load(hub, ("CheckpointLoader.load_checkpoint('torchvision://resnet18')", None))
    assert result.startswith("CheckpointRefusedError |") and not marker.exists(), result


def test_the_users_own_hub_call_keeps_its_choice_and_hold_all_holds_it(hub: Path) -> None:
    # Not on MMEngine's behalf: torch.hub's own default (weights_only=False) is the user's decision.
    marker = _crafted(hub)
    own = ("torch.hub.load_state_dict_from_url(URL)", None)
    result, _ = _load(hub, own, env=_env(hub, MMFIX_HOLD_WEIGHTS_ONLY="all"))
    assert result.startswith("CheckpointRefusedError |") and not marker.exists(), result
    result, _ = _load(hub, own)
    assert marker.exists(), result


def test_a_single_record_zip_in_the_cache_is_refused_before_torch_hub_extracts_it(hub: Path, tmp_path: Path) -> None:
    # The pre-1.6 "legacy zip" form: torch.hub extracts the archive into its cache directory
    # (a file in the cache writes a file it names), then loads what it extracted.
    inner = tmp_path / "inner.pth"
    run_python(
        f"import torch; torch.save({{'w': torch.ones(2)}}, {str(inner)!r}, _use_new_zipfile_serialization=False)",
        env=clean_env(MMFIX_DISABLE="1"),
    )
    with zipfile.ZipFile(hub / "ckpt.pth", "w") as archive:
        archive.write(inner, "other_model.pth")
    _load(hub, "CheckpointLoader http://", mmfix=False)
    assert (hub / "other_model.pth").exists()  # control: stock torch.hub writes the named file
    (hub / "other_model.pth").unlink()
    result, _ = _load(hub, "CheckpointLoader http://")
    assert result.startswith("CheckpointRefusedError |") and "legacy zip" in result, result
    assert sorted(p.name for p in hub.iterdir()) == ["ckpt.pth"]


def test_a_fifo_in_the_cache_is_a_clear_error_not_a_hang(hub: Path) -> None:
    os.mkfifo(hub / "ckpt.pth")
    result, _ = _load(hub, "CheckpointLoader http://")
    assert result.startswith("CheckpointCorruptError |") and "FIFO" in result, result


def _train(work_dir: Path, hub: Path, *extra: str):
    """``mmfix-run python TRAIN CONFIG …`` in a fork of the warm interpreter."""
    return run_tool_warm(TRAIN, str(CONFIG), "--work-dir", str(work_dir), *extra, env=_env(hub), timeout=300)


def test_runner_resume_and_load_from_a_url(hub: Path, tmp_path: Path) -> None:
    """A real training run: ``--resume URL`` (Runner.resume) and ``load_from=URL`` (load_or_resume)."""
    shutil.copyfile(FIXTURE, hub / "ckpt.pth")
    proc = _train(tmp_path / "resumed", hub, "--resume", URL, "--cfg-options", "train_cfg.max_epochs=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resumed epoch: 1" in proc.stdout + proc.stderr
    proc = _train(tmp_path / "loaded", hub, "--cfg-options", f"load_from={URL}", "train_cfg.max_epochs=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Load checkpoint from {URL}" in proc.stdout + proc.stderr
    # The same two with a crafted file in the cache: refused, nothing run.
    marker = _crafted(hub)
    for extra in (("--resume", URL), ("--cfg-options", f"load_from={URL}")):
        proc = _train(tmp_path / "crafted", hub, *extra)
        assert proc.returncode != 0 and "CheckpointRefusedError" in proc.stderr, proc.stderr[-3000:]
        assert not marker.exists()


def test_a_damaged_zip_directory_in_the_cache_is_mmfixs_clear_error(hub: Path) -> None:
    # torch.hub reads the zip directory itself (is it a legacy zip?) before torch.load does.
    data = bytearray(FIXTURE.read_bytes())
    at = data.find(b"PK\x01\x02")
    data[at : at + 2] = b"XX"
    (hub / "ckpt.pth").write_bytes(bytes(data))
    result, _ = _load(hub, "CheckpointLoader http://", mmfix=False)
    assert result.startswith("BadZipFile |"), result  # stock: zipfile's error from inside torch.hub
    result, _ = _load(hub, "CheckpointLoader http://")
    assert result.startswith("CheckpointCorruptError |") and "directory cannot be read" in result, result
