"""Start-up and per-call cost of mmfix, against the unpatched baseline in the same run.

    python benchmarks/startup_overhead.py [--runs 40]

Prints the median wall time of `python -c 'pass'` vs `python -c 'import mmfix'`
(targets: under 5 ms added), and the per-call time of a function vs the same
function behind mmfix's wrapper, and of mmfix's torch.load logic around a no-op
loader (target: under 2 µs added).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import timeit


def _interpreter_ms(codes: tuple[str, str], runs: int) -> tuple[float, float, float]:
    """Median start-up of each code, measured interleaved (baseline, mmfix, baseline, ...)
    so drift of a shared machine hits both; plus the median of the paired differences."""
    # Bytecode must be cached, as after any pip install: with PYTHONDONTWRITEBYTECODE a
    # checkout would recompile mmfix at every start and measure the compiler instead.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMFIX_") and k != "PYTHONDONTWRITEBYTECODE"}
    for code in codes:
        subprocess.run([sys.executable, "-c", code], env=env, check=True)  # warm-up: writes the .pyc files
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for code, bucket in zip(codes, samples):
            start = timeit.default_timer()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            bucket.append((timeit.default_timer() - start) * 1000)
    diffs = [b - a for a, b in zip(*samples)]
    return statistics.median(samples[0]), statistics.median(samples[1]), statistics.median(diffs)


def _call_us(fn, number: int = 200_000, repeat: int = 7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def plain(a, b=1):
    return a


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()

    base, with_mmfix, added = _interpreter_ms(("pass", "import mmfix"), args.runs)
    print(
        f"interpreter start, median of {args.runs} interleaved runs: baseline {base:.1f} ms, with "
        f"`import mmfix` {with_mmfix:.1f} ms -> +{added:.2f} ms (median paired difference), ratio "
        f"{with_mmfix / base:.3f} (target: < +5 ms)"
    )

    from mmfix import _wrapping
    from mmfix._patches import torch_load

    module = sys.modules[__name__]
    original = module.plain
    t_plain = _call_us(lambda: original(1))
    swap = _wrapping.wrap(module, "plain", lambda w, i, a, k: w(*a, **k))
    wrapped = module.plain
    t_wrapped = _call_us(lambda: wrapped(1))
    swap.undo()
    print(
        f"call: plain {t_plain:.3f} us, mmfix wrapper {t_wrapped:.3f} us -> +{t_wrapped - t_plain:.3f} us, "
        f"ratio {t_wrapped / t_plain:.2f} (target: < +2 us)"
    )

    def noop_load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **kw):
        return map_location

    module.plain = noop_load
    swap = _wrapping.wrap(module, "plain", torch_load._patched_load)
    patched = module.plain
    t_noop = _call_us(lambda: noop_load("x.pth"), number=100_000)
    t_logic = _call_us(lambda: patched("x.pth"), number=100_000)
    swap.undo()
    print(
        f"torch.load logic around a no-op loader: {t_noop:.3f} us -> {t_logic:.3f} us "
        f"(+{t_logic - t_noop:.3f} us per load; a real load takes milliseconds)"
    )


if __name__ == "__main__":
    main()
