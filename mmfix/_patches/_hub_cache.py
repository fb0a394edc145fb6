"""torch.hub's cache, as MMEngine's URL and model-zoo loaders reach it.

``torch.hub.load_state_dict_from_url`` (MMEngine's ``load_url``) opens the cached file
before ``torch.load`` does: ``zipfile.is_zipfile`` on it (a FIFO blocks there) and, for a
zip archive of one record (the pre-1.6 "legacy zip" form), ``extractall`` into the cache
directory: a file in the cache would write a file it names. Wrapped around torch.hub's
``_is_legacy_zip_format``, looked up at each call, so every alias of the loader passes here:

* a FIFO, device or socket is a clear error before anything opens it;
* a zip directory that would cost zipfile time out of proportion (huge extra fields) is refused;
* a legacy zip loaded on MMEngine's behalf (or any caller's, with
  ``MMFIX_HOLD_WEIGHTS_ONLY=all``) is refused before it is extracted. torch.save never
  writes one; a user who trusts it can extract it and load the file it holds.
"""

from __future__ import annotations

import zipfile
from typing import Any, Callable

from .. import _settings, _wrapping
from .._checkpoint import diagnosis, files
from .._errors import CheckpointCorruptError, CheckpointRefusedError
from ._mmengine_caller import on_behalf_of_mmengine


def checked_cache_file(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    filename = _wrapping.argument(args, kwargs, 0, "filename")
    special = files.special_file_problem(filename)
    if special is not None:
        raise CheckpointCorruptError(
            f"cannot load the cached checkpoint {files.describe_source(filename)}: {special}.",
            path=files.path_of(filename),
        )
    try:
        # zipfile (which torch.hub uses here) takes time quadratic in a directory entry's extra field.
        crafted = files.raw_directory_problem(filename)
    except OSError:
        crafted = None  # missing or unreadable: torch.hub says so itself
    if crafted is not None:
        raise CheckpointCorruptError(
            f"cannot load the cached checkpoint {files.describe_source(filename)}: {crafted}. It was read without "
            "being loaded (nothing in it ran). Delete it from the cache to download it again.",
            path=files.path_of(filename),
        )
    try:
        legacy = wrapped(*args, **kwargs)
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        # torch.hub reads the zip directory before torch.load would explain a damaged file.
        reason = diagnosis.diagnose(filename) or f"its zip directory cannot be read ({type(exc).__name__}: {exc})"
        raise CheckpointCorruptError(
            f"cannot load the cached checkpoint {files.describe_source(filename)}: {reason}. Delete it from the "
            "cache to download it again.",
            path=files.path_of(filename),
        ) from exc
    if legacy and _held():
        raise CheckpointRefusedError(
            f"refused to load the cached checkpoint {files.describe_source(filename)}: it is a zip archive of a "
            "single record, the pre-1.6 'legacy zip' form, which torch.hub would extract into its cache directory "
            "(writing a file the archive names) before loading it. torch.save never writes that, so the file is "
            "damaged or crafted: do not load it. If you trust it, extract it yourself and load the file it holds.",
            path=files.path_of(filename),
            globals_=(),
        )
    return legacy


def _held() -> bool:
    mode = _settings.current().hold_weights_only
    if mode == "off":
        return False
    return mode == "all" or on_behalf_of_mmengine(_wrapping.calling_module()) is not None
