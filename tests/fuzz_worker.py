"""Runs a range of seeded checkpoint mutations through mmfix's torch.load; prints one JSON line.

Started by tests/integration/test_fuzz_checkpoints.py in its own process, so that a crash
of the interpreter shows as a signal in the parent instead of killing the test run.
"""

from __future__ import annotations

import io
import json
import random
import struct
import sys
import tempfile
import time
import zipfile
from pathlib import Path

EXEC_EVENTS = (
    "os.system",
    "subprocess.Popen",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
    "os.fork",
    "exec",
    "compile",
    "ctypes.dlopen",
)
executed: list[str] = []


def audit(event: str, args: tuple) -> None:
    if event in EXEC_EVENTS and LOADING[0]:
        executed.append(event)


LOADING = [False]


def rebuild_zip(data: bytes, rng: random.Random, donor: bytes) -> bytes:
    """Spliced records: copy, swap or replace members, keeping each record's own valid CRC."""
    src = zipfile.ZipFile(io.BytesIO(data))
    other = zipfile.ZipFile(io.BytesIO(donor))
    names = src.namelist()
    records = {n: src.read(n) for n in names}
    donor_records = {n: other.read(n) for n in other.namelist()}
    kind = rng.randrange(4)
    a, b = rng.sample(names, 2)
    if kind == 0:
        records[a], records[b] = records[b], records[a]
    elif kind == 1:
        records[a] = records[b]
    elif kind == 2:
        d = rng.choice(list(donor_records))
        records[a] = donor_records[d]
    else:
        del records[a]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        for n in names:
            if n in records:
                z.writestr(n, records[n])
    return out.getvalue()


INTERESTING_INTS = (-1, 0, 1, 2, 3, 4, 7, 8, 16, 63, 255, 1 << 16, 1 << 30, (1 << 31) - 1, -(1 << 31))
INTERESTING_STRS = (
    "O8",
    "V8",
    "M8",
    "f8",
    "f4",
    "i8",
    "U3",
    "S0",
    "U0",
    "b1",
    "|",
    "<",
    ">",
    "=",
    "",
    "statistics_methods",
    "mean",
    "max",
    "min",
    "__init__",
    "__globals__",
    "latin1",
)


def _ops(pkl: bytes) -> list[tuple[str, object, int, int]]:
    """(opcode name, arg, start, end) for every opcode of a protocol-2 pickle."""
    import pickletools

    found = list(pickletools.genops(pkl))
    ends = [pos for _, _, pos in found[1:]] + [len(pkl)]
    return [(op.name, arg, pos, end) for (op, arg, pos), end in zip(found, ends)]


def _with_pickle(data: bytes, pkl: bytes) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        for name in src.namelist():
            z.writestr(name, pkl if name.endswith("data.pkl") else src.read(name))
    return out.getvalue()


def mutate_pickle(data: bytes, rng: random.Random, memo: bool) -> bytes:
    """Numpy dtype/array states and HistoryBuffer states (values near a numpy or mmengine
    global), or memo indices: re-encoded opcode by opcode, so the pickle stays well-formed."""
    name = next(n for n in zipfile.ZipFile(io.BytesIO(data)).namelist() if n.endswith("data.pkl"))
    pkl = zipfile.ZipFile(io.BytesIO(data)).read(name)
    ops = _ops(pkl)
    if memo:
        targets = [o for o in ops if o[0] in ("BINPUT", "BINGET", "LONG_BINPUT", "LONG_BINGET")]
    else:
        near = [o[2] for o in ops if o[0] == "GLOBAL" and str(o[1]).startswith(("numpy", "mmengine"))]
        targets = [
            o
            for o in ops
            if o[0] in ("BININT", "BININT1", "BININT2", "BINUNICODE", "NEWTRUE", "NEWFALSE", "NONE")
            and any(0 < o[2] - p < 400 for p in near)
        ]
    for _ in range(rng.randint(1, 3)):
        _op_name, _arg, start, end = rng.choice(targets)
        if memo:
            new = (
                b"j" + struct.pack("<I", rng.choice((0, 1, 5, 255, 256, 1 << 20, 0xFFFFFFF0)))
                if rng.random() < 0.5
                else rng.choice((b"q", b"h")) + bytes([rng.randrange(256)])
            )
        elif rng.random() < 0.5:
            new = b"J" + struct.pack("<i", rng.choice(INTERESTING_INTS))
        else:
            text = rng.choice(INTERESTING_STRS).encode()
            new = rng.choice((b"X" + struct.pack("<I", len(text)) + text, b"N", b"\x88", b"\x89", b")"))
        pkl = pkl[:start] + new + pkl[end:]
        ops = _ops_safe(pkl) or ops
        targets = [o for o in targets if o[2] != start] or targets
    return _with_pickle(data, pkl)


def _ops_safe(pkl: bytes) -> list | None:
    try:
        return _ops(pkl)
    except Exception:
        return None


def mutate_zip_directory(data: bytes, rng: random.Random) -> bytes:
    """Central directory fields: offsets, sizes, methods, names (duplicates), entry counts."""
    buf = bytearray(data)
    eocd = buf.rfind(b"PK\x05\x06")
    starts = [i for i in range(len(buf)) if buf.startswith(b"PK\x01\x02", i)]
    for _ in range(rng.randint(1, 3)):
        choice = rng.randrange(6)
        at = rng.choice(starts)
        if choice == 0:  # local header offset
            struct.pack_into("<L", buf, at + 42, rng.choice((0, rng.randrange(len(buf)), 0xFFFFFFFF)))
        elif choice == 1:  # compressed / uncompressed size
            struct.pack_into("<L", buf, at + rng.choice((20, 24)), rng.choice((0, 1, len(buf), 1 << 31)))
        elif choice == 2:  # compression method: deflate over stored bytes
            struct.pack_into("<H", buf, at + 10, rng.choice((8, 12, 14, 99)))
        elif choice == 3:  # a name copied from another entry (same length names only)
            other = rng.choice(starts)
            n1, n2 = struct.unpack_from("<H", buf, at + 28)[0], struct.unpack_from("<H", buf, other + 28)[0]
            if n1 == n2:
                buf[at + 46 : at + 46 + n1] = buf[other + 46 : other + 46 + n2]
        elif choice == 4 and eocd >= 0:  # entry counts
            n = rng.choice((0, 1, 0xFFFF, rng.randrange(1, 40)))
            struct.pack_into("<HH", buf, eocd + 8, n, n)
        elif eocd >= 0:  # central directory size / offset
            struct.pack_into("<L", buf, eocd + rng.choice((12, 16)), rng.randrange(len(buf) + 64))
    return bytes(buf)


def mutate(data: bytes, rng: random.Random, donor: bytes) -> tuple[str, bytes]:
    kind = rng.randrange(10)  # half of the cases mutate the structures crafted files abuse
    if kind in (5, 6):
        return "numpy-state", mutate_pickle(data, rng, memo=False)
    if kind == 7:
        return "memo", mutate_pickle(data, rng, memo=True)
    if kind in (8, 9):
        return "zip-directory", mutate_zip_directory(data, rng)
    buf = bytearray(data)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return "bitflip", bytes(buf)
    if kind == 1:
        return "truncate", bytes(buf[: rng.randrange(len(buf))])
    if kind == 2:
        start = rng.randrange(len(buf))
        length = rng.randint(1, 64)
        buf[start : start + length] = bytes(rng.randrange(256) for _ in range(length))
        return "overwrite", bytes(buf)
    if kind == 3:
        return "splice", rebuild_zip(data, rng, donor)
    start = rng.randrange(len(buf))
    return "insert", bytes(buf[:start]) + bytes(rng.randrange(256) for _ in range(rng.randint(1, 32))) + bytes(
        buf[start:]
    )


def main() -> None:
    source, donor_path, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    import torch

    import mmfix  # noqa: F401
    from mmfix import CheckpointCorruptError, CheckpointRefusedError
    from mmfix._checkpoint.report import inspect_checkpoint

    data = Path(source).read_bytes()
    donor = Path(donor_path).read_bytes()
    # Warm-up on seeds outside the range: modules that loading imports lazily (their
    # import runs code, as every import does) are imported before anything is watched.
    for case in range(10_000_000, 10_000_100):
        try:
            torch.load(io.BytesIO(mutate(data, random.Random(case), donor)[1]))
        except BaseException:
            pass
    sys.addaudithook(audit)
    outcomes: dict[str, int] = {}
    kinds: dict[str, int] = {}
    bad: list[dict] = []
    disagree: list[dict] = []  # inspect called loadable what the loader did not load
    slowest = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzzed.pth"
        for case in range(first, first + count):
            rng = random.Random(case)
            kind, blob = mutate(data, rng, donor)
            path.write_bytes(blob)
            start = time.perf_counter()
            LOADING[0] = True
            verdict = None
            try:
                if case % 5 == 0:
                    try:  # the static reader of mmfix inspect, on the same file
                        verdict = inspect_checkpoint(str(path))["loadable_with_weights_only"]
                    except CheckpointCorruptError:
                        verdict = False
                torch.load(str(path) if case % 4 else io.BytesIO(blob))
                outcome = "loaded"
            except (CheckpointCorruptError, CheckpointRefusedError) as exc:
                outcome = type(exc).__name__
            except BaseException as exc:
                outcome = "other"
                bad.append({"case": case, "kind": kind, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            finally:
                LOADING[0] = False
            # inspect may call a file damaged that the loader reads anyway (torch checks no CRC),
            # never loadable one the loader refuses.
            if verdict and outcome != "loaded":
                disagree.append({"case": case, "kind": kind, "inspect_loadable": verdict, "load": outcome})
            slowest = max(slowest, time.perf_counter() - start)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            kinds[kind] = kinds.get(kind, 0) + 1
    print(
        "FUZZ "
        + json.dumps(
            {
                "outcomes": outcomes,
                "kinds": kinds,
                "bad": bad[:20],
                "disagree": disagree[:20],
                "executed": executed,
                "slowest_s": slowest,
            }
        )
    )


if __name__ == "__main__":
    main()
