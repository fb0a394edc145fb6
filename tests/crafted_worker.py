"""Loads crafted checkpoints, each in its own forked process, through every loader
(MMEngine's URL and model-zoo loaders through torch.hub's cache).

    python crafted_worker.py mmfix|stock FILE [FILE ...]

torch, MMEngine (and mmfix) are imported once; each load then gets a fresh fork
with a 4 GiB address-space limit and 30 s of CPU time (CRAFTED_TIMEOUT_S; RLIMIT_CPU's
SIGXCPU ends the process even inside C code that ignores Ctrl-C, and CPU time is what a
load costs whatever else runs on the machine: issue 29), with a wall-clock alarm at three
times that for a load that blocks without computing. Each (file, loader) pair
runs in its own fork, which reports the exception type and message, and whether
anything acted: an audit hook records process, exec/compile, dlopen,
socket and file-writing events, and the HistoryBuffer class registry is compared
before and after. One JSON line per file: {"file", "status", "results"}.
CRAFTED_FREEZE_HEAP=1: the parent's objects are frozen (gc.freeze) before the forks, so that a
load building many tokens does not scan them at each full collection: for tests of what a load
does, not of what it costs.
"""

from __future__ import annotations

import encodings.cp437
import encodings.latin_1  # noqa: F401
import gc
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

MODE = sys.argv[1]
FILES = sys.argv[2:]
LIMIT_AS = 4 << 30
TIMEOUT_S = int(os.environ.get("CRAFTED_TIMEOUT_S", "30"))
ACT_EVENTS = (
    "os.system",
    "subprocess.Popen",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
    "os.fork",
    "os.forkpty",
    "exec",
    "compile",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "socket.connect",
    "socket.bind",
    "os.remove",
    "os.rename",
    "shutil.rmtree",
    "webbrowser.open",
    "pty.spawn",
)

if MODE == "stock":
    os.environ["MMFIX_DISABLE"] = "1"
else:
    os.environ.pop("MMFIX_DISABLE", None)
    import mmfix  # noqa: F401

import torch  # noqa: E402
from mmengine.logging.history_buffer import HistoryBuffer  # noqa: E402
from mmengine.runner import CheckpointLoader, load_checkpoint  # noqa: E402

_g = {"__name__": "mmengine.runner.checkpoint", "torch": torch}
exec("def as_mmengine(f):\n    return torch.load(f, map_location='cpu', weights_only=False)", _g)
as_mmengine = _g["as_mmengine"]


def _resume(path: str) -> None:
    from mmengine.runner import Runner

    runner = object.__new__(Runner)
    Runner.resume(runner, path)


# MMEngine's URL and model-zoo loaders read torch.hub's cache: the crafted file is put there
# under the name torch.hub.load_state_dict_from_url gives the URL's download (nothing is
# downloaded: the cached file exists).
HUB_CACHE = Path(tempfile.mkdtemp(prefix="crafted-hub-")) / "hub" / "checkpoints"
HUB_CACHE.mkdir(parents=True)
os.environ["TORCH_HOME"] = str(HUB_CACHE.parents[1])
URL = "http://example.invalid/crafted/ckpt.pth"


def _model_zoo_url(scheme: str) -> str:
    from mmengine.runner import checkpoint

    table = {"open-mmlab://": checkpoint.get_external_models, "mmcls://": checkpoint.get_mmcls_models}[scheme]()
    name = next(n for n, url in table.items() if url.startswith("http"))
    return scheme + name, table[name]


ZOO = {scheme: _model_zoo_url(scheme) for scheme in ("open-mmlab://", "mmcls://")}


def _cached(path: str, url: str) -> None:
    shutil.copyfile(path, HUB_CACHE / os.path.basename(urllib.parse.urlparse(url).path))


def _pretrained(path: str) -> None:
    from mmengine.model import BaseModule

    class Model(BaseModule):
        def __init__(self) -> None:
            super().__init__(init_cfg={"type": "Pretrained", "checkpoint": URL})
            self.fc = torch.nn.Linear(1, 1)

    Model().init_weights()


def _auto_resume_check(path: str) -> None:
    if MODE == "stock":
        return
    from mmfix._patches.resume_fallback import unreadable_reason

    unreadable_reason(path)


def _inspect(path: str) -> None:
    if MODE == "stock":
        return
    from mmfix._checkpoint.report import format_report, inspect_checkpoint

    report = inspect_checkpoint(path)
    text = format_report(report)
    verdict = text.splitlines()[-1]
    raise _Verdict(verdict, report["loadable_with_weights_only"], report.get("trust_line"))


class _Verdict(Exception):
    pass


LOADERS = {
    "torch.load": lambda p: torch.load(p),
    "torch.load(weights_only=True)": lambda p: torch.load(p, weights_only=True),
    "held weights_only=False (MMEngine)": as_mmengine,
    "load_checkpoint": lambda p: load_checkpoint(torch.nn.Linear(1, 1), p),
    "CheckpointLoader": lambda p: CheckpointLoader.load_checkpoint(p),
    "Runner.resume": _resume,
    "auto-resume check": _auto_resume_check,
    "mmfix inspect": _inspect,
    "CheckpointLoader(http://)": lambda p: CheckpointLoader.load_checkpoint(URL),
    "CheckpointLoader(open-mmlab://)": lambda p: CheckpointLoader.load_checkpoint(ZOO["open-mmlab://"][0]),
    "load_checkpoint(mmcls://)": lambda p: load_checkpoint(torch.nn.Linear(1, 1), ZOO["mmcls://"][0]),
    "init_cfg Pretrained(http://)": _pretrained,
    "Runner.resume(http://)": lambda p: _resume(URL),
}
#: loader -> the URL whose cache entry the file is put in first
CACHED_AS = {
    "CheckpointLoader(http://)": URL,
    "CheckpointLoader(open-mmlab://)": ZOO["open-mmlab://"][1],
    "load_checkpoint(mmcls://)": ZOO["mmcls://"][1],
    "init_cfg Pretrained(http://)": URL,
    "Runner.resume(http://)": URL,
}
if MODE == "stock":
    LOADERS = {"torch.load(weights_only=True)": LOADERS["torch.load(weights_only=True)"]}


def child(path: str, loader: str, out_fd: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))
    resource.setrlimit(resource.RLIMIT_CPU, (TIMEOUT_S, TIMEOUT_S + 2))
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(3 * TIMEOUT_S)
    acted: list[str] = []
    watching = [False]

    def audit(event: str, args: tuple) -> None:
        if not watching[0]:
            return
        if event in ACT_EVENTS or (
            event == "open" and len(args) > 1 and isinstance(args[1], str) and any(c in args[1] for c in "wax+")
        ):
            acted.append(f"{event} {str(args)[:120]}")

    if loader in CACHED_AS:
        _cached(path, CACHED_AS[loader])
    sys.addaudithook(audit)
    registry = dict(HistoryBuffer._statistics_methods)
    watching[0] = True
    try:
        LOADERS[loader](path)
        outcome = ["loaded", ""]
    except _Verdict as verdict:
        outcome = ["verdict", str(verdict.args[0]), verdict.args[1], verdict.args[2]]
    except BaseException as exc:
        outcome = [type(exc).__name__, str(exc)[:2000]]
    finally:
        watching[0] = False
    changed = dict(HistoryBuffer._statistics_methods) != registry
    os.write(out_fd, json.dumps({"result": outcome, "acted": acted, "class_state_changed": changed}).encode())
    os._exit(0)


def in_fork(path: str, loader: str) -> dict:
    read_fd, write_fd = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            child(path, loader, write_fd)
        finally:
            os._exit(3)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 1 << 16):
        chunks.append(chunk)
    os.close(read_fd)
    _, status, usage = os.wait4(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return {
            "status": f"{loader}: "
            + ("hang" if sig in (signal.SIGALRM, signal.SIGXCPU) else f"killed by {signal.Signals(sig).name}")
        }
    data = json.loads(b"".join(chunks) or b"{}")
    # What the load cost: CPU seconds (which a busy machine does not inflate), the child's peak
    # resident memory beyond the parent's (a fork starts with the parent's pages resident), and
    # wall seconds.
    data["cost"] = [
        round(usage.ru_utime + usage.ru_stime, 3),
        max(0, usage.ru_maxrss - _parent_rss()) >> 10,
        round(time.monotonic() - start, 3),
    ]
    return {"status": "ok", **data} if len(data) > 1 else {"status": f"{loader}: exit {os.WEXITSTATUS(status)}"}


def _parent_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB


def main() -> None:
    # A training process has built buffers (MMEngine's default statistics are registered) before
    # it loads anything; the registry must stay exactly that.
    HistoryBuffer()
    # Warm up lazy imports (their code runs once, as any import's does) before anything is watched.
    with tempfile.TemporaryDirectory() as tmp:
        warm = os.path.join(tmp, "warm.pth")
        torch.save({"a": torch.ones(1)}, warm)
        for name, load in LOADERS.items():
            if name in CACHED_AS:
                _cached(warm, CACHED_AS[name])
            try:
                load(warm)
            except BaseException:
                pass
    if os.environ.get("CRAFTED_FREEZE_HEAP") == "1":
        # The forks' garbage collector then leaves the parent's objects (torch's, MMEngine's: some
        # 260,000) alone: a load that builds hundreds of thousands of tokens otherwise scans them
        # again at each full collection (1.1 s instead of 0.67 s for a 400 kB crafted pickle).
        # For the tests of what a load does; the bounded-cost tests measure the cost with them.
        gc.freeze()
    for path in FILES:
        row: dict = {
            "file": path,
            "status": "ok",
            "results": {},
            "costs": {},
            "acted": [],
            "class_state_changed": False,
        }
        for loader in LOADERS:  # each file through each loader in its own process
            one = in_fork(path, loader)
            if one["status"] != "ok":
                row["status"] = one["status"]
                continue
            row["results"][loader] = one["result"]
            row["costs"][loader] = one["cost"]  # [CPU seconds, MiB beyond the parent's, wall seconds]
            row["acted"] += one["acted"]
            row["class_state_changed"] |= one["class_state_changed"]
        print(json.dumps(row), flush=True)
    shutil.rmtree(HUB_CACHE.parents[1], ignore_errors=True)


if __name__ == "__main__":
    main()
