from __future__ import annotations

import re
from pathlib import Path

import pytest

from mmfix import _settings
from mmfix._patches import PATCHES

README = Path(__file__).resolve().parents[2] / "README.md"


def test_defaults() -> None:
    s = _settings.Settings({})
    assert (s.disabled, s.cpu_map, s.mmap, s.log_level, s.hold_weights_only) == (
        False,
        True,
        "auto",
        "INFO",
        "mmengine",
    )
    assert s.disabled_patches == frozenset()


@pytest.mark.parametrize(
    "raw,expected",
    [("1", True), ("true", True), ("YES", True), ("on", True), ("0", False), ("off", False), ("", False)],
)
def test_booleans(raw: str, expected: bool) -> None:
    assert _settings.Settings({"MMFIX_DISABLE": raw}).disabled is expected


def test_bad_values_warn_and_keep_default(capsys: pytest.CaptureFixture[str]) -> None:
    s = _settings.Settings({"MMFIX_LOG_LEVEL": "loud", "MMFIX_CPU_MAP": "perhaps", "MMFIX_HOLD_WEIGHTS_ONLY": "x"})
    assert s.log_level == "INFO" and s.cpu_map is True and s.hold_weights_only == "mmengine"
    err = capsys.readouterr().err
    assert "MMFIX_LOG_LEVEL='loud' is not one of DEBUG, INFO, WARNING, ERROR" in err
    assert "MMFIX_CPU_MAP='perhaps'" in err and "MMFIX_HOLD_WEIGHTS_ONLY='x'" in err


def test_disabled_patches_star_and_list() -> None:
    assert _settings.Settings({"MMFIX_DISABLED_PATCHES": "*"}).disabled_patches == frozenset(PATCHES)
    assert _settings.Settings({"MMFIX_DISABLED_PATCHES": " torch_load , "}).disabled_patches == {"torch_load"}


def test_settings_are_read_only() -> None:
    with pytest.raises(AttributeError):
        _settings.Settings({}).disabled = True  # type: ignore[misc]


def test_patch_names_match_registry() -> None:
    assert tuple(PATCHES) == _settings.PATCH_NAMES


def test_every_variable_is_in_the_readme_table_and_nowhere_else_read() -> None:
    text = README.read_text()
    table = set(re.findall(r"^\| `(MMFIX_[A-Z_]+)`", text, flags=re.M))
    assert table == set(_settings.DOCUMENTED), table ^ set(_settings.DOCUMENTED)
    for name in PATCHES:
        assert f"`{name}`" in text
    # One module reads MMFIX_* variables; everything else asks it.
    pkg = Path(_settings.__file__).parent
    readers = [
        p
        for p in pkg.rglob("*.py")
        if re.search(r"environ[^\n]*[\"']MMFIX_", p.read_text()) and p.name != "_settings.py"
    ]
    assert readers == [p for p in readers if p.name in ("_run.py", "_startup.py")]


@pytest.mark.parametrize(
    "raw,expected", [("", "auto"), ("auto", "auto"), ("1", "on"), ("yes", "on"), ("0", "off"), ("off", "off")]
)
def test_mmap_modes(raw: str, expected: str) -> None:
    assert _settings.Settings({"MMFIX_MMAP": raw}).mmap == expected


def test_bad_mmap_and_wait_warn_and_keep_default(capsys: pytest.CaptureFixture[str]) -> None:
    s = _settings.Settings({"MMFIX_MMAP": "sometimes", "MMFIX_SHARED_LOAD_WAIT": "-3"})
    assert s.mmap == "auto" and s.shared_load_wait == 300.0
    err = capsys.readouterr().err
    assert "MMFIX_MMAP='sometimes' is not auto, 1 or 0" in err
    assert "MMFIX_SHARED_LOAD_WAIT='-3' is not a positive number of seconds" in err
    assert _settings.Settings({"MMFIX_SHARED_LOAD_WAIT": "2.5"}).shared_load_wait == 2.5


def test_a_bad_value_is_reported_once_per_job(capsys: pytest.CaptureFixture[str]) -> None:
    _settings.Settings({"MMFIX_CPU_MAP": "perhaps", "RANK": "1"})  # rank 0 reports it, not rank 1
    _settings.Settings({"MMFIX_CPU_MAP": "perhaps", "MMFIX_SETTINGS_REPORTED": "1"})  # the parent reported it
    assert capsys.readouterr().err == ""
    _settings.Settings({"MMFIX_CPU_MAP": "perhaps", "RANK": "0"})
    err = capsys.readouterr().err
    assert err.count("MMFIX_CPU_MAP='perhaps'") == 1
    assert re.match(r"^\d\d/\d\d \d\d:\d\d:\d\d - mmfix - WARNING - MMFIX_CPU_MAP", err)
