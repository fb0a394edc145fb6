"""Where mmfix has nothing to add, ``torch.load`` behaves as stock torch (issue 27, items 1 and 5).

A caller's own ``weights_only=False`` runs torch's full unpickler: mmfix maps it to CPU where no
``map_location`` was given and adds nothing else (no stand-ins, cost or escape checks), on every
front door, whether or not MMEngine is imported yet. A load made on MMEngine's behalf stays held to
the safe loader. torch's own errors for a caller's mistake or a file this process is not ready for
come through unchanged, and a refusal keeps torch's message inside mmfix's. Every check compares
with stock torch (``MMFIX_DISABLE=1``) in fresh processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_front_doors import hooked_venv  # noqa: F401 - the .pth door's venv, made as that test makes it

from conftest import CONFIG, TRAIN, clean_env, run

pytestmark = pytest.mark.slow  # a real MMEngine training and a fresh interpreter per front door

MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")

# Run as a script (so mmfix-run and the .pth hook are the only doors) or after `import mmfix`.
PROBE = r'''
import hashlib, io, json, os, sys
import torch

work, extra = sys.argv[1], sys.argv[2]
out = {"active": hasattr(torch.load, "__wrapped__"), "mmengine_before": "mmengine" in sys.modules}


def error(call):
    try:
        call()
        return ["loaded", ""]
    except Exception as e:
        return [type(e).__name__, str(e), isinstance(e, __import__("pickle").UnpicklingError)]


def digest(o):
    import numpy as np

    if isinstance(o, torch.Tensor):
        raw = o.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes()
        return ["tensor", str(o.device), str(o.dtype), list(o.shape), hashlib.sha256(raw).hexdigest()]
    if isinstance(o, np.ndarray):
        return ["ndarray", str(o.dtype), list(o.shape), hashlib.sha256(o.tobytes()).hexdigest()]
    if isinstance(o, np.generic):
        return ["numpy", type(o).__name__, repr(o.item())]
    if isinstance(o, dict):
        return [type(o).__name__, [[repr(k), digest(v)] for k, v in o.items()]]
    if isinstance(o, (list, tuple)):
        return [type(o).__name__, [digest(x) for x in o]]
    if callable(o):
        return ["callable", getattr(o, "__qualname__", type(o).__name__)]
    if hasattr(o, "__dict__"):
        return ["object", f"{type(o).__module__}.{type(o).__qualname__}", digest(vars(o))]
    return [type(o).__name__, repr(o)]


def tensors_on(d, found):
    if d and d[0] == "tensor":
        found.add(d[1])
    for item in d:
        if isinstance(item, list):
            tensors_on(item, found)
    return found


# --- item 1 first: the caller's own weights_only=False, MMEngine not imported (unless asked) ---
if "mmengine-first" in extra:
    import mmengine  # noqa: F401
last = open(os.path.join(work, "last_checkpoint")).read().strip()
files = {"epoch_1": os.path.join(work, "epoch_1.pth"), "last": last, "cuda1": os.path.join(work, "cuda1.pth")}
out["loads"] = {}
for name, path in files.items():
    for where in ("none", "cpu"):
        kw = {} if where == "none" else {"map_location": "cpu"}
        try:
            d = digest(torch.load(path, weights_only=False, **kw))
            out["loads"][f"{name}/{where}"] = {"digest": d, "devices": sorted(tensors_on(d, set()))}
        except Exception as e:
            out["loads"][f"{name}/{where}"] = {"error": f"{type(e).__name__}: {e}"[:500]}

# --- item 5: after the loads above (which import MMEngine, not torch._dynamo) ---
if "item5" in extra:
    class NoSeek:  # a stream without seek/tell (a socket, a pipe wrapper)
        def __init__(self, data):
            self._b = io.BytesIO(data)

        def read(self, n=-1):
            return self._b.read(n)

        def readline(self):
            return self._b.readline()

    data = open(os.path.join(work, "plain.pth"), "rb").read()
    out["dynamo_before"] = "torch._dynamo" in sys.modules
    out["njt"] = error(lambda: torch.load(os.path.join(work, "njt.pth")))
    for wo in (True, False):
        out[f"noseek/{wo}"] = error(lambda: torch.load(NoSeek(data), weights_only=wo))
    # A seekable file object handed over mid-stream: stock torch reads from there; mmfix's check
    # reads from the start, so the weights_only load is refused (fail closed), the caller's own
    # weights_only=False load is torch's; at its start it loads.
    def midstream(wo):
        f = io.BytesIO(b"header" + data)
        f.seek(6)
        return torch.load(f, weights_only=wo)["w"].tolist()

    for wo in (True, False):
        out[f"midstream/{wo}"] = error(lambda: midstream(wo))
    out["start"] = torch.load(io.BytesIO(data), weights_only=True)["w"].tolist()
    out["refused/global"] = error(lambda: torch.load(os.path.join(work, "fraction.pth")))
    out["refused/blocked"] = error(lambda: torch.load(os.path.join(work, "system.pth")))


# --- the held path: MMEngine's own code asking for weights_only=False stays weights_only ---
if out["active"]:
    g = {"__name__": "mmengine.runner.checkpoint", "torch": torch}
    exec("def load(f):\n    return torch.load(f, map_location='cpu', weights_only=False)", g)
    out["held"] = error(lambda: g["load"](os.path.join(work, "fraction.pth")))
    out["user"] = repr(torch.load(os.path.join(work, "fraction.pth"), weights_only=False)["f"])
print("RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 epochs of the example under stock MMEngine (epoch_1, epoch_2, last_checkpoint), the last
    one re-saved with every storage tagged cuda:1 (faking location_tag: the only way without a
    GPU), and the small files of item 5, all written without mmfix."""
    work = tmp_path_factory.mktemp("stock_load")
    stock = clean_env(MMFIX_DISABLE="1")
    cmd = [sys.executable, str(TRAIN), str(CONFIG), "--work-dir", str(work)]
    run([*cmd, "--cfg-options", "train_cfg.max_epochs=2", "randomness.seed=0"], env=stock, check=True)
    assert (work / "last_checkpoint").read_text().strip().endswith("epoch_2.pth")
    code = f"""
import fractions, os, torch, torch.serialization as ts
work = {str(work)!r}
torch.save({{"w": torch.ones(3)}}, os.path.join(work, "plain.pth"))
torch.save({{"f": fractions.Fraction(1, 3)}}, os.path.join(work, "fraction.pth"))
torch.save({{"f": os.system}}, os.path.join(work, "system.pth"))  # a reference, never called
torch.save(torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged),
           os.path.join(work, "njt.pth"))
ckpt = torch.load(os.path.join(work, "epoch_2.pth"), weights_only=False)
ts.location_tag = lambda storage: "cuda:1"
torch.save(ckpt, os.path.join(work, "cuda1.pth"))
"""
    run([sys.executable, "-c", code], env=stock, check=True)
    (work / "probe.py").write_text(PROBE)
    return work


def _probe(argv: list[str], work: Path, extra: str = "", env: dict[str, str] | None = None) -> dict:
    proc = run([*argv, str(work / "probe.py"), str(work), extra or "-"], env=env or clean_env(), check=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout + proc.stderr
    return json.loads(lines[-1][len("RESULT ") :])


@pytest.fixture(scope="module")
def stock(work: Path) -> dict:
    out = _probe([sys.executable], work, "item5", env=clean_env(MMFIX_DISABLE="1"))
    assert not out["active"]
    # The control is real: stock torch cannot place the cuda:1 file on this host by itself.
    assert "Attempting to deserialize object on a CUDA device" in out["loads"]["cuda1/none"]["error"]
    return out


def _same_as_stock(out: dict, stock: dict) -> None:
    assert out["active"]
    for name in ("epoch_1", "last", "cuda1"):
        reference = stock["loads"][f"{name}/cpu"]
        assert reference["devices"] == ["cpu"]
        for where in ("none", "cpu"):  # no map_location: mmfix maps to CPU
            got = out["loads"][f"{name}/{where}"]
            assert "error" not in got, (name, where, got)
            assert got == reference, (name, where)
    assert out["loads"]["last/cpu"] != out["loads"]["epoch_1/cpu"]  # two different trainings' states
    # A load made on MMEngine's behalf is still held to the safe loader, with torch's text kept.
    kind, message, unpickling = out["held"]
    assert kind == "CheckpointRefusedError" and unpickling, out["held"]
    assert "mmfix held it to the safe loader" in message and "It was loaded with weights_only=True" in message
    assert out["user"] == "Fraction(1, 3)"  # the caller's own choice is respected


_IMPORT_MMFIX = [sys.executable, "-c", "import mmfix, runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0])"]


@pytest.fixture(scope="module")
def imported(work: Path) -> dict:
    return _probe(_IMPORT_MMFIX, work, "item5")


def test_weights_only_false_after_import_mmfix_is_stock_torch_mapped_to_cpu(imported: dict, stock: dict) -> None:
    assert imported["mmengine_before"] is False
    _same_as_stock(imported, stock)


def test_callers_mistake_and_torchs_import_hint_come_through_as_stock(imported: dict, stock: dict) -> None:
    # A NJT loaded before torch._dynamo is imported: torch's own error, not "very likely malicious".
    assert stock["dynamo_before"] is False and imported["dynamo_before"] is False
    assert "must be imported to load nested jagged tensors" in stock["njt"][1]
    assert imported["njt"] == stock["njt"]
    # A file object without seek: torch's AttributeError and its io.BytesIO hint, not a damaged file.
    for wo in (True, False):
        assert stock[f"noseek/{wo}"][0] == "AttributeError" and "io.BytesIO" in stock[f"noseek/{wo}"][1]
        assert imported[f"noseek/{wo}"] == stock[f"noseek/{wo}"]


def test_a_file_object_mid_stream_is_refused_by_the_safe_loader_and_left_to_torch_otherwise(
    imported: dict, stock: dict
) -> None:
    assert stock["midstream/True"] == stock["midstream/False"] == ["loaded", ""]  # stock reads from there
    kind, message, _ = imported["midstream/True"]
    assert kind == "CheckpointRefusedError", imported["midstream/True"]
    assert "positioned at byte 6" in message and "f.seek(0)" in message
    assert imported["midstream/False"] == stock["midstream/False"]  # the caller's full unpickler: stock
    assert imported["start"] == stock["start"] == [1.0, 1.0, 1.0]


def test_refusals_keep_torchs_message_inside_mmfixs(imported: dict, stock: dict) -> None:
    for case, torch_text in (
        ("refused/global", "Unsupported global: GLOBAL fractions.Fraction"),
        ("refused/blocked", "Trying to load unsupported GLOBAL posix.system whose module posix is blocked"),
    ):
        kind, message, unpickling = imported[case]
        assert stock[case][0] == "UnpicklingError" and torch_text in stock[case][1]
        assert "Weights only load failed" in stock[case][1]
        assert kind == "CheckpointRefusedError" and unpickling
        assert message.startswith("refused to load checkpoint") and stock[case][1].strip() in message, case
    assert "torch.serialization.add_safe_globals([fractions.Fraction])" in imported["refused/global"][1]
    assert "mmfix.trust_globals" not in imported["refused/blocked"][1]
    assert "very likely malicious" in imported["refused/blocked"][1]
    # The held load's refusal too.
    assert "Unsupported global: GLOBAL fractions.Fraction" in imported["held"][1]


def test_weights_only_false_with_mmengine_imported_first(work: Path, stock: dict) -> None:
    out = _probe(_IMPORT_MMFIX, work, "mmengine-first")
    _same_as_stock(out, stock)


def test_weights_only_false_under_mmfix_run(work: Path, stock: dict) -> None:
    out = _probe([MMFIX_RUN, sys.executable], work)
    assert out["mmengine_before"] is False
    _same_as_stock(out, stock)


def test_weights_only_false_under_the_pth_hook(work: Path, stock: dict, hooked_venv: Path) -> None:  # noqa: F811
    py = str(hooked_venv)
    run([py, "-m", "mmfix", "hook", "install"], check=True)
    try:
        out = _probe([py], work)
    finally:
        run([py, "-m", "mmfix", "hook", "uninstall"], check=True)
    assert out["mmengine_before"] is False
    _same_as_stock(out, stock)
