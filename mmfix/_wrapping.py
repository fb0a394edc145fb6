"""Wrapper objects that behave like the functions they replace, and safe swap/restore.

wrapt's plain ``FunctionWrapper`` refuses pickling, ``copy`` and ``deepcopy``
(``NotImplementedError``). A config that holds ``torch.load``, a spawn worker
that receives it, or ``copy.deepcopy(cfg)`` in MMEngine would then fail only
because mmfix is active. The subclasses here pickle by qualified name, exactly
as a plain function does, and copy to themselves.

wrapt is imported inside these functions on purpose: see ``_importhooks``.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable, Dict, Tuple

    WrapperFn = Callable[[Callable[..., Any], Any, Tuple[Any, ...], Dict[str, Any]], Any]

_types: tuple[type, type] | None = None


def _wrapper_types() -> tuple[type, type]:
    global _types
    if _types is not None:
        return _types
    import wrapt

    class MmfixBoundFunctionWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[misc, name-defined]
        def __reduce_ex__(self, protocol: int) -> Any:
            instance = self._self_instance
            if instance is None:
                # Accessed through the class: each access makes a new bound
                # wrapper, so pickle it as getattr(Owner, name), which yields an
                # equivalent one on load.
                import sys

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

    class MmfixFunctionWrapper(wrapt.FunctionWrapper):  # type: ignore[misc, name-defined]
        __bound_function_wrapper__ = MmfixBoundFunctionWrapper

        def __reduce_ex__(self, protocol: int) -> Any:
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
    """One attribute replaced by a wrapper; knows how to undo itself safely."""

    def __init__(self, owner: Any, name: str, wrapper: Any, original: Any) -> None:
        self.owner = owner
        self.name = name
        self.wrapper = wrapper
        self.original = original
        self.active = True

    def undo(self) -> bool:
        """Put the original back if the attribute is still ours; else go inert.

        Somebody may have wrapped our wrapper since (another tool, a test's
        monkeypatch). Overwriting their object would silently drop their
        patch, so in that case the wrapper is only switched to pass-through.
        """
        self.active = False
        current = _raw_attribute(self.owner, self.name)
        if current is self.wrapper:
            setattr(self.owner, self.name, self.original)
            return True
        return False


def _raw_attribute(owner: Any, name: str) -> Any:
    # Class attributes are read from __dict__ so that descriptors (classmethod,
    # staticmethod, our own wrapper) are compared as stored, not as bound.
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
        return None
    return getattr(owner, name, None)


def wrap(owner: Any, name: str, wrapper_fn: WrapperFn, *, original: Any = None) -> Swap:
    """Replace ``owner.name`` by a wrapt wrapper that calls ``wrapper_fn``.

    ``original`` lets several names share one wrapper object (``torch.load`` and
    ``torch.serialization.load``): pass the object already wrapped.
    """
    function_wrapper, _ = _wrapper_types()
    target = _raw_attribute(owner, name) if original is None else original
    if target is None:
        raise AttributeError(f"{getattr(owner, '__name__', owner)!r} has no attribute {name!r}")
    swap: Swap

    def guarded(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not swap.active:
            return wrapped(*args, **kwargs)
        return wrapper_fn(wrapped, instance, args, kwargs)

    wrapper = function_wrapper(target, guarded)
    swap = Swap(owner, name, wrapper, target)
    setattr(owner, name, wrapper)
    return swap


def also_install(swap: Swap, owner: Any, name: str) -> Swap | None:
    """Install an existing wrapper under a second name (same object, own undo).

    The second name may hold the original (bound before patching) or already our
    wrapper (``from module import name`` ran after patching); either way undo puts
    the original there. Anything else is someone else's object: left alone (None).
    """
    current = _raw_attribute(owner, name)
    if current is swap.wrapper:
        return Swap(owner, name, swap.wrapper, swap.original)
    if current is not swap.original:
        return None
    other = Swap(owner, name, swap.wrapper, current)
    setattr(owner, name, swap.wrapper)
    return other
