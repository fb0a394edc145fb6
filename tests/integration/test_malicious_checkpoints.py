"""A corpus of malicious checkpoints: each refused by the patched loader with no side effect.

Controls prove every payload is real: stock torch with weights_only=False runs each one
(its marker appears), and allowlisting the *real* getattr lets the getattr chains run even
with weights_only=True — which is why mmfix registers a restricted stand-in instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkpoint_payloads import build_corpus, payloads
from conftest import clean_env, run_mmfix_cli, run_python

pytestmark = pytest.mark.slow  # every payload through every loader

LOADERS = {
    "torch.load": "torch.load(path)",
    "torch.load(weights_only=False) from MMEngine": "as_mmengine(path)",
    "mmengine load_checkpoint": "load_checkpoint(torch.nn.Linear(1, 1), path)",
    "CheckpointLoader": "CheckpointLoader.load_checkpoint(path)",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    return build_corpus(tmp_path_factory.mktemp("malicious"))


def test_corpus_is_large_enough() -> None:
    assert len(payloads(Path("/nonexistent"))) >= 15


def _load_all(corpus: dict[str, tuple[Path, Path]], call: str, env: dict[str, str], prelude: str = "") -> dict:
    files = {name: str(path) for name, (path, _) in corpus.items()}
    code = f"""
import json
{prelude}
import torch
from mmengine.runner import load_checkpoint, CheckpointLoader
g = {{"__name__": "mmengine.runner.checkpoint", "torch": torch}}
exec("def as_mmengine(f):\\n    return torch.load(f, map_location='cpu', weights_only=False)", g)
as_mmengine = g["as_mmengine"]
out = {{}}
for name, path in {json.dumps(files)}.items():
    try:
        {call}
        out[name] = ["loaded", ""]
    except BaseException as e:
        out[name] = [type(e).__name__, str(e)]
print("RESULT " + json.dumps(out))
"""
    proc = run_python(code, env=env, timeout=300, check=False, warm=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr
    return json.loads(lines[-1][7:])


@pytest.mark.parametrize("loader", list(LOADERS))
def test_every_payload_is_refused_without_side_effect(corpus, loader: str) -> None:
    out = _load_all(corpus, LOADERS[loader], clean_env(), prelude="import mmfix")
    for name, (path, marker) in corpus.items():
        kind, message = out[name]
        assert kind == "CheckpointRefusedError", (name, kind, message[:300])
        assert str(path) in message
        assert "malicious" in message or "MMFIX_TRUSTED_GLOBALS" in message
        assert not marker.exists(), f"{name}: the payload ran"


def test_hold_all_also_refuses_explicit_weights_only_false(corpus) -> None:
    out = _load_all(
        corpus, "torch.load(path, weights_only=False)", clean_env(MMFIX_HOLD_WEIGHTS_ONLY="all"), prelude="import mmfix"
    )
    for name, (_, marker) in corpus.items():
        assert out[name][0] == "CheckpointRefusedError" and not marker.exists(), name


def test_inspect_reads_every_payload_without_running_it(corpus) -> None:
    for name, (path, marker) in corpus.items():
        proc = run_mmfix_cli("inspect", "--json", str(path))
        assert proc.returncode == 0, (name, proc.stderr)
        report = json.loads(proc.stdout)
        assert report["top_level_keys"] == ["state_dict", "payload"]
        assert not marker.exists(), f"{name}: inspect ran the payload"


def test_control_stock_weights_only_false_runs_every_payload(corpus, tmp_path: Path) -> None:
    # Copies, so the markers of the real corpus stay untouched for the other tests.
    control = build_corpus(tmp_path)
    _load_all(
        control, "torch.load(path, weights_only=False)", clean_env(MMFIX_DISABLE="1"), prelude="import mmengine.logging"
    )
    ran = {name for name, (_, marker) in control.items() if marker.exists()}
    assert ran == set(control), f"payloads that did not run in the control: {set(control) - ran}"


def test_control_allowlisting_the_real_getattr_is_an_exploit(tmp_path: Path) -> None:
    # A plain getattr chain is stopped by torch's own check on REDUCE; the exploit is
    # torch._tensor._rebuild_from_type_v2 (allowed by default), which calls its first
    # argument directly — at top level or nested in a HistoryBuffer's state.
    control = build_corpus(tmp_path)
    chains = {
        k: v
        for k, v in control.items()
        if k in ("rebuild_from_type_v2_getattr_chain", "history_buffer_state_rebuild_getattr_chain")
    }
    prelude = (
        "import mmengine.logging.history_buffer as hb, torch.serialization as ts\n"
        "ts.add_safe_globals([getattr, hb.HistoryBuffer, object])"
    )
    _load_all(chains, "torch.load(path, weights_only=True)", clean_env(MMFIX_DISABLE="1"), prelude=prelude)
    assert all(marker.exists() for _, marker in chains.values())
