"""Results of pure computations kept for the rest of one CI run (issue 29).

Some tests' expensive half does not depend on the environment under test: real MMDetection
2.28.2 (one environment per run, MMFIX_MMDET2_ENV) building and running the same 2.x models from
the same files. The main suite and each version-matrix cell computed it again (MaskFormer's and
Mask2Former's 2.x side: ~35 s of CPU per cell). With ``MMFIX_TEST_CACHE`` set (``.ci/run`` sets a
folder of its own, removed at its start), the first computes and the others copy its files; the
key is a digest of everything the result depends on (the scripts that compute it, the 2.x
environment's python, every input file's bytes), so a changed input is computed afresh. Unset
(a developer's run), everything is computed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path


def digest(parts: Iterable[str | bytes | Path]) -> str:
    """sha256 over ``parts``: strings, bytes, files (their bytes: a test's temporary folder differs
    from run to run) and folders (each file under them by its path in the folder, and its bytes)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path) and part.is_dir():
            for f in sorted(p for p in part.rglob("*") if p.is_file()):
                h.update(b"\0entry\0" + f.relative_to(part).as_posix().encode() + b"\0" + f.read_bytes())
        elif isinstance(part, Path):
            h.update(b"\0file\0" + part.read_bytes())
        else:
            h.update(b"\0part\0" + (part.encode() if isinstance(part, str) else part))
    return h.hexdigest()


def cached(kind: str, key: str, outputs: list[Path], produce: Callable[[], None]) -> bool:
    """Fills the folders ``outputs`` with what ``produce()`` writes there, or with a copy of what
    an earlier call with the same ``kind`` and ``key`` kept in this run; True when copied."""
    root = os.environ.get("MMFIX_TEST_CACHE")
    if not root:
        produce()
        return False
    entry = Path(root) / f"{kind}-{key[:32]}"
    if entry.is_dir():
        for i, out in enumerate(outputs):
            shutil.copytree(entry / str(i), out, dirs_exist_ok=True)
        return True
    produce()
    Path(root).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{kind}-", dir=root))
    for i, out in enumerate(outputs):
        shutil.copytree(out, staging / str(i))
    try:
        staging.rename(entry)  # whole or not at all: a cell beside this one may read it at once
    except OSError:  # kept by another process meanwhile: the same inputs, the same result
        shutil.rmtree(staging, ignore_errors=True)
    return False
