"""The two checks the node's shared checkpoint copy rests on, tested directly (issue 19, items 2 and 3):
``mappable`` (a mapped load reads exactly what a plain load reads) and ``peers`` (who is at the other
end of the socket). The ranks themselves are tested in tests/integration/test_shared_load_crafted.py."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from mmfix._checkpoint import mappable, peers
from zip_crafting import Tensor, checkpoint

needs_placement = pytest.mark.skipif(
    not mappable.reader_reports_placement(),
    reason="this torch's zip reader does not report where records lie (torch 2.7): mapped loads are never checked "
    "there, and the ranks read their own copies",
)


def records_of(*sizes: int, seed: int = 0) -> tuple[dict[str, bytes], dict[str, Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    records = {str(i): torch.randn(n, generator=gen).numpy().tobytes() for i, n in enumerate(sizes)}
    return records, {f"t{i}": Tensor(str(i), n) for i, n in enumerate(sizes)}


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("torch.save", None),
        ("as crafted", None),
        ("zip64 directory", None),
        ("compressed record", "is compressed"),
        ("declared larger", "holds 400 bytes and the pickle declares 404"),
        ("declared smaller", "holds 400 bytes and the pickle declares 396"),
        ("unaligned record", "is not aligned to 64 bytes"),
        ("two entries, one record", "two of its records share bytes"),
        ("int key", "in a form torch.save never writes"),
        ("hole before the directory", "neither storages nor the records torch.save writes"),
        ("not a zip", "no zip directory record"),
    ],
)
@needs_placement
def test_verdicts(tmp_path: Path, case: str, reason: str | None) -> None:
    path = tmp_path / "c.pth"
    records, tensors = records_of(100, 300)
    if case == "torch.save":
        torch.save({"a": torch.randn(100), "b": torch.arange(7), "c": torch.zeros(0)}, path)
    elif case == "not a zip":
        path.write_bytes(b"PK\x03\x04" + bytes(100))
    else:
        options: dict[str, Any] = {
            "as crafted": {},
            "zip64 directory": {"zip64": True},
            "compressed record": {"deflate": ("1",)},
            "declared larger": {"tensors": {**tensors, "t0": Tensor("0", 101)}},
            "declared smaller": {"tensors": {**tensors, "t0": Tensor("0", 99)}},
            "unaligned record": {"align": 0},
            "two entries, one record": {"tensors": {**tensors, "t2": Tensor("2", 100)}, "aliases": {"2": "0"}},
            "int key": {"tensors": {**tensors, "t0": Tensor(0, 100)}},
            "hole before the directory": {"gap": 200 << 20},
        }[case]
        checkpoint(path, options.pop("tensors", tensors), records, **options)
    verdict = mappable.check(str(path))
    if reason is None:
        assert isinstance(verdict, mappable.Layout), verdict
        # the spans are exactly the storages' bytes, as torch's own reader places them
        reader = torch._C.PyTorchFileReader(str(path))
        keys = sorted(r for r in reader.get_all_records() if r.startswith("data/"))
        assert sorted(verdict.spans) == sorted((reader.get_record_offset(k), reader.get_record_size(k)) for k in keys)
    else:
        assert isinstance(verdict, str) and reason in verdict, verdict


@needs_placement
def test_zip64_directory_gives_the_same_layout(tmp_path: Path) -> None:
    records, tensors = records_of(100, 300, 5)
    checkpoint(tmp_path / "32.pth", tensors, records)
    checkpoint(tmp_path / "64.pth", tensors, records, zip64=True)
    small, wide = mappable.check(str(tmp_path / "32.pth")), mappable.check(str(tmp_path / "64.pth"))
    assert isinstance(small, mappable.Layout) and isinstance(wide, mappable.Layout)
    assert small.spans == wide.spans  # the records come before the directory: same offsets


@needs_placement
def test_mappable_verdict_is_what_a_mapped_load_confirms(tmp_path: Path) -> None:
    """Randomised crafted files: wherever mmfix says a mapped load reads what a plain load reads,
    stock torch's mapped and plain loads give the same tensors, and none aliases another."""
    gen = torch.Generator().manual_seed(19)
    rnd = random.Random(19)
    mappable_seen = refused_seen = 0
    defects = ("declared", "int key", "deflated", "unaligned", "8-aligned", "aliased", "zip64")
    for trial in range(60):
        chosen = set(rnd.sample(defects, rnd.choice([0, 0, 0, 1, 1, 2])))
        n = rnd.randint(1, 4)
        sizes = [rnd.randint(0, 3000) for _ in range(n)]
        records = {str(i): torch.randn(s, generator=gen).numpy().tobytes() for i, s in enumerate(sizes)}
        tensors = {f"t{i}": Tensor(str(i), s) for i, s in enumerate(sizes)}
        victim = f"t{rnd.randrange(n)}"
        if "declared" in chosen:
            tensors[victim].numel = max(0, tensors[victim].numel + rnd.choice([1, -1, 16]))
        if "int key" in chosen:
            tensors[victim].key = int(tensors[victim].key)
        aliases = {str(n): "0"} if "aliased" in chosen else {}
        if aliases:
            tensors["alias"] = Tensor(str(n), sizes[0])
        path = tmp_path / f"r{trial}.pth"
        align = 0 if "unaligned" in chosen else 8 if "8-aligned" in chosen else 64
        deflate = (str(tensors[victim].key),) if "deflated" in chosen else ()
        checkpoint(path, tensors, records, deflate=deflate, align=align, aliases=aliases, zip64="zip64" in chosen)
        verdict = mappable.check(str(path))
        if isinstance(verdict, str):
            refused_seen += 1
            continue
        mappable_seen += 1
        plain = torch.load(path, map_location="cpu")
        mapped = torch.load(path, map_location="cpu", mmap=True)
        assert sorted(plain) == sorted(mapped)
        for k in plain:
            assert torch.equal(plain[k], mapped[k]), (trial, k)
            assert mapped[k].data_ptr() % mappable.ALIGNMENT == 0 or mapped[k].numel() == 0
        for k in mapped:  # an in-place update of one tensor changes no other, as with plain loads
            others = {o: v.clone() for o, v in mapped.items() if o != k}
            mapped[k].add_(1)
            assert all(torch.equal(v, mapped[o]) for o, v in others.items()), (trial, k)
    assert mappable_seen >= 10 and refused_seen >= 10, (mappable_seen, refused_seen)


# --- peers ---------------------------------------------------------------------------------------


def test_a_process_of_this_container_is_no_stranger() -> None:
    a, b = socket.socketpair()
    with a, b:
        assert peers.stranger(a) is None


@pytest.mark.parametrize("pidfd_from_socket", [True, False], ids=["SO_PEERPIDFD", "pidfd_open (kernels before 6.5)"])
def test_a_peer_that_has_exited_is_a_stranger(monkeypatch: pytest.MonkeyPatch, pidfd_from_socket: bool) -> None:
    """Its pid could already name another process: what was read of it means nothing."""
    if not pidfd_from_socket:
        monkeypatch.setattr(peers, "SO_PEERPIDFD", 0x7FFF)  # no such option: the older kernels' path
    name = b"\0mmfix-test-peers-" + str(os.getpid()).encode()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with server:
        server.bind(name)
        server.listen(1)
        code = f"import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect({name!r})"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)  # connects, then exits
        conn, _ = server.accept()
        with conn:
            time.sleep(0.2)  # reaped by now
            assert peers.stranger(conn) == "a process that has already exited"
