"""``mmfix doctor``: everything a bug report about a training launch needs, in one paste."""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from . import __version__, _log, _settings
from . import _pth_installer as hook
from ._ports import port_free
from ._run import BOOTSTRAP_DIR

_DIST_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "NNODES",
    "NODE_RANK",
    "PORT",
    "GPUS",
)
_SLURM_VARS = (
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_NODELIST",
    "SLURM_JOB_GPUS",
    "SLURM_GPUS_ON_NODE",
)


def _version(dist: str) -> str | None:
    # mmcv is installed as mmcv, mmcv-lite (no compiled ops) or mmcv-full (1.x): one import name
    for name in _DIST_NAMES.get(dist, (dist,)):
        try:
            return metadata.version(name) + ("" if name == dist else f" ({name})")
        except metadata.PackageNotFoundError:
            continue
    return None


_DIST_NAMES = {"mmcv": ("mmcv", "mmcv-lite", "mmcv-full")}


def _parse(version: str | None) -> tuple[int, ...]:
    if not version:
        return ()
    parts = []
    for piece in version.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
        if not piece.isdigit():
            break
    return tuple(parts)


def known_problems(versions: dict[str, str | None], cuda_available: bool) -> list[str]:
    problems = []
    torch_v, mmengine_v = _parse(versions.get("torch")), _parse(versions.get("mmengine"))
    mmcv_v, mmdet_v = _parse(versions.get("mmcv")), _parse(versions.get("mmdet"))
    if torch_v >= (2, 6) and mmengine_v and mmengine_v <= (0, 10, 7):
        problems.append(
            f"torch {versions['torch']} loads with weights_only=True and mmengine {versions['mmengine']} checkpoints "
            "hold a HistoryBuffer: resume fails without mmfix (mmfix's torch_load patch fixes it safely)."
        )
    if mmdet_v and mmdet_v[0] == 3 and mmcv_v and not ((2, 0) <= mmcv_v < (2, 3)):
        problems.append(
            f"mmdet {versions['mmdet']} asserts mmcv>=2.0.0rc4,<2.2.0 but mmcv {versions['mmcv']} "
            "is installed: `import mmdet` fails (mmfix relaxes that bound for mmcv 2.2 only)."
        )
    if mmdet_v and mmdet_v[0] == 2 and torch_v >= (2,):
        problems.append(
            f"mmdet {versions['mmdet']} is a 2.x release; its tools predate torch 2 (--local-rank). "
            "mmfix translates 2.x command lines for 3.x tools."
        )
    if not cuda_available:
        problems.append(
            "no CUDA device is usable here: distributed runs use gloo on CPU under mmfix "
            "(stock MMEngine fails in torch.cuda.set_device)."
        )
    return problems


def collect() -> dict[str, Any]:
    import mmfix

    report: dict[str, Any] = {
        "python": {"version": platform.python_version(), "executable": sys.executable, "platform": platform.platform()},
        "packages": {name: _version(name) for name in ("torch", "mmengine", "mmcv", "mmdet", "wrapt", "numpy")},
        "mmfix": {"version": __version__},
    }
    torch_info: dict[str, Any] = {}
    try:
        import torch

        torch_info = {
            "version": torch.__version__,
            "cuda_build": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(),
            "device_count": 0,
            "devices": [],
            "nccl": None,
            "distributed_available": torch.distributed.is_available(),
        }
        if torch_info["cuda_available"]:
            torch_info["device_count"] = torch.cuda.device_count()
            torch_info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch_info["device_count"])]
            try:
                torch_info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
            except Exception:
                torch_info["nccl"] = None
    except Exception as exc:  # torch missing or broken: that is the finding
        torch_info = {"error": f"{type(exc).__name__}: {exc}"}
    report["torch"] = torch_info
    try:  # so that the MMEngine patches report whether they apply, not "pending"
        import mmengine.runner  # noqa: F401
    except Exception:
        pass
    report["environment"] = {
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "distributed": {k: os.environ[k] for k in _DIST_VARS if k in os.environ},
        "slurm": {k: os.environ[k] for k in _SLURM_VARS if k in os.environ},
        "mmfix_variables": _settings.set_variables(),
    }
    report["ports"] = {"29500_free": port_free(29500)}
    # status: this doctor process, which imported mmfix, torch and MMEngine itself (so the
    # patches say whether they apply); new_python: what `python train.py` gets from this shell.
    report["mmfix"].update(status=mmfix.status(), new_python=new_python())
    report["known_problems"] = known_problems(report["packages"], bool(torch_info.get("cuda_available")))
    report["mmcv_ops"] = mmcv_ops_report()
    report["relaxed_bounds"] = relaxed_bounds()
    return report


def mmcv_ops_report() -> dict[str, Any]:
    """Which kernels back mmcv's ops here, per op family: compiled mmcv's, or mmfix's."""
    from ._ops import _ext, _table, _torchvision
    from ._patches import mmcv_ops

    _log.said("mmcv-ops-supplied")  # the notice that mmfix supplies the ops: this report says it
    try:
        import mmcv.ops  # noqa: F401  (imports mmcv._ext: compiled, or mmfix's stand-in)
    except Exception as exc:
        return {"provider": None, "error": f"{type(exc).__name__}: {exc}", "families": {}}
    provider, failure = mmcv_ops.provider()
    families: dict[str, str] = {}
    for name, family in _table.EXT_FUNCTIONS.items():
        key = family
        if family.startswith("_"):  # build information, not an op
            continue
        if provider == "compiled":
            families[key] = "compiled mmcv"
        elif _ext.implementation(name)[1] is None:
            families.setdefault(key, "not available (an error naming the op if a model calls it)")
        else:
            module = importlib.import_module(f"mmfix._ops.{family}")
            fast = getattr(module, "TORCHVISION_FAST_PATH", False) and _torchvision.ops() is not None
            families[key] = "mmfix, torchvision's kernels" if fast else "mmfix, PyTorch"
    return {"provider": provider, "compiled_failure": failure, "families": families}


def relaxed_bounds() -> dict[str, str]:
    """Toolboxes whose assert on mmcv's version mmfix would raise here (without importing them)."""
    from ._patches import mmcv_bound

    found = {}
    mmcv_version = mmcv_bound.installed_mmcv_version()
    for bound in mmcv_bound.BOUNDS:
        try:
            spec = importlib.util.find_spec(bound.package)
            source = Path(spec.origin).read_text() if spec is not None and spec.origin else ""
        except (ImportError, OSError, ValueError):
            continue
        if mmcv_bound.needs_relaxing(bound.package, source, mmcv_version):
            found[bound.package] = f"accepts mmcv {mmcv_version} (its own bound: mmcv < 2.2.0)"
    return found


def format_report(report: dict[str, Any]) -> str:
    t = report["torch"]
    env = report["environment"]
    mm = report["mmfix"]
    lines = [
        "mmfix doctor",
        "",
        "## Versions",
        f"- Python {report['python']['version']} ({report['python']['executable']}) on {report['python']['platform']}",
    ]
    for name, version in report["packages"].items():
        lines.append(f"- {name}: {version or 'not installed'}")
    lines += ["", "## torch and devices"]
    if "error" in t:
        lines.append(f"- torch cannot be imported: {t['error']}")
    else:
        lines.append(
            f"- torch {t['version']}, CUDA build: {t['cuda_build'] or 'none (CPU-only build)'}, "
            f"NCCL: {t['nccl'] or '-'}"
        )
        lines.append(
            f"- CUDA available: {t['cuda_available']}; visible GPUs: {t['device_count']}"
            + (f" ({', '.join(t['devices'])})" if t["devices"] else "")
        )
    cvd = env["CUDA_VISIBLE_DEVICES"]
    lines.append(f"- CUDA_VISIBLE_DEVICES: {'not set' if cvd is None else repr(cvd)}")
    lines += ["", "## Launch environment"]
    lines.append("- distributed variables: " + (", ".join(f"{k}={v}" for k, v in env["distributed"].items()) or "none"))
    lines.append("- SLURM variables: " + (", ".join(f"{k}={v}" for k, v in env["slurm"].items()) or "none"))
    lines.append(
        f"- port 29500 (torchrun's default master port): {'free' if report['ports']['29500_free'] else 'IN USE'}"
    )
    lines += ["", "## mmfix", f"- version {mm['version']}"]
    lines += ["- " + line.strip() for line in format_new_python(mm["new_python"])]
    lines.append("- patches in this doctor process (it imported mmfix, torch and MMEngine itself):")
    for name, info in mm["status"]["patches"].items():
        lines.append(f"  - {name}: {info['state']} ({info['reason']})")
    if env["mmfix_variables"]:
        lines.append("- MMFIX_* set: " + ", ".join(f"{k}={v}" for k, v in env["mmfix_variables"].items()))
    ops = report.get("mmcv_ops") or {}
    lines += ["", "## mmcv ops"]
    if ops.get("error"):
        lines.append(f"- mmcv.ops cannot be imported: {ops['error']}")
    elif ops.get("provider") == "compiled":
        lines.append("- compiled mmcv ops (mmcv._ext) are in use for every op family")
    else:
        if ops.get("compiled_failure"):
            lines.append(f"- mmcv's compiled ops failed to load ({ops['compiled_failure']}); mmfix's are used")
        else:
            lines.append("- no compiled mmcv ops here (mmcv-lite): mmfix supplies mmcv._ext in PyTorch")
        by_kind: dict[str, list[str]] = {}
        for family, kind in ops.get("families", {}).items():
            by_kind.setdefault(kind, []).append(family)
        for kind, names in by_kind.items():
            lines.append(f"- {kind}: {', '.join(sorted(names))}")
    for package, what in (report.get("relaxed_bounds") or {}).items():
        lines.append(f"- {package} {what}: mmfix raises that bound in memory (patch mmcv_bound)")
    lines += ["", "## Known problems"]
    lines += [f"- {p}" for p in report["known_problems"]] or ["- none found"]
    return "\n".join(lines)


# A `python` started from this shell: site-packages' .pth files, sitecustomize and
# mmfix-run's bootstrap all act at interpreter start, before any script code, so
# whether mmfix got loaded by then is exactly whether a door applies.
_PROBE = "import json, sys; m = sys.modules.get('mmfix'); print(json.dumps(m.status() if m else None))"


def _mmfix_sitecustomize_on(pythonpath: list[str]) -> bool:
    for folder in pythonpath:
        path = os.path.join(folder, "sitecustomize.py")
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                if "mmfix" in fh.read():
                    return True
        except OSError:
            continue
    return False


def new_python(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Whether ``python train.py`` started now from this shell runs with mmfix, and through which doors.

    Answered by starting that Python (``python`` on PATH, else this interpreter) with this
    environment, not by looking at the process that runs the mmfix command (which imported
    mmfix itself). PYTHONSTARTUP is reported separately: it applies to interactive sessions only.
    """
    import json
    import shutil
    import subprocess

    env = dict(os.environ if env is None else env)
    python = shutil.which("python", path=env.get("PATH")) or sys.executable
    status: dict[str, Any] | None = None
    error = None
    try:
        proc = subprocess.run([python, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
        status = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
        if proc.returncode != 0:
            error = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit status {proc.returncode}"
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    pythonpath = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    startup = env.get("PYTHONSTARTUP")
    from . import _interactive_startup as interactive_startup

    return {
        "python": python,
        "active": bool(status and status["enabled"] and status["front_doors"]),
        "disabled": bool(status and not status["enabled"]),
        "front_doors": status["front_doors"] if status else [],
        "patches": {n: {"state": p["state"], "reason": p["reason"]} for n, p in status["patches"].items()}
        if status
        else {},
        "error": error,
        "doors": {
            "pth_hook_installed": hook.status()["installed"],
            "sitecustomize_on_pythonpath": _mmfix_sitecustomize_on(pythonpath),
            "inside_mmfix_run": BOOTSTRAP_DIR in pythonpath,
            "pythonstartup_interactive_only": bool(startup)
            and os.path.abspath(startup or "") == os.path.abspath(interactive_startup.__file__),
        },
    }


def format_new_python(info: dict[str, Any]) -> list[str]:
    doors = info["doors"]
    if info["active"]:
        head = (
            f"mmfix is active for `python` started from this shell ({info['python']}), through: "
            f"{', '.join(info['front_doors'])}"
        )
    elif info["disabled"]:
        head = (
            f"mmfix is installed but switched off (MMFIX_DISABLE) for `python` started from this shell "
            f"({info['python']})"
        )
    else:
        head = (
            f"mmfix is NOT active for `python train.py` started from this shell ({info['python']}). Turn it on "
            "with `import mmfix` as the first line of the script, `mmfix-run python train.py …`, or "
            "`mmfix hook install`"
        )
    lines = [head + ("" if info["error"] is None else f" (that Python reported: {info['error']})")]
    lines.append(f"  .pth hook installed in this environment: {'yes' if doors['pth_hook_installed'] else 'no'}")
    lines.append(f"  mmfix sitecustomize on PYTHONPATH: {'yes' if doors['sitecustomize_on_pythonpath'] else 'no'}")
    lines.append(f"  inside mmfix-run: {'yes' if doors['inside_mmfix_run'] else 'no'}")
    if doors["pythonstartup_interactive_only"]:
        lines.append(
            "  PYTHONSTARTUP is mmfix's startup file: it applies to interactive `python` sessions only, "
            "never to `python train.py`"
        )
    return lines
