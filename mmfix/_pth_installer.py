"""``mmfix hook install|uninstall|status``: start-up files in site-packages.

``mmfix.pth`` works on every Python; on 3.15+ a matching ``mmfix.start``
(PEP 829) is written too, and its presence makes Python skip the ``.pth``'s
import line, so each interpreter runs exactly one of them.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

PTH_NAME = "mmfix.pth"
START_NAME = "mmfix.start"
# One physical line, as .pth import lines must be. The try/except keeps an
# environment healthy if mmfix is uninstalled while the file stays behind:
# Python would otherwise print "Error processing line 1" at every start.
PTH_LINE = (
    "import sys; exec('try:\\n\\timport mmfix._startup as _mmfix_startup\\nexcept ImportError:\\n\\tpass\\n"
    "else:\\n\\t_mmfix_startup.from_pth()')\n"
)
START_LINE = "mmfix._startup:from_start\n"
HEADER = "# Written by `mmfix hook install`; remove with `mmfix hook uninstall`.\n"


def site_dir() -> str:
    """The active environment's site-packages (the one this interpreter imports from)."""
    return sysconfig.get_paths()["purelib"]


def wants_start_file(version: tuple[int, int] | None = None) -> bool:
    return (version or sys.version_info[:2]) >= (3, 15)


def _files() -> dict[str, str]:
    files = {PTH_NAME: HEADER + PTH_LINE}
    if wants_start_file():
        files[START_NAME] = HEADER + START_LINE
    return files


def install(directory: str | None = None) -> list[str]:
    """Write the start-up file(s); rewriting an identical file is a no-op. Returns the paths."""
    directory = directory or site_dir()
    written = []
    for name, content in _files().items():
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as fh:
                if fh.read() == content:
                    written.append(path)
                    continue
        except FileNotFoundError:
            pass
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(content)
        os.replace(tmp, path)  # a concurrent interpreter start never sees half a line
        written.append(path)
    return written


def uninstall(directory: str | None = None) -> list[str]:
    directory = directory or site_dir()
    removed = []
    for name in (PTH_NAME, START_NAME):
        path = os.path.join(directory, name)
        try:
            os.remove(path)
            removed.append(path)
        except FileNotFoundError:
            pass
    return removed


def status(directory: str | None = None) -> dict[str, Any]:
    directory = directory or site_dir()
    expected = _files()
    files: dict[str, str] = {}
    result: dict[str, Any] = {"site_dir": directory, "files": files}
    for name in (PTH_NAME, START_NAME):
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            # mmfix.start is read from Python 3.15 on; before that it is not missing, just unused.
            state = "absent" if name in expected else "not used before Python 3.15"
        else:
            with open(path, encoding="utf-8") as fh:
                state = "installed" if fh.read() == expected.get(name) else "stale or foreign"
        files[name] = state
    result["installed"] = files[PTH_NAME] == "installed"
    return result
