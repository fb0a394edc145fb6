"""The shape of the code base: no import cycles, and a public API that is exactly ``mmfix.__all__``."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import mmfix

PACKAGE = Path(mmfix.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every mmfix module ``name`` imports, at module level or inside functions."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            prefix = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                candidate = f"{prefix}.{alias.name}"
                found.add(candidate if candidate in modules else prefix)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    # A module importing its own parent package is how Python imports it anyway.
    return {m for m in found if m in modules and m != name and not name.startswith(m + ".")}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles_even_through_function_level_imports() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert sum(map(len, graph.values())) > 50  # the scan sees the real import graph
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_public_names_are_exactly_all_and_every_module_is_private() -> None:
    # every public name `import mmfix` binds is in __all__; the two others are how the module is
    # written (`from __future__ import annotations`, the TYPE_CHECKING guard), not API
    public = {name for name in vars(mmfix) if not name.startswith("_")} - {"annotations", "TYPE_CHECKING"}
    assert public and public <= set(mmfix.__all__), public - set(mmfix.__all__)
    for name in mmfix.__all__:
        assert getattr(mmfix, name) is not None, name
    assert sorted(mmfix.__all__) == sorted(set(mmfix.__all__))
    assert set(mmfix.__all__) == {
        "CheckpointCorruptError",
        "CheckpointMismatchError",
        "CheckpointError",
        "CheckpointRefusedError",
        "CheckpointSaveError",
        "ConfigConversionError",
        "DeviceAssignmentError",
        "MmfixUsageError",
        "OpUnavailableError",
        "UnusedParametersError",
        "__version__",
        "disable",
        "enable",
        "patch_names",
        "status",
        "trust_globals",
    }
    # every module below mmfix is private: a leading underscore in its dotted path
    names = [info.name for info in pkgutil.walk_packages(mmfix.__path__, "mmfix.")]
    assert len(names) > 30
    for name in names:
        assert any(p.startswith("_") for p in name.split(".")[1:]), f"{name} is importable under a public name"


def test_exported_errors_resolve_to_their_classes() -> None:
    errors = importlib.import_module("mmfix._errors")
    for name in mmfix.__all__:
        if name.endswith("Error"):
            assert getattr(mmfix, name) is getattr(errors, name)
            assert f"{getattr(mmfix, name).__module__}.{name}" == f"mmfix.{name}"  # printed by its public name
