"""MMEngine's package helpers without ``pkg_resources`` (setuptools >= 82 removed it).

``mmengine.utils.package_utils`` (``is_installed``, ``get_installed_path``,
``package2module``, ``install_package``) imports ``pkg_resources`` inside each
function. Every ``_base_ = 'mmdet::…'`` config, ``mmengine.hub.get_config`` /
``get_model`` and registry lookups that locate a package go through them, so on a
fresh environment they fail with ``No module named 'pkg_resources'``. The same
answers come from ``importlib.metadata``: a distribution's location is the folder
holding its metadata (``pkg_resources``' ``Distribution.location``), its modules
are named in ``top_level.txt``.

Applied only where ``pkg_resources`` cannot be found: elsewhere MMEngine's own
functions run unchanged.
"""

from __future__ import annotations

import importlib.util
import os.path as osp
import sys
from typing import Any, Callable

from .. import _wrapping

_swaps = _wrapping.SwapSet()

#: The functions replaced, and the modules that bind them under the same name at import.
_FUNCTIONS = ("is_installed", "get_installed_path", "package2module")
_ALIAS_OWNERS = ("mmengine.utils", "mmengine.config.config", "mmengine.hub.hub")


def _metadata() -> Any:
    if sys.version_info >= (3, 10):
        import importlib.metadata as metadata
    else:  # Python 3.9's importlib.metadata does not normalise names (mmcv-full vs mmcv_full)
        try:
            import importlib_metadata as metadata
        except ImportError:
            import importlib.metadata as metadata
    return metadata


def _distribution(package: str) -> Any:
    """The installed distribution called ``package`` (any spelling pip accepts), or None."""
    metadata = _metadata()
    for name in dict.fromkeys((package, package.replace("-", "_"), package.replace("_", "-"))):
        try:
            return metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _location(dist: Any) -> str:
    # pkg_resources' Distribution.location: the folder that holds the .dist-info / .egg-info.
    return str(dist.locate_file(""))


def is_installed(package: str) -> bool:
    if _distribution(package) is not None:
        return True
    spec = importlib.util.find_spec(package)
    return spec is not None and spec.origin is not None


def package2module(package: str) -> str:
    dist = _distribution(package)
    if dist is None:
        raise _metadata().PackageNotFoundError(package)
    top_level = dist.read_text("top_level.txt")
    if top_level:
        return top_level.split("\n")[0]
    raise ValueError(f"can not infer the module name of {package}")


def get_installed_path(package: str) -> str:
    dist = _distribution(package)
    if dist is None:
        # not installed, but importable (PYTHONPATH): as MMEngine does
        spec = importlib.util.find_spec(package)
        if spec is not None:
            if spec.origin is not None:
                return osp.dirname(spec.origin)
            raise RuntimeError(f"{package} is a namespace package, which is invalid for `get_install_path`")
        raise _metadata().PackageNotFoundError(package)
    possible_path = osp.join(_location(dist), package)
    if osp.exists(possible_path):
        return possible_path
    return osp.join(_location(dist), package2module(package))


_REPLACEMENTS: dict[str, Callable[..., Any]] = {
    "is_installed": is_installed,
    "get_installed_path": get_installed_path,
    "package2module": package2module,
}


def _replacement(name: str) -> Any:
    function = _REPLACEMENTS[name]

    def body(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return function(*args, **kwargs)

    return body


def pkg_resources_missing() -> bool:
    try:
        return importlib.util.find_spec("pkg_resources") is None
    except (ImportError, ValueError):
        return True


def apply() -> str | None:
    if not pkg_resources_missing():
        return "pkg_resources is installed: MMEngine's own package helpers work"
    package_utils = sys.modules["mmengine.utils.package_utils"]
    swaps = {name: _swaps.wrap(package_utils, name, _replacement(name)) for name in _FUNCTIONS}

    def alias_in(owner: Any) -> None:
        for name, swap in swaps.items():
            if getattr(owner, name, None) is swap.original:
                _swaps.alias(swap, owner, name)

    for owner in _ALIAS_OWNERS:
        _swaps.when_imported(owner, alias_in)
    return None


def remove() -> None:
    _swaps.undo_all()
