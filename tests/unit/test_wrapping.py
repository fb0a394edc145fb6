"""The wrapper type behaves like a plain function: pickling, copying, signature, binding."""

from __future__ import annotations

import copy
import inspect
import pickle
import subprocess
import sys
import types

import pytest

from conftest import clean_env, run_python
from mmfix import _wrapping


def sample(a: int, b: int = 2, *, c: str = "x") -> int:
    """Docstring of sample."""
    return a + b


class Owner:
    def method(self, x: int) -> int:
        return x * 2

    @classmethod
    def cmethod(cls, x: int) -> str:
        return f"{cls.__name__}:{x}"


@pytest.fixture
def wrapped_sample():
    module = sys.modules[__name__]
    calls: list[tuple] = []
    swap = _wrapping.wrap(module, "sample", lambda w, i, a, k: (calls.append(a), w(*a, **k))[1])
    yield swap, calls
    swap.undo()


def test_wrapper_calls_through_and_keeps_identity_data(wrapped_sample) -> None:
    swap, calls = wrapped_sample
    current = sys.modules[__name__].sample
    assert current is swap.wrapper and current(1, 3) == 4 and calls == [(1, 3)]
    assert current.__name__ == "sample" and current.__doc__ == "Docstring of sample."
    assert current.__wrapped__ is swap.original
    assert inspect.signature(current) == inspect.signature(swap.original)


def test_wrapper_pickles_and_copies_like_a_function(wrapped_sample) -> None:
    _swap, _ = wrapped_sample
    current = sys.modules[__name__].sample
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(current, protocol=protocol)) is current
    assert copy.copy(current) is current
    assert copy.deepcopy({"fn": current})["fn"] is current


def test_methods_and_classmethods_bind_pickle_and_restore() -> None:
    seen: list = []
    s1 = _wrapping.wrap(Owner, "method", lambda w, i, a, k: (seen.append(i), w(*a, **k))[1])
    s2 = _wrapping.wrap(Owner, "cmethod", lambda w, i, a, k: w(*a, **k))
    try:
        obj = Owner()
        assert obj.method(3) == 6 and seen[-1] is obj
        assert Owner.method(obj, 4) == 8 and seen[-1] is obj  # unbound call binds too
        assert Owner.cmethod(5) == "Owner:5"
        assert pickle.loads(pickle.dumps(Owner.method))(obj, 1) == 2
        assert pickle.loads(pickle.dumps(Owner.cmethod))(1) == "Owner:1"
        assert copy.deepcopy(Owner.method) is Owner.method or copy.deepcopy(Owner.method) == Owner.method
    finally:
        assert s1.undo() and s2.undo()
    assert type(vars(Owner)["method"]) is types.FunctionType
    assert type(vars(Owner)["cmethod"]) is classmethod


def test_undo_goes_inert_when_someone_wrapped_us() -> None:
    module = sys.modules[__name__]
    swap = _wrapping.wrap(module, "sample", lambda w, i, a, k: -1)
    assert module.sample(1) == -1
    ours = module.sample
    module.sample = lambda *a, **k: ours(*a, **k)  # a later patch on top of ours
    assert swap.undo() is False
    assert module.sample(1) == 3  # our wrapper now passes through
    module.sample = swap.original


def test_torch_load_signature_pickle_and_deepcopy_unchanged() -> None:
    code = """
import inspect, pickle, copy, torch
sig = str(inspect.signature(torch.load)); doc = torch.load.__doc__
import mmfix
assert hasattr(torch.load, "__wrapped__")
assert str(inspect.signature(torch.load)) == sig and torch.load.__doc__ == doc
assert pickle.loads(pickle.dumps(torch.load)) is torch.load
assert copy.deepcopy({"loader": torch.load})["loader"] is torch.load
from mmengine.config import Config
cfg = Config(dict(loader=torch.load))
assert copy.deepcopy(cfg)["loader"] is torch.load
print("ok")
"""
    assert run_python(code).stdout.strip() == "ok"


@pytest.mark.slow
def test_wrapper_in_a_spawned_worker() -> None:
    code = """
import mmfix, torch, torch.multiprocessing as mp
def worker(q, loader):
    q.put(loader is torch.load and hasattr(loader, "__wrapped__"))
if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=worker, args=(q, torch.load))
    p.start(); print(q.get(timeout=120)); p.join()
"""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "spawn_main.py")
        with open(path, "w") as fh:
            fh.write(code)
        proc = subprocess.run([sys.executable, path], env=clean_env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


@pytest.mark.slow
def test_supported_wrapt_1x(tmp_path) -> None:
    """pyproject says wrapt>=1.14,<3: the oldest supported major gets the same checks."""
    target = tmp_path / "wrapt1"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), "wrapt==1.17.3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, f"could not install wrapt 1.17.3 for this check: {pip.stderr[-2000:]}"
    code = """
import wrapt, copy, pickle, inspect, torch
assert wrapt.__version__.startswith("1."), wrapt.__version__
import mmfix
assert mmfix.status()["patches"]["torch_load"]["state"] == "active"
sig = inspect.signature(torch.load.__wrapped__)
assert inspect.signature(torch.load) == sig
assert pickle.loads(pickle.dumps(torch.load)) is torch.load and copy.deepcopy(torch.load) is torch.load
import mmengine.runner
from mmengine.runner import Runner
assert mmfix.status()["patches"]["mmengine_checkpoint"]["state"] == "active"
assert pickle.loads(pickle.dumps(Runner.resume)) == Runner.resume
orig = torch.load.__wrapped__
mmfix.disable()
assert torch.load is orig
print("ok", wrapt.__version__)
"""
    env = clean_env(PYTHONPATH=str(target))
    proc = run_python(code, env=env)
    assert proc.stdout.strip() == "ok 1.17.3"


class Child(Owner):
    pass


def test_wrapping_an_inherited_method_and_undo_leaves_no_slot_behind() -> None:
    swap = _wrapping.wrap(Child, "method", lambda w, i, a, k: w(*a, **k) + 1)
    assert "method" in vars(Child) and Child().method(2) == 5 and Owner().method(2) == 4
    assert swap.undo()
    assert "method" not in vars(Child)  # served by Owner again, as before the patch
    assert Child().method(2) == 4


def test_swap_set_wraps_with_aliases_and_undoes_everything_in_reverse() -> None:
    module = types.ModuleType("fake_pkg")
    module.load = lambda x: x  # type: ignore[attr-defined]
    alias_holder = types.ModuleType("fake_user")
    alias_holder.load = module.load  # type: ignore[attr-defined]  # `from fake_pkg import load`
    foreign = types.ModuleType("foreign")
    foreign.load = lambda x: "theirs"  # type: ignore[attr-defined]
    order: list[str] = []
    swaps = _wrapping.SwapSet()
    assert not swaps
    original = module.load
    swap = swaps.wrap(
        module, "load", lambda w, i, a, k: ("wrapped", w(*a, **k)), aliases=((alias_holder, "load"), (foreign, "load"))
    )
    swaps.on_undo(lambda: order.append("extra step"))
    assert swaps and module.load is swap.wrapper and alias_holder.load is swap.wrapper
    assert foreign.load(1) == "theirs"  # someone else's object under that name: left alone
    assert alias_holder.load(3) == ("wrapped", 3)
    swaps.undo_all()
    assert order == ["extra step"] and not swaps
    assert module.load is original and alias_holder.load is original
    assert swap.wrapper(3) == 3  # a reference kept elsewhere now passes straight through


def test_argument_helpers_read_and_replace_by_position_or_name() -> None:
    assert _wrapping.argument(("f", None), {}, 1, "map_location") is None
    assert _wrapping.argument(("f",), {"map_location": "cuda"}, 1, "map_location") == "cuda"
    assert _wrapping.argument(("f",), {}, 1, "map_location", "default") == "default"
    assert _wrapping.with_argument(("f", None, "p"), {}, 1, "map_location", "cpu") == (("f", "cpu", "p"), {})
    kwargs = {"weights_only": True}
    assert _wrapping.with_argument(("f",), kwargs, 1, "map_location", "cpu") == (
        ("f",),
        {"weights_only": True, "map_location": "cpu"},
    )
    assert kwargs == {"weights_only": True}  # the caller's dict is not changed


def test_calling_module_skips_mmfix_frames() -> None:
    seen: list[str] = []
    module = sys.modules[__name__]
    # the body lives in an mmfix module, as every patch's body does
    patch_module: dict = {"__name__": "mmfix._patches.example", "_wrapping": _wrapping, "seen": seen}
    exec("def body(w, i, a, k):\n    seen.append(_wrapping.calling_module())\n    return w(*a, **k)\n", patch_module)
    swap = _wrapping.wrap(module, "sample", patch_module["body"])
    try:
        module.sample(1)
        exec(
            compile("sample(1)", "<elsewhere>", "exec"),
            {"__name__": "mmengine.runner.checkpoint", "sample": module.sample},
        )
    finally:
        swap.undo()
    assert seen == [__name__, "mmengine.runner.checkpoint"]


class _Stock:
    def method(self, x: int) -> int:
        return x * 2

    @staticmethod
    def smethod(x: int) -> int:
        return x + 1

    @classmethod
    def cmethod(cls, x: int) -> str:
        return f"{cls.__name__}:{x}"


class _StockChild(_Stock):
    pass


def _access_facts(cls: type, child: type) -> dict[str, tuple[bool, ...]]:
    """How attribute access through the class compares, per attribute (identity, equality ...)."""
    facts = {}
    for name in ("method", "smethod", "cmethod"):
        a, b = getattr(cls, name), getattr(cls, name)
        c = getattr(child, name)
        facts[name] = (a is b, a == b, hash(a) == hash(b), c is a, c == a)
    instance = cls()
    facts["instance.method"] = (instance.method is instance.method, instance.method == instance.method)
    return facts


def test_access_through_the_class_keeps_stocks_identity() -> None:
    """Issue 27: a function or staticmethod read through its class is the same object every time
    (and through a subclass), a classmethod an equal new one each time: wrapped, the same."""
    stock = _access_facts(_Stock, _StockChild)
    assert stock["method"][0] and stock["smethod"][0] and not stock["cmethod"][0]  # what Python does
    seen: list = []
    swaps = [
        _wrapping.wrap(_Stock, name, lambda w, i, a, k: (seen.append(i), w(*a, **k))[1])
        for name in ("method", "smethod", "cmethod")
    ]
    try:
        # First access through the subclass, then calls through the base: `self` is still found.
        assert _StockChild.method is _Stock.method
        assert _Stock.method(_Stock(), 3) == 6 and _Stock.method(_StockChild(), 4) == 8
        assert isinstance(seen[0], _Stock) and isinstance(seen[1], _StockChild)
        assert _StockChild.cmethod(1) == "_StockChild:1" and _Stock.cmethod(1) == "_Stock:1"
        assert _Stock.smethod(1) == 2 and _StockChild().smethod(2) == 3
        assert _access_facts(_Stock, _StockChild) == stock
        assert all(hasattr(vars(_Stock)[name], "__wrapped__") for name in ("method", "cmethod"))
    finally:
        for swap in swaps:
            swap.undo()
    assert _access_facts(_Stock, _StockChild) == stock
