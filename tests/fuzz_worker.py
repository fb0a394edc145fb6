"""Runs a range of seeded checkpoint mutations through mmfix's torch.load; prints one JSON line.

Started by tests/integration/test_fuzz_checkpoints.py in its own process, so that a crash
of the interpreter shows as a signal in the parent instead of killing the test run.
"""
from __future__ import annotations

import io
import json
import random
import sys
import tempfile
import time
import zipfile
from pathlib import Path

EXEC_EVENTS = ("os.system", "subprocess.Popen", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
               "exec", "compile", "ctypes.dlopen")
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


def mutate(data: bytes, rng: random.Random, donor: bytes) -> tuple[str, bytes]:
    kind = rng.randrange(5)
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
        buf[start:start + length] = bytes(rng.randrange(256) for _ in range(length))
        return "overwrite", bytes(buf)
    if kind == 3:
        return "splice", rebuild_zip(data, rng, donor)
    start = rng.randrange(len(buf))
    return "insert", bytes(buf[:start]) + bytes(rng.randrange(256) for _ in range(rng.randint(1, 32))) + bytes(buf[start:])


def main() -> None:
    source, donor_path, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    import mmfix  # noqa: F401
    import torch
    from mmfix import CheckpointCorruptError, CheckpointRefusedError

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
    bad: list[dict] = []
    slowest = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzzed.pth"
        for case in range(first, first + count):
            rng = random.Random(case)
            kind, blob = mutate(data, rng, donor)
            path.write_bytes(blob)
            start = time.perf_counter()
            LOADING[0] = True
            try:
                torch.load(str(path) if case % 4 else io.BytesIO(blob))
                outcome = "loaded"
            except (CheckpointCorruptError, CheckpointRefusedError) as exc:
                outcome = type(exc).__name__
            except BaseException as exc:  # noqa: BLE001 - anything else is a finding
                outcome = "other"
                bad.append({"case": case, "kind": kind, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            finally:
                LOADING[0] = False
            slowest = max(slowest, time.perf_counter() - start)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print("FUZZ " + json.dumps({"outcomes": outcomes, "bad": bad[:20], "executed": executed,
                                "slowest_s": slowest}))


if __name__ == "__main__":
    main()
