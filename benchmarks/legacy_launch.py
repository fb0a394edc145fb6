"""Wall time of the legacy `--gpus 2` command vs the hand-written torchrun command, same run.

    python benchmarks/legacy_launch.py [--repeat 5]

Both train the bundled example on CPU with 2 workers (gloo) and the same
settings; runs alternate so drift affects both. Prints the median ratio
(target <= 1.05).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "examples" / "tools" / "train.py"
CONFIG = REPO / "examples" / "configs" / "toy_det.py"
MMFIX_RUN = str(Path(sys.executable).parent / "mmfix-run")


def timed(cmd: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMFIX_")}
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    legacy_t, manual_t = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            legacy = [
                MMFIX_RUN,
                sys.executable,
                str(TRAIN),
                str(CONFIG),
                "--work-dir",
                f"{tmp}/l{i}",
                "--gpus",
                "2",
                "--seed",
                "0",
                "--no-validate",
            ]
            manual = [
                MMFIX_RUN,
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc_per_node",
                "2",
                str(TRAIN),
                str(CONFIG),
                "--work-dir",
                f"{tmp}/m{i}",
                "--launcher",
                "pytorch",
                "--cfg-options",
                "randomness.seed=0",
                "val_cfg=None",
                "val_dataloader=None",
                "val_evaluator=None",
            ]
            legacy_t.append(timed(legacy))
            manual_t.append(timed(manual))
    lm, mm = statistics.median(legacy_t), statistics.median(manual_t)
    print(
        f"legacy `--gpus 2`: median {lm:.2f} s; hand-written torchrun: median {mm:.2f} s; "
        f"ratio {lm / mm:.3f} (target <= 1.05; {args.repeat} runs each)"
    )


if __name__ == "__main__":
    main()
