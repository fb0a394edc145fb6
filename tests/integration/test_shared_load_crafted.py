"""Crafted files and crafted peers against the copy the ranks of a node share (issue 19, items 2 and 3).

Every rank is its own process with a 4 GiB address-space limit and a time limit; every rank
reports what it loaded (a digest of each tensor's bytes), whether it used the shared copy,
and anything it did besides loading (an audit hook: processes, exec/compile, file writes,
removals). Attackers are real processes: one in another mount namespace (``unshare -m``, the
way a container is), forgers handing sealed segments, squatters of another user.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import clean_env
from zip_crafting import Tensor, checkpoint

pytestmark = pytest.mark.slow  # several ranks per test, each importing torch

LIMIT_AS = 4 << 30
RANK_TIMEOUT = 180  # seconds; a rank that has not finished by then hung
JOB_VARIABLES = (
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "OMPI_MCA_ess_base_jobid",
    "WORLD_SIZE",
)
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: a new mount namespace (unshare -m) and processes of another uid"
)

RANK = r"""
import hashlib, json, os, sys, time
files, hold = json.loads(sys.argv[1]), sys.argv[2] == "hold"
import io, torch, mmfix
warm = io.BytesIO()  # a buffer takes the plain path: torch's lazy imports happen before the audit starts
torch.save({"w": torch.ones(2)}, warm)
warm.seek(0)
torch.load(warm)
ACT = ("os.system", "subprocess.Popen", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "exec", "compile",
       "ctypes.dlopen", "os.remove", "os.unlink", "os.rename", "os.truncate", "shutil.rmtree")
acted = []
def imported(event, args):  # a module imported from a file on disk (lazily, by torch or mmfix)
    code = args[0] if args else None
    name = getattr(code, "co_filename", code if isinstance(code, str) else None) if event == "exec" else (
        args[1] if len(args) > 1 else None)
    return isinstance(name, str) and os.path.isfile(name)
def own_segment(event, args):  # mmfix sizing its own anonymous copy (a memfd)
    try:
        return event == "os.truncate" and os.readlink(f"/proc/self/fd/{args[0]}").startswith("/memfd:mmfix-checkpoint")
    except (OSError, TypeError):
        return False
def audit(event, args):
    if (event in ("exec", "compile") and imported(event, args)) or own_segment(event, args):
        return
    if event in ACT or (event == "open" and len(args) > 1 and isinstance(args[1], str) and any(c in args[1] for c in "wax+")):
        acted.append(f"{event} {str(args)[:160]}")
sys.addaudithook(audit)

def digest(tensor, how):
    flat = tensor.detach().reshape(-1)
    if how == "sampled":  # one element per 1 MiB: does not fault in what a hole holds
        flat = flat[:: max(1, (1 << 20) // max(1, flat.element_size()))]
    return hashlib.sha256(flat.contiguous().numpy().tobytes()).hexdigest()

results = []
for path, how in files:
    start = time.monotonic()
    try:
        ckpt = torch.load(path)
        out = {"digest": {k: digest(v, how) for k, v in sorted(ckpt.items())}}
        if how == "poke":  # plain loads give every storage its own memory: an in-place update stays local
            before = {k: v.clone() for k, v in ckpt.items()}
            first = sorted(ckpt)[0]
            ckpt[first].add_(1)
            out["others_changed"] = [k for k in sorted(ckpt) if k != first and not torch.equal(ckpt[k], before[k])]
    except Exception as exc:
        ckpt = None
        out = {"error": type(exc).__name__, "message": str(exc)[:500]}
    out["seconds"] = time.monotonic() - start
    maps = open("/proc/self/maps").read().splitlines()
    segments = [line.split()[0] for line in maps if "memfd:mmfix-checkpoint" in line]
    out["shared"] = bool(segments)
    # memory the shared segment really holds (allocated blocks), whatever its apparent size
    out["segment_bytes"] = max([os.stat(f"/proc/self/map_files/{r}").st_blocks * 512 for r in segments] or [0])
    out["file_mapped"] = any(line.endswith(os.path.realpath(path)) for line in maps)
    results.append(out)
    del ckpt
print(json.dumps({"results": results, "acted": acted}), flush=True)
if hold:
    sys.stdin.readline()
"""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def rank_env(rank: int, job: str, nproc: int = 2, **extra: str) -> dict[str, str]:
    settings = {"MMFIX_SHARED_LOAD_WAIT": "60", "MMFIX_LOG_LEVEL": "INFO", **extra}
    return clean_env(
        LOCAL_RANK=str(rank),
        RANK=str(rank),
        LOCAL_WORLD_SIZE=str(nproc),
        WORLD_SIZE=str(nproc),
        TORCHELASTIC_RUN_ID=job,
        **settings,
    )


def start_rank(
    rank: int, files: list[tuple[Path, str]], job: str, hold: bool = False, **extra: str
) -> subprocess.Popen:
    spec = json.dumps([[str(p), how] for p, how in files])
    return subprocess.Popen(
        [sys.executable, "-c", RANK, spec, "hold" if hold else "-"],
        env=rank_env(rank, job, **extra),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_limits,
    )


def finish(proc: subprocess.Popen, first: str = "") -> tuple[dict[str, Any], str]:
    """The rank's report and log; fails (and kills it) if it did not end within RANK_TIMEOUT."""
    try:
        out, err = proc.communicate(timeout=RANK_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"a rank did not finish within {RANK_TIMEOUT} s (it hung):\n{err[-3000:]}") from None
    assert proc.returncode == 0, err[-3000:]
    report = json.loads((first + out).strip().splitlines()[-1])
    assert report["acted"] == [], report["acted"]  # nothing but the load happened
    return report, err


def first_line(proc: subprocess.Popen) -> str:
    """The first line a holding rank prints (its report), within RANK_TIMEOUT."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(RANK_TIMEOUT):
            proc.kill()
            raise AssertionError(
                f"a rank did not report within {RANK_TIMEOUT} s (it hung):\n{proc.stderr.read()[-3000:]}"
            )
    line = proc.stdout.readline()
    assert line, proc.stderr.read()[-3000:]
    return line


def two_ranks(
    files: list[tuple[Path, str]], job: str, between: Any = None, **extra: str
) -> list[tuple[dict[str, Any], str]]:
    """Rank 0 loads every file first (so it reads each one for the node, and its log, the one
    shown, says what the reading rank decided) and holds on; then rank 1 loads them."""
    leader = start_rank(0, files, job, hold=True, **extra)
    try:
        line = first_line(leader)
        if between is not None:
            between()
        second = finish(start_rank(1, files, job, **extra))
        leader.stdin.write("done\n")
        leader.stdin.flush()
        first = finish(leader, line)
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()
    return [first, second]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stock_outcome(path: Path, how: str = "full") -> dict[str, Any]:
    """Stock torch's plain load (this test process runs with MMFIX_DISABLE=1)."""
    assert torch.load.__module__ == "torch.serialization"
    try:
        ckpt = torch.load(path, map_location="cpu")
    except Exception as exc:
        return {"error": type(exc).__name__}
    return {"digest": {k: hashlib.sha256(v.reshape(-1).numpy().tobytes()).hexdigest() for k, v in sorted(ckpt.items())}}


def saved(path: Path, seed: int, n: int = 4, size: int = 50_000) -> Path:
    gen = torch.Generator().manual_seed(seed)
    torch.save({f"w{i}": torch.randn(size, generator=gen) for i in range(n)}, path)
    return path


def other_weights(tmp_path: Path) -> Path:
    """A checkpoint of the same size and layout as ``saved(tmp_path / "w.pth", seed=1)`` with other values."""
    (tmp_path / "other").mkdir()
    return saved(tmp_path / "other" / "w.pth", seed=2)  # the archive's folder is named after the file


def meeting_name(path: Path, job: str, monkeypatch: pytest.MonkeyPatch, nth: int = 1) -> bytes:
    """The abstract socket name the ranks of ``job`` meet at for ``path`` (what a well-informed
    attacker would bind first)."""
    from mmfix._checkpoint import shared_load

    with monkeypatch.context() as m:
        for name in JOB_VARIABLES:
            m.delenv(name, raising=False)
        for key, value in rank_env(0, job).items():
            if key in JOB_VARIABLES:
                m.setenv(key, value)
        return shared_load.socket_name(os.stat(path), nth)


def live_mmfix_sockets() -> set[str]:
    return {line.split()[-1] for line in Path("/proc/net/unix").read_text().splitlines() if "@mmfix-load-" in line}


# --- item 3: one file, one model ----------------------------------------------------------------


def crafted_item3(tmp_path: Path) -> dict[str, Path]:
    """Files a mapped load reads otherwise than a plain load (and one it reads alike)."""
    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(1000, generator=gen), torch.randn(30_000, generator=gen)
    records = {"0": a.numpy().tobytes(), "1": b.numpy().tobytes()}
    plain = {"a": Tensor("0", 1000), "b": Tensor("1", 30_000)}
    files = {}
    for name, kwargs in {
        "good": {},
        "deflated": {"deflate": ("0", "1")},  # compressed records: mapped raw, they are other numbers
        "over_declared": {"tensors": {**plain, "a": Tensor("0", 1500)}},  # maps 2000 bytes past its record
        "under_declared": {"tensors": {**plain, "b": Tensor("1", 20_000)}},
        "unaligned": {"align": 0},  # a plain load allocates aligned storages; a mapping would not be
        # two directory entries for one record: a plain load copies it twice, a mapping would alias them
        "aliased": {"tensors": {"a": Tensor("0", 1000), "b": Tensor("2", 1000)}, "aliases": {"2": "0"}},
        # the int key 0 and the str key "0" are two storages of one record "data/0" to torch
        "two_keys_one_record": {"tensors": {"a": Tensor(0, 1000), "b": Tensor("0", 1000)}},
    }.items():
        path = tmp_path / f"{name}.pth"
        tensors = kwargs.pop("tensors", plain)
        checkpoint(path, tensors, records, **kwargs)
        files[name] = path
    return files


# Stock loads these; mmfix refuses them before a weights_only load, as torch.save never writes them
# (torch inflates a compressed record, and reads a shared one, once per directory entry).
REFUSED_UNREAD = {"deflated": "is compressed", "aliased": "share bytes"}


def test_one_file_one_model_with_and_without_the_shared_path(tmp_path: Path) -> None:
    files = crafted_item3(tmp_path)
    before = {name: sha(p) for name, p in files.items()}
    stock = {name: stock_outcome(p) for name, p in files.items()}
    assert "error" not in stock["good"] and "error" in stock["over_declared"] and "error" not in stock["deflated"]
    spec = [(p, "poke") for p in files.values()]
    runs = {
        "plain reads (MMFIX_MMAP=0)": two_ranks(spec, f"plain-{tmp_path.name}", MMFIX_MMAP="0"),
        "shared copy (default)": two_ranks(spec, f"shared-{tmp_path.name}"),
        "file mapped (MMFIX_MMAP=1)": two_ranks(spec, f"mapped-{tmp_path.name}", MMFIX_MMAP="1"),
    }
    reference = [r for r in runs["plain reads (MMFIX_MMAP=0)"][0][0]["results"]]
    for label, ranks in runs.items():
        for report, log in ranks:
            for name, got, want in zip(files, report["results"], reference):
                keep = ("digest", "others_changed", "error", "message")
                assert {k: got.get(k) for k in keep} == {k: want.get(k) for k in keep}, (label, name, log[-2000:])
                if name in REFUSED_UNREAD:
                    # torch.save writes neither: refused before any load, whatever the path (issue 28)
                    assert got["error"] == "CheckpointCorruptError", (label, name, got)
                    assert REFUSED_UNREAD[name] in got["message"], (label, name, got)
                elif "digest" in stock[name]:
                    assert got["digest"] == stock[name]["digest"], (label, name)
                    assert got["others_changed"] == [], (label, name)  # no storage aliases another
                else:
                    assert got["error"] == "CheckpointCorruptError", (label, name)  # refused, as a plain load is
                mapped = got["shared"] or got["file_mapped"]
                assert mapped == (name == "good" and label != "plain reads (MMFIX_MMAP=0)"), (label, name, got)
    shared_log = runs["shared copy (default)"][0][1]
    assert "so a mapped load would not read what a plain load reads" in shared_log
    assert {name: sha(p) for name, p in files.items()} == before  # the files are untouched


# --- item 2: sparse files ----------------------------------------------------------------------

SPARSE_FILL = r"""
import os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from mmfix._checkpoint import shared_load
src = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(src).st_size
fd = shared_load._fill(src, size)
same = all(os.pread(fd, 1 << 20, at) == os.pread(src, 1 << 20, at) for at in range(0, size, 1 << 26))
print(size, os.fstat(fd).st_blocks * 512, same)
"""


def test_a_sparse_file_costs_its_data_not_its_apparent_size(tmp_path: Path) -> None:
    path = tmp_path / "sparse.bin"
    with open(path, "wb") as fh:  # 2 GiB apparent, 3 small data extents
        for at in (0, 1 << 30, (2 << 30) - 4096):
            fh.seek(at)
            fh.write(os.urandom(4096))
    st = path.stat()
    if st.st_blocks * 512 > 1 << 20:
        pytest.skip(f"{tmp_path} does not keep holes in files")
    proc = subprocess.run(
        [sys.executable, "-c", SPARSE_FILL, str(path)], capture_output=True, text=True, timeout=120, env=clean_env()
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    size, allocated, same = proc.stdout.split()
    assert int(size) == 2 << 30 and same == "True"
    assert int(allocated) <= 1 << 20, f"the segment allocated {int(allocated):,} bytes for 12 KiB of data"


def test_sparse_checkpoints_through_two_ranks(tmp_path: Path) -> None:
    """A 128 MiB storage that is a hole in the file stays a hole in the shared copy (the ranks map
    it, nobody touches it); a checkpoint with a 1 GiB hole between its records and its directory
    loads with plain reads."""
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(1000, generator=gen)
    hole = tmp_path / "hole_record.pth"
    zeros = 32 << 20  # floats: 128 MiB
    checkpoint(
        hole,
        {"a": Tensor("0", 1000), "z": Tensor("1", zeros)},
        {"0": a.numpy().tobytes(), "1": bytes(zeros * 4)},
        holes=("1",),
    )
    gap = tmp_path / "hole_gap.pth"
    checkpoint(gap, {"a": Tensor("0", 1000)}, {"0": a.numpy().tobytes()}, gap=1 << 30)
    if hole.stat().st_blocks * 512 > 16 << 20 or gap.stat().st_blocks * 512 > 16 << 20:
        pytest.skip(f"{tmp_path} does not keep holes in files")
    expected_a = hashlib.sha256(a.numpy().tobytes()).hexdigest()
    sampled = {  # what the rank's "sampled" digest reads: one element per MiB
        "a": hashlib.sha256(a[:: (1 << 20) // 4].numpy().tobytes()).hexdigest(),
        "z": hashlib.sha256(bytes(4 * len(range(0, zeros, (1 << 20) // 4)))).hexdigest(),
    }
    ranks = two_ranks([(hole, "sampled"), (gap, "full")], f"sparse-{tmp_path.name}")
    for report, log in ranks:
        on_hole, on_gap = report["results"]
        assert on_hole["shared"] and on_hole["digest"] == sampled, (on_hole, log[-2000:])
        assert on_hole["segment_bytes"] < 16 << 20, on_hole  # not the file's 128 MiB
        assert on_gap["digest"] == {"a": expected_a} and not on_gap["shared"], on_gap
    assert "neither storages nor the records torch.save writes" in ranks[0][1]
    assert "a mapped load would not read what a plain load reads" in ranks[0][1]


# --- item 2: strangers ---------------------------------------------------------------------------

TAKER = r"""
import json, os, socket, struct, sys
name, hidden = bytes.fromhex(sys.argv[1]), sys.argv[2]
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(20)
sock.connect(name)
try:
    data, anc, flags, _ = sock.recvmsg(64, socket.CMSG_SPACE(16))
except socket.timeout:
    data, anc = b"timeout", []
fds = [d for level, kind, d in anc if kind == socket.SCM_RIGHTS]
print(json.dumps({"sees_file": os.listdir(hidden), "data": data.hex(), "fds": len(fds)}), flush=True)
"""

FORGER = r"""
import fcntl, os, socket, struct, sys, time
name, forged = bytes.fromhex(sys.argv[1]), sys.argv[2]
fd = os.memfd_create("mmfix-checkpoint", os.MFD_ALLOW_SEALING)
data = open(forged, "rb").read()
os.write(fd, data)
fcntl.fcntl(fd, 1033, 0x8 | 0x2 | 0x4 | 0x1)  # F_ADD_SEALS: write, shrink, grow, seal
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(name)
server.listen(16)
server.settimeout(1)
print("ready", flush=True)
handed = 0
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    try:
        conn, _ = server.accept()
    except socket.timeout:
        continue
    handed += 1
    print(f"handed {handed}", flush=True)
    try:  # the comer may already have hung up
        conn.sendmsg([b"S" + struct.pack("!Q", len(data))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
    except OSError:
        pass
    conn.close()
"""


def in_other_mount_namespace(code: str, *args: str, hide: Path | None = None) -> subprocess.Popen:
    """A process of the same user in a mount namespace of its own (what another container is),
    sharing the network namespace; ``hide`` is covered by an empty tmpfs there."""
    script = f"mount -t tmpfs none {hide} && " if hide else ""
    script += 'exec "$@"'
    return subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", sys.executable, "-c", code, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )


def wait_for(predicate: Any, seconds: float, what: str) -> Any:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@needs_root
def test_a_process_of_another_container_cannot_take_the_copy(tmp_path: Path) -> None:
    """Rank 0 reads the file and offers the copy; a same-uid process in another mount namespace,
    which cannot see the file, reads the socket name from /proc/net/unix and asks first; then rank 1."""
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    path = saved(secret_dir / "w.pth", seed=1)
    before = live_mmfix_sockets()
    taken: dict[str, Any] = {}

    def take() -> None:
        names = wait_for(lambda: live_mmfix_sockets() - before, 60, "rank 0 to offer its copy")
        assert len(names) == 1, names
        name = b"\0" + next(iter(names))[1:].encode()  # /proc/net/unix writes the leading NUL as '@'
        taker = in_other_mount_namespace(TAKER, name.hex(), str(secret_dir), hide=secret_dir)
        out, err = taker.communicate(timeout=60)
        assert taker.returncode == 0, err[-2000:]
        taken.update(json.loads(out.strip().splitlines()[-1]))

    (first, log0), (second, _) = two_ranks([(path, "full")], f"take-{tmp_path.name}", between=take)
    assert taken["sees_file"] == []  # the premise: the file is invisible there
    assert taken["fds"] == 0 and taken["data"] == "", taken  # turned away: no descriptor, not a byte
    assert first["results"][0]["shared"] and second["results"][0]["shared"]  # the job itself still shares
    assert first["results"][0]["digest"] == second["results"][0]["digest"] == stock_outcome(path)["digest"]
    assert "a process in another mount namespace (another container) asked for this node's shared copy" in log0


@needs_root
def test_a_process_of_another_container_cannot_forge_the_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A same-uid process in another mount namespace binds the name the ranks meet at first and
    hands every comer a sealed segment of the right size holding other weights."""
    path = saved(tmp_path / "w.pth", seed=1)
    forged = other_weights(tmp_path)
    assert forged.stat().st_size == path.stat().st_size
    job = f"forge-{tmp_path.name}"
    forger = in_other_mount_namespace(FORGER, meeting_name(path, job, monkeypatch).hex(), str(forged), "150")
    try:
        assert forger.stdout.readline().strip() == "ready", forger.stderr.read()
        ranks = two_ranks([(path, "full")], job)
    finally:
        forger.terminate()
        handed = forger.communicate(timeout=30)[0]
    truth = stock_outcome(path)["digest"]
    assert truth != stock_outcome(forged)["digest"]
    assert "handed 2" in handed  # both ranks were offered the forged copy ...
    for report, _log in ranks:
        result = report["results"][0]
        assert result["digest"] == truth and not result["shared"], result  # ... and read the file instead
        assert result["seconds"] < 60  # not MMFIX_SHARED_LOAD_WAIT: refused at once
    assert "is held by a process in another mount namespace (another container)" in ranks[0][1]


def test_a_forger_in_the_same_container_is_caught_by_the_comparison(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second line: a peer the namespaces cannot tell from a rank (same user, same container)
    hands a sealed segment with the file's own structure (pickle, headers, directory) and other
    storage bytes. Each rank compares the copy with its own file and reads the file instead."""
    path = saved(tmp_path / "w.pth", seed=1)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if "/data/" in info.filename:
                name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26 : info.header_offset + 30])
                start = info.header_offset + 30 + name_len + extra_len
                raw[start : start + info.file_size] = os.urandom(info.file_size)
    forged = tmp_path / "forged.pth"
    forged.write_bytes(bytes(raw))
    job = f"same-ns-forge-{tmp_path.name}"
    forger = subprocess.Popen(
        [sys.executable, "-c", FORGER, meeting_name(path, job, monkeypatch).hex(), str(forged), "150"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        assert forger.stdout.readline().strip() == "ready", forger.stderr.read()
        ranks = two_ranks([(path, "full")], job)
    finally:
        forger.terminate()
        handed = forger.communicate(timeout=30)[0]
    assert "handed 2" in handed
    truth = stock_outcome(path)["digest"]
    for report, _log in ranks:
        assert report["results"][0]["digest"] == truth and not report["results"][0]["shared"]
    assert "differs from its own file" in ranks[0][1]


def _squat(name: bytes, behaviour: str, ready: int, forged: str) -> None:
    """Child of the test process (forked, no exec): becomes uid 65534 and holds the name."""
    try:
        data = open(forged, "rb").read()  # before giving up root: the test's folder is not the squatter's
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(name)
        held = []
        if behaviour == "never-accepts":
            server.listen(16)
        elif behaviour == "full-queue":  # every connect() blocks
            server.listen(0)
            for _ in range(2):
                filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                filler.setblocking(False)
                try:
                    filler.connect(name)
                except (BlockingIOError, OSError):
                    pass
                held.append(filler)
        elif behaviour in ("holds", "forges"):
            server.listen(16)
        os.write(ready, b"r")
        if behaviour in ("holds", "forges"):
            segment = -1
            if behaviour == "forges":
                segment = os.memfd_create("x", os.MFD_ALLOW_SEALING)
                os.write(segment, data)
                fcntl.fcntl(segment, 1033, 0xF)
            while True:
                conn, _ = server.accept()
                held.append(conn)
                if segment >= 0:
                    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", segment))]
                    try:
                        conn.sendmsg([b"S" + struct.pack("!Q", len(data))], rights)
                    except OSError:
                        pass
        time.sleep(600)
    finally:
        os._exit(0)


@needs_root
@pytest.mark.parametrize("behaviour", ["bound-only", "never-accepts", "full-queue", "holds", "forges"])
def test_a_squatter_of_another_user_only_turns_sharing_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, behaviour: str
) -> None:
    path = saved(tmp_path / "w.pth", seed=1)
    forged = other_weights(tmp_path)
    job = f"squat-{behaviour}-{tmp_path.name}"
    name = meeting_name(path, job, monkeypatch)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        _squat(name, behaviour, ready_w, str(forged))
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"r"
        start = time.monotonic()
        ranks = two_ranks([(path, "full")], job, MMFIX_SHARED_LOAD_WAIT="300")
        took = time.monotonic() - start
    finally:
        os.close(ready_r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    truth = stock_outcome(path)["digest"]
    for report, _log in ranks:
        result = report["results"][0]
        assert result["digest"] == truth and not result["shared"], result
        # never MMFIX_SHARED_LOAD_WAIT (300 s): at most the 10 s a connect may wait, and the loads
        assert result["seconds"] < 45, result
    assert took < RANK_TIMEOUT
    log = ranks[0][1]
    if behaviour == "bound-only":  # nobody listens: the ranks retry a few times, then read the file
        return
    if behaviour == "full-queue":
        assert "does not take connections" in log
    else:
        assert "is held by a process of another user (uid 65534)" in log


def test_nothing_of_a_shared_load_outlives_the_ranks(tmp_path: Path) -> None:
    """After a shared load and the ranks' exit: no socket name, no file in /dev/shm, the file as it was."""
    path = saved(tmp_path / "w.pth", seed=1)
    digest = sha(path)
    shm = set(Path("/dev/shm").iterdir())
    before = live_mmfix_sockets()
    ranks = two_ranks([(path, "full")], f"leftovers-{tmp_path.name}")
    assert all(r["results"][0]["shared"] for r, _ in ranks)
    assert live_mmfix_sockets() - before == set()
    assert set(Path("/dev/shm").iterdir()) == shm and sha(path) == digest


def test_inspect_says_what_the_mapping_loaders_do(tmp_path: Path) -> None:
    # `mmfix inspect` says "mmap: possible" only where the shared copy and MMFIX_MMAP=1 do map;
    # the damaged files (records that do not fit what the pickle declares) are a clear error.
    files = crafted_item3(tmp_path)
    for name, path in files.items():
        proc = subprocess.run(
            [sys.executable, "-m", "mmfix", "inspect", str(path)], capture_output=True, text=True, timeout=120
        )
        lines = [x for x in proc.stdout.splitlines() if x.startswith("mmap:")]
        if name == "good":
            assert lines == ["mmap:       possible"], proc.stdout
        elif proc.returncode == 0:
            assert lines and lines[0].startswith("mmap:       not possible"), (name, proc.stdout)
        else:
            assert "cannot inspect checkpoint" in proc.stderr and "Traceback" not in proc.stderr, (name, proc.stderr)


# --- issue 19, item 4: costly files on the shared path --------------------------------------------


def test_costly_files_are_refused_on_the_shared_path_too(tmp_path: Path) -> None:
    """The cost check comes before the shared copy is made or used: two ranks of one job each
    refuse every crafted file of ``cost_payloads`` within seconds, sharing nothing for those the
    check refuses (the numpy one passes it and is refused by numpy's stand-in while loading, the
    nested BUILD states by torch's allowlist)."""
    import cost_payloads

    built = cost_payloads.build(tmp_path)
    # The ones the check lets through (torch's loader or numpy's stand-in refuses them) last: the
    # segment their load makes stays in the rank's maps.
    passes_the_check = {"empty_array_2_40_rows_in_size", "nested_build_states"}
    files = dict(sorted(built.items(), key=lambda item: item[0] in passes_the_check))
    spec = [(path, "full") for _, path in files.values()]
    for report, log in two_ranks(spec, f"costly-{tmp_path.name}"):
        assert report["acted"] == [], report["acted"]
        for name, got in zip(files, report["results"]):
            assert got.get("error") in ("CheckpointRefusedError", "CheckpointCorruptError"), (name, got, log[-2000:])
            assert got["seconds"] < 10, (name, got)
            if "nothing in it ran" in got["message"]:  # refused by the check: before any copy was made
                assert not got["shared"] and not got["file_mapped"], (name, got)
