"""How every patch replaces a function: wrapt wrappers that behave like the function, and undo.

The wrapper classes: wrapt's plain ``FunctionWrapper`` refuses pickling,
``copy`` and ``deepcopy`` (``NotImplementedError``). A config that holds
``torch.load``, a spawn worker that receives it, or ``copy.deepcopy(cfg)`` in
MMEngine would then fail only because mmfix is active. The subclasses here
pickle by qualified name, exactly as a plain function does, and copy to
themselves.

The swap set: a patch records each replacement (and each extra name it installs
the same wrapper under, and any other undo step) in one ``SwapSet``, and its
``remove()`` is ``undo_all()``. Undo restores an attribute only where it still
holds our wrapper; anywhere else the wrapper is switched off through wrapt's
``enabled`` hook and passes calls straight through, so a patch somebody put on
top of ours keeps working.

The argument helpers read or replace one argument of the wrapped call,
wherever the caller put it (by position or by name).

wrapt is imported inside these functions on purpose: see ``_importhooks``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable

    WrapperFn = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]

_types: tuple[type, type] | None = None
_MISSING: Any = object()


def _wrapper_types() -> tuple[type, type]:
    global _types
    if _types is not None:
        return _types
    import wrapt

    class MmfixBoundFunctionWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[misc, unused-ignore]
        def __reduce_ex__(self, protocol: Any) -> Any:
            instance = self._self_instance
            if instance is None:
                # Accessed through the class: each access makes a new bound
                # wrapper, so pickle it as getattr(Owner, name), which yields an
                # equivalent one on load.
                owner: Any = sys.modules[self.__module__]
                for part in self.__qualname__.split(".")[:-1]:
                    owner = getattr(owner, part)
                return (getattr, (owner, self.__name__))
            # A bound method pickles as getattr(instance, name), like Python's own.
            return (getattr, (instance, self.__name__))

        def __reduce__(self) -> Any:
            return self.__reduce_ex__(2)

        def __copy__(self) -> Any:
            return self

        def __deepcopy__(self, memo: Any) -> Any:
            return self

    class MmfixFunctionWrapper(wrapt.FunctionWrapper):  # type: ignore[misc, unused-ignore]
        __bound_function_wrapper__ = MmfixBoundFunctionWrapper

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # The class whose __dict__ holds this wrapper (set by wrap()), and the bound
            # wrapper last handed out for an access through that class or a subclass.
            self._self_home: type | None = None
            self._self_class_access: Any = None

        def __get__(self, instance: Any, owner: Any = None) -> Any:
            # wrapt binds anew on every access, so `Runner.resume is Runner.resume` would be
            # False where stock Python gives True, and registries or identity checks keyed by
            # the function break. Stock identity comes from the original descriptor: a function
            # or staticmethod read through the class is the same object every time, a
            # classmethod a new bound method. So the bound wrapper is reused exactly while the
            # original's own binding yields the same object, and made anew when it does not.
            home = self._self_home
            if instance is not None or home is None or not (isinstance(owner, type) and issubclass(owner, home)):
                return super().__get__(instance, owner)
            binder = getattr(self.__wrapped__, "__get__", None)
            if binder is None:
                return super().__get__(instance, owner)
            descriptor = binder(None, owner)
            cached = self._self_class_access
            if cached is not None and cached.__wrapped__ is descriptor:
                return cached
            # A plain function is shared by every subclass: bound to its home class, the wrapper
            # recognises an instance of any of them as `self` (wrapt checks isinstance(arg, owner)).
            # (Through wrapt's own __get__: its bound wrapper's constructor differs between 1.x and 2.x.)
            bound: Any = super().__get__(None, home if self._self_binding == "function" else owner)
            self._self_class_access = bound
            return bound

        def __reduce_ex__(self, protocol: Any) -> Any:
            # A string means "the global of this name in obj.__module__":
            # pickle then resolves it again on load, like any function.
            return self.__qualname__

        def __reduce__(self) -> Any:
            return self.__qualname__

        def __copy__(self) -> Any:
            return self

        def __deepcopy__(self, memo: Any) -> Any:
            return self

    _types = (MmfixFunctionWrapper, MmfixBoundFunctionWrapper)
    return _types


class Swap:
    """One attribute that holds our wrapper; knows how to undo itself safely."""

    __slots__ = ("owner", "name", "wrapper", "original", "created", "active")

    def __init__(self, owner: Any, name: str, wrapper: Any, original: Any, created: bool) -> None:
        self.owner = owner
        self.name = name
        self.wrapper = wrapper
        self.original = original
        # The attribute was served from elsewhere (a base class) before we set it on
        # the owner: undo deletes our slot instead of pinning the original there.
        self.created = created
        self.active = True

    def is_active(self) -> bool:
        return self.active

    def undo(self) -> bool:
        """Put the original back if the attribute is still ours; else go inert.

        Somebody may have wrapped our wrapper since (another tool, a test's
        monkeypatch). Overwriting their object would silently drop their
        patch, so in that case the wrapper is only switched to pass-through.
        """
        self.active = False
        if _raw_attribute(self.owner, self.name) is not self.wrapper:
            return False
        if self.created:
            delattr(self.owner, self.name)
        else:
            setattr(self.owner, self.name, self.original)
        return True


def _raw_attribute(owner: Any, name: str) -> Any:
    # Class attributes are read from __dict__ so that descriptors (classmethod,
    # staticmethod, our own wrapper) are compared as stored, not as bound.
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
        return None
    return getattr(owner, name, None)


def _own_slot(owner: Any, name: str) -> bool:
    try:
        return name in vars(owner)
    except TypeError:  # no __dict__: the attribute can only be the owner's own
        return True


def wrap(target: Any, path: str, body: WrapperFn) -> Swap:
    """Replace ``target.path`` (a dotted path; ``target`` a module, class or module name)
    by an mmfix wrapper whose calls go through ``body(wrapped, instance, args, kwargs)``."""
    import wrapt

    function_wrapper, _ = _wrapper_types()
    parent, name, _original = wrapt.resolve_path(target, path)
    created = not _own_slot(parent, name)
    swaps: list[Swap] = []

    def factory(original: Any) -> Any:
        wrapper = function_wrapper(original, body, enabled=lambda: swaps[0].active)
        if isinstance(parent, type):
            wrapper._self_home = parent
        swaps.append(Swap(parent, name, wrapper, original, created))
        return wrapper

    wrapt.wrap_object(parent, name, factory)  # type: ignore[arg-type, unused-ignore]
    return swaps[0]


def install_alias(swap: Swap, owner: Any, name: str) -> Swap | None:
    """Install an existing wrapper under a second name (same object, own undo).

    Modules keep their own references (``from .checkpoint import _load_checkpoint``).
    The second name may hold the original (bound before patching) or already our
    wrapper (``from module import name`` ran after patching); either way undo puts
    the original there. Anything else is someone else's object: left alone (None).
    """
    current = _raw_attribute(owner, name)
    if current is swap.wrapper:
        return Swap(owner, name, swap.wrapper, swap.original, created=False)
    if current is not swap.original:
        return None
    other = Swap(owner, name, swap.wrapper, current, created=not _own_slot(owner, name))
    setattr(owner, name, swap.wrapper)
    return other


class SwapSet:
    """Everything one patch changed, undone in reverse order by ``undo_all()``."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], Any]] = []
        self._swaps: list[Swap] = []  # every attribute that holds one of our wrappers (for swaps())

    def __bool__(self) -> bool:
        """True while something is applied (hooks registered by apply() check this)."""
        return bool(self._undo)

    def wrap(self, target: Any, path: str, body: WrapperFn, *, aliases: tuple[tuple[Any, str], ...] = ()) -> Swap:
        """Wrap ``target.path`` and install the same wrapper under each ``(owner, name)`` alias."""
        swap = wrap(target, path, body)
        self._undo.append(swap.undo)
        self._swaps.append(swap)
        for owner, name in aliases:
            self.alias(swap, owner, name)
        return swap

    def alias(self, swap: Swap, owner: Any, name: str) -> None:
        if (other := install_alias(swap, owner, name)) is not None:
            self._undo.append(other.undo)
            self._swaps.append(other)

    def swaps(self) -> list[Swap]:
        """The attributes that hold this patch's wrappers now (what tests compare with stock)."""
        return [swap for swap in self._swaps if swap.active]

    def when_imported(self, module: str, hook: Callable[[Any], None]) -> None:
        """A post-import hook that belongs to this patch: undo cancels it if it has not run."""
        from . import _importhooks

        _importhooks.when_imported(module, hook)
        self._undo.append(lambda: _importhooks.cancel(hook))

    def on_undo(self, step: Callable[[], Any]) -> None:
        """Any other change apply() made (a module global, an excepthook) and how to take it back."""
        self._undo.append(step)

    def undo_all(self) -> None:
        while self._undo:
            self._undo.pop()()
        self._swaps.clear()


# --- arguments of the wrapped call ------------------------------------------------------------


def argument(args: tuple[Any, ...], kwargs: dict[str, Any], position: int, name: str, default: Any = None) -> Any:
    """The argument a caller passed at ``position`` or as ``name=`` (``default`` if neither)."""
    if len(args) > position:
        return args[position]
    return kwargs.get(name, default)


def with_argument(
    args: tuple[Any, ...], kwargs: dict[str, Any], position: int, name: str, value: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args, kwargs`` with that argument set to ``value``, where the caller put it (by name if absent)."""
    if len(args) > position:
        return args[:position] + (value,) + args[position + 1 :], kwargs
    return args, {**kwargs, name: value}


def calling_module(also_skip: tuple[str, ...] = ()) -> str:
    """The module that called the wrapped function: the first frame outside mmfix and wrapt
    (and the modules in ``also_skip``), so no patch depends on how deep its own call path is."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if not (name == "mmfix" or name.startswith(("mmfix.", "wrapt")) or name in also_skip):
            return name
        frame = frame.f_back
    return ""
