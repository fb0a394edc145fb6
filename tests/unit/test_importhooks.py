from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from mmfix import _importhooks


def _make_module(tmp_path: Path, name: str, body: str = "VALUE = 1\n") -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))


def test_hook_runs_after_import_once_and_sees_the_module(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    _make_module(tmp_path, "mmfix_probe_a", "VALUE = 41\n")
    seen: list = []
    _importhooks.when_imported("mmfix_probe_a", lambda m: seen.append(m.VALUE + 1))
    assert seen == []
    import mmfix_probe_a

    assert seen == [42]
    assert type(mmfix_probe_a.__loader__).__name__ != "_HookingLoader"  # the real loader is restored
    del sys.modules["mmfix_probe_a"]
    import mmfix_probe_a

    assert seen == [42]  # each hook fires once


def test_hook_for_already_imported_module_runs_now() -> None:
    seen: list = []
    _importhooks.when_imported("json", lambda m: seen.append(m.__name__))
    assert seen == ["json"]


def test_failing_hook_never_breaks_the_import(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    _make_module(tmp_path, "mmfix_probe_b")

    def boom(module) -> None:
        raise RuntimeError("hook bug")

    _importhooks.when_imported("mmfix_probe_b", boom)
    import mmfix_probe_b

    assert mmfix_probe_b.VALUE == 1
    assert "hook bug" in capsys.readouterr().err


def test_cancel_and_missing_modules(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    _make_module(tmp_path, "mmfix_probe_c")
    seen: list = []
    hook = lambda m: seen.append(m)
    _importhooks.when_imported("mmfix_probe_c", hook)
    _importhooks.cancel(hook)
    import mmfix_probe_c  # noqa: F401

    assert seen == []
    _importhooks.when_imported("mmfix_probe_does_not_exist", hook)
    try:
        import mmfix_probe_does_not_exist  # noqa: F401
    except ImportError:
        pass
    assert seen == []
    _importhooks.cancel(hook)


def test_submodule_hook(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = tmp_path / "mmfix_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sub.py").write_text("X = 'sub'\n")
    seen: list = []
    _importhooks.when_imported("mmfix_probe_pkg.sub", lambda m: seen.append(m.X))
    import mmfix_probe_pkg.sub  # noqa: F401

    assert seen == ["sub"]
