"""The README tells the truth (issue 11, item 10): checked against the code it describes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mmfix import _pth_installer as hook
from mmfix._patches import PATCHES

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_the_patches_table_is_in_mmfix_status_order() -> None:
    start = README.index("## Patches")
    section = README[start : README.index("\n## ", start + 1)]  # up to the next section
    assert re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M) == list(PATCHES)


def test_install_says_how_to_get_a_cpu_only_torch_and_the_measured_time() -> None:
    install = README[README.index("## Install and run") : README.index("## Legacy 2.x command lines")]
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in install
    assert "a few seconds" not in install and "Measured on 2 CPU cores" in install
    assert "`import mmfix` as the first line" in install  # the one-line variant beside the zero-code one


def test_sitecustomize_example_is_said_to_be_source_tree_only_and_is_not_packaged() -> None:
    assert "in the source tree only (not in the installed package)" in README
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'include = ["mmfix*"]' in pyproject  # sitecustomize_example/ is not a package of the wheel


def test_hook_status_does_not_call_mmfix_start_absent_where_it_never_applies(tmp_path: Path) -> None:
    state = hook.status(str(tmp_path))["files"]["mmfix.start"]  # type: ignore[index]
    assert state == ("absent" if sys.version_info >= (3, 15) else "not used before Python 3.15")
