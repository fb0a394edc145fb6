"""Start-up and per-call cost of mmfix, against the unpatched baseline in the same run.

    python benchmarks/startup_overhead.py [--runs 40]

Prints the median wall and CPU time of `python -c 'pass'` vs `python -c 'import mmfix'`,
and of `python -c 'pass'` in two throw-away virtual environments that differ only
by the `.pth` hook (`mmfix hook install`): what every Python process of an
environment pays once the hook is installed (targets: under 5 ms added, each).
Then the per-call time of a function vs the same function behind mmfix's wrapper,
and of mmfix's torch.load logic around a no-op loader (target: under 2 µs added).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import timeit
import venv

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env() -> dict[str, str]:
    # Bytecode must be cached, as after any pip install: with PYTHONDONTWRITEBYTECODE a
    # checkout would recompile mmfix at every start and measure the compiler instead. The
    # commands run in this checkout (`-c` puts the current folder first on sys.path), so its
    # mmfix is measured whatever PYTHONPATH says.
    drop = ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONSTARTUP")
    return {k: v for k, v in os.environ.items() if not k.startswith("MMFIX_") and k not in drop}


def _run_once(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms of the child: user + system). CPU time barely moves when other
    processes compete for the cores; wall time is what a user waits."""
    start = timeit.default_timer()
    proc = subprocess.Popen(command, env=env, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (timeit.default_timer() - start) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{command} exited {proc.returncode}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def _paired_ms(commands: tuple[list[str], list[str]], runs: int) -> dict[str, tuple[float, float, float]]:
    """Median start-up of each command, measured interleaved (baseline, mmfix, baseline, ...)
    so drift of a shared machine hits both; plus the median of the paired differences. For
    wall and CPU time each: {"wall": (baseline, with mmfix, added), "cpu": (...)}."""
    env = _env()
    for command in commands:
        _run_once(command, env)  # warm-up: writes the .pyc files
    samples: dict[str, tuple[list[float], list[float]]] = {"wall": ([], []), "cpu": ([], [])}
    for _ in range(runs):
        for i, command in enumerate(commands):
            wall, cpu = _run_once(command, env)
            samples["wall"][i].append(wall)
            samples["cpu"][i].append(cpu)
    result = {}
    for kind, (base, ours) in samples.items():
        diffs = [b - a for a, b in zip(base, ours)]
        result[kind] = (statistics.median(base), statistics.median(ours), statistics.median(diffs))
    return result


def _venv(root: str, hook: bool) -> str:
    """A virtual environment that sees this interpreter's packages and this checkout through a
    path-only .pth (which runs no code), with or without mmfix's hook. Returns its python."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    python = os.path.join(root, "bin", "python")
    purelib = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    with open(os.path.join(purelib, "_outer.pth"), "w", encoding="utf-8") as fh:
        fh.write("\n".join([REPO, sysconfig.get_paths()["purelib"]]) + "\n")
    if hook:
        subprocess.run([python, "-m", "mmfix", "hook", "install"], env=_env(), check=True, capture_output=True)
        active = subprocess.check_output(
            [python, "-c", "import sys; print('mmfix' in sys.modules)"], env=_env(), text=True
        ).strip()
        assert active == "True", "the hook did not activate mmfix in the benchmark's environment"
    return python


def _report(what: str, runs: int, figures: dict[str, tuple[float, float, float]]) -> None:
    print(f"{what}, median of {runs} interleaved runs (target: < +5 ms):")
    for kind, (base, with_mmfix, added) in figures.items():
        print(
            f"  {kind:4} baseline {base:.1f} ms, with mmfix {with_mmfix:.1f} ms -> +{added:.2f} ms "
            f"(median paired difference), ratio {with_mmfix / base:.3f}"
        )


def _call_us(fn, number: int = 200_000, repeat: int = 7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def plain(a, b=1):
    return a


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()

    plain = [sys.executable, "-c", "pass"]
    probe = "import mmfix, os; assert mmfix.__file__.startswith(os.getcwd())"
    subprocess.run([sys.executable, "-c", probe], env=_env(), cwd=REPO, check=True)  # this checkout's mmfix
    _report("`import mmfix`", args.runs, _paired_ms((plain, [sys.executable, "-c", "import mmfix"]), args.runs))
    with tempfile.TemporaryDirectory(prefix="mmfix-startup-") as tmp:
        without = _venv(os.path.join(tmp, "plain"), hook=False)
        hooked = _venv(os.path.join(tmp, "hooked"), hook=True)
        _report(
            "`python -c pass` with the .pth hook",
            args.runs,
            _paired_ms(([without, "-c", "pass"], [hooked, "-c", "pass"]), args.runs),
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
