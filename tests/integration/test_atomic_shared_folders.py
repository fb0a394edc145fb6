"""The atomic writer in a shared, non-sticky work folder (issue 28, finding 6), with real files.

A symlink planted under a temporary name is never followed, and clean-up removes only the
temporary files whose writer provably died on this host, in this pid namespace: another host's
or container's file (a save in flight on a shared file system) stays. Saves go through
MMEngine's ``save_checkpoint`` with mmfix's patch, in one process under a memory and a time limit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import clean_env, run

pytestmark = pytest.mark.slow  # a real process importing torch and MMEngine

SCRIPT = """
import resource, signal
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); signal.alarm(120)
import json, os, subprocess, sys, time
import torch, mmfix
from mmengine.runner.checkpoint import save_checkpoint
from mmfix._checkpoint import atomic

work, victim = sys.argv[1], sys.argv[2]
report = {}
MARK = atomic.TMP_MARK

# --- 1. planted symlinks ------------------------------------------------------------------
target = os.path.join(work, "epoch_1.pth")
# the name an earlier mmfix used (predictable: the pid) ...
os.symlink(victim, os.path.join(work, f".epoch_1.pth{MARK}{os.getpid()}"))
# ... and, as if guessed, the very name the writer draws first: planted just before it opens it
real_temp_path_for, planted = atomic.temp_path_for, []
def guessed(path, every=False):
    name = real_temp_path_for(path)
    if every or not planted:
        if not os.path.lexists(name):
            os.symlink(victim, name)
        planted.append(name)
    return name
atomic.temp_path_for = guessed
save_checkpoint({"state_dict": {"w": torch.arange(4.0)}}, target)
report["victim_after_save"] = open(victim, "rb").read()[:20].decode(errors="replace")
report["saved"] = torch.load(target, weights_only=True)["state_dict"]["w"].tolist()
report["target_is_link"] = os.path.islink(target)
report["links_left"] = sorted(n for n in os.listdir(work) if os.path.islink(os.path.join(work, n)))
report["planted"] = [os.path.basename(p) for p in planted]

# every name drawn is taken: one clear error, the old checkpoint untouched, nothing followed
atomic.temp_path_for = lambda path: guessed(path, every=True)
try:
    save_checkpoint({"state_dict": {"w": torch.zeros(4)}}, target)
except mmfix.CheckpointSaveError as exc:
    report["all_taken"] = str(exc)
atomic.temp_path_for = real_temp_path_for
report["victim_after_refusal"] = open(victim, "rb").read()[:20].decode(errors="replace")
report["kept_after_refusal"] = torch.load(target, weights_only=True)["state_dict"]["w"].tolist()

# --- 2. clean-up: only this host's dead writers -------------------------------------------
shared = os.path.join(work, "shared")
os.makedirs(shared)
# the writer's identity as temporary names carry it (worked out here, not asked of mmfix)
import hashlib
kernel = hashlib.sha256(open("/proc/sys/kernel/random/boot_id").read().strip().encode()).hexdigest()[:16]
namespace = os.stat("/proc/self/ns/pid").st_ino
def start_of(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19])
dead = subprocess.Popen(["sleep", "30"])
dead_start = start_of(dead.pid)
dead.kill(); dead.wait()
alive = subprocess.Popen(["sleep", "60"])
alive_start = start_of(alive.pid)
crafted = {
    "dead_here": f"{kernel}-{namespace}-{dead.pid}-{dead_start}-{'1' * 16}",
    "pid_reused_here": f"{kernel}-{namespace}-{alive.pid}-{alive_start + 1}-{'2' * 16}",
    "alive_here": f"{kernel}-{namespace}-{alive.pid}-{alive_start}-{'3' * 16}",
    "dead_other_host": f"{'f' * 16}-{namespace}-{dead.pid}-{dead_start}-{'4' * 16}",
    "dead_other_namespace": f"{kernel}-{int(namespace) + 1}-{dead.pid}-{dead_start}-{'5' * 16}",
    "older_mmfix": f"{dead.pid}",
    "unreadable": "x-y",
}
for label, owner in crafted.items():
    path = os.path.join(shared, f".epoch_1.pth{MARK}{owner}")
    with open(path, "wb") as fh:
        fh.write(label.encode())
old = time.time() - 3 * 24 * 3600
os.utime(os.path.join(shared, f".epoch_1.pth{MARK}{crafted['dead_other_host']}"), (old, old))
save_checkpoint({"state_dict": {"w": torch.ones(2)}}, os.path.join(shared, "epoch_2.pth"))  # cleans up first
left = {open(os.path.join(shared, n), "rb").read().decode() for n in os.listdir(shared) if n.startswith(".")}
report["left"] = sorted(left)
alive.kill(); alive.wait()

# --- 3. a save that fails leaves nothing behind ---------------------------------------------
failing = os.path.join(work, "failing")
os.makedirs(failing)
try:
    save_checkpoint({"state_dict": {"w": lambda: 0}}, os.path.join(failing, "epoch_3.pth"))
except Exception as exc:
    report["failing"] = type(exc).__name__
report["failing_left"] = os.listdir(failing)
print("REPORT", json.dumps(report))
"""


def test_shared_folder_temporaries_are_exclusive_and_only_provably_abandoned_ones_are_removed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o777)  # shared and non-sticky, as the finding describes
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    proc = run([sys.executable, "-c", SCRIPT, str(work), str(victim)], env=clean_env(), timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    report = json.loads(out.split("REPORT ", 1)[1].splitlines()[0])

    # clean-up first: it does not depend on the other checks
    # removed: this host's and namespace's writer is gone, or its pid is another process now;
    # kept: a live writer, another host's or container's save, names it cannot vouch for
    assert report["left"] == sorted(
        ["alive_here", "dead_other_host", "dead_other_namespace", "older_mmfix", "unreadable"]
    )
    assert "left alone (it may be a save in flight there)" in out  # the 3-day-old foreign file is named

    assert report["victim_after_save"] == "precious"  # no link was followed
    assert report["saved"] == [0.0, 1.0, 2.0, 3.0] and not report["target_is_link"]
    # the planted links are someone else's files: left where they are, not removed or replaced
    assert len(report["planted"]) == 1 and report["planted"][0] in report["links_left"]
    assert len(report["links_left"]) == 2

    assert "could not save" in report.get("all_taken", "") and "only you can write to" in report["all_taken"]
    assert report["victim_after_refusal"] == "precious"
    assert report["kept_after_refusal"] == [0.0, 1.0, 2.0, 3.0]

    assert report["failing"] in ("AttributeError", "PicklingError")
    assert report["failing_left"] == []
