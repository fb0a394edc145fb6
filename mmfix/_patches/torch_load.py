"""torch.load: CPU by default, weights_only kept, refused and broken files explained.

One wrapper object serves both ``torch.load`` and ``torch.serialization.load``
(torch binds the first from the second at import), so identity checks and
``from torch.serialization import load`` made after patching agree.
"""

from __future__ import annotations

import os
import pickle
import re
from typing import Any, Callable

from .. import _log, _settings, _wrapping
from .._checkpoint import diagnosis, escapes, files, numpy_guard, safe_globals, shared_load
from .._errors import CheckpointCorruptError, CheckpointError, CheckpointRefusedError
from . import _hub_cache
from ._cpu_map import cpu_by_default
from ._mmengine_caller import on_behalf_of_mmengine

_swaps = _wrapping.SwapSet()

_REFUSED_PATTERNS = (
    re.compile(r"GLOBAL (\S+) was not an allowed global"),
    re.compile(r"Unsupported global: GLOBAL (\S+)"),
    re.compile(r"Trying to load unsupported GLOBAL (\S+) whose module (\S+) is blocked"),
)
_STANDIN_REFUSAL = re.compile(r"mmfix:\s*([^\n]+)")
_TORCH_REASON = re.compile(r"WeightsUnpickler error:\s*([^\n]+)")
_TRUE = ("1", "y", "yes", "true")
# torch's "``torch.nested`` and ``torch._dynamo`` must be imported to load nested jagged tensors"
# (or DTensors): a real file this process is not ready for. Matched on the start of torch's message,
# which is torch's fixed text there; a refused global's name (the file's text) comes later.
_TORCH_NEEDS_IMPORT = re.compile(
    r"Weights only load failed\. (``[\w.]+``(, | and | or ))*``[\w.]+`` must be imported to load "
)


def apply() -> str | None:
    import torch
    import torch.serialization

    if not hasattr(torch.serialization, "add_safe_globals"):
        return f"torch {torch.__version__} predates weights_only allowlists (needs torch >= 2.4)"
    safe_globals.register_builtin()
    # MMEngine may be imported after torch: allow its HistoryBuffer the moment it exists.
    _swaps.when_imported("mmengine.logging.history_buffer", _register_history_buffer)
    _swaps.wrap(torch.serialization, "load", _patched_load, aliases=((torch, "load"),))
    # torch.hub.load_state_dict_from_url (MMEngine's load_url for every URL and model-zoo
    # checkpoint) looks at the cached file before torch.load does: see _hub_cache.
    import torch.hub

    if hasattr(torch.hub, "_is_legacy_zip_format"):
        _swaps.wrap(torch.hub, "_is_legacy_zip_format", _hub_cache.checked_cache_file)
    else:
        _log.info("torch.hub has no _is_legacy_zip_format: its cache check is left as torch has it", key="hub-cache")
    return None


def _register_history_buffer(_module: Any) -> None:
    if not _swaps:  # removed (or never applied) in the meantime
        return
    try:
        safe_globals.ensure_history_buffer()
    except Exception as exc:  # never break `import mmengine`
        _log.error(f"could not allow MMEngine's HistoryBuffer for weights_only loads: {exc!r}", key="hb-register")


def remove() -> None:
    _swaps.undo_all()
    try:
        safe_globals.unregister()
    except ImportError:  # torch never imported: nothing was registered
        pass


def _weights_only_in_effect(kwargs: dict[str, Any], pickle_module: Any) -> bool:
    """Mirror torch.load's own decision, so our messages describe what really ran."""
    if os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in _TRUE:
        return True
    weights_only = kwargs.get("weights_only")
    if weights_only is None:
        if os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in _TRUE:
            return False
        return pickle_module is None
    return bool(weights_only)


def _patched_load(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    settings = _settings.current()
    f = _wrapping.argument(args, kwargs, 0, "f")
    args, kwargs = cpu_by_default(args, kwargs, 1)
    pickle_module = _wrapping.argument(args, kwargs, 2, "pickle_module")
    held = False
    if kwargs.get("weights_only") is False and pickle_module is None and settings.hold_weights_only != "off":
        caller = _wrapping.calling_module()
        loader = None if settings.hold_weights_only == "all" else on_behalf_of_mmengine(caller)
        if settings.hold_weights_only == "all" or loader is not None:
            kwargs = {**kwargs, "weights_only": True}
            held = True
            through = f" (for {loader})" if loader and loader != caller else ""
            _log.info(
                f"{caller or 'a caller'}{through} asked torch.load for weights_only=False; mmfix holds it to the "
                "safe loader (MMEngine checkpoints load without it). MMFIX_HOLD_WEIGHTS_ONLY=off lets it through.",
                key="held-weights-only",
            )

    special = files.special_file_problem(f)
    if special is not None:  # before anything opens it: opening a FIFO blocks
        raise CheckpointCorruptError(
            f"cannot load checkpoint {files.describe_source(f)}: {special}.", path=files.path_of(f)
        )

    if not _weights_only_in_effect(kwargs, pickle_module):
        # The caller's own weights_only=False (or pickle_module): torch runs its full unpickler,
        # which never sees torch's allowlist, so nothing of mmfix's safe-loader machinery (the
        # cost check, the stand-ins, the numpy and escape checks) has anything to check there.
        # Applying it anyway refused real checkpoints: the load imports MMEngine, which registers
        # the stand-ins mid-load, and the escape check counted those references as the file's.
        try:
            return _loader(wrapped, f, args, kwargs, settings.mmap)(*args, **kwargs)
        except CheckpointError:
            raise
        except Exception as exc:
            raise _corrupt_or(exc, f, weights_only=False)  # noqa: B904 - the original, or an error naming the file
    return _safe_load(wrapped, f, args, kwargs, held, settings.mmap)


def _loader(wrapped: Callable[..., Any], f: Any, args: tuple[Any, ...], kwargs: dict[str, Any], mmap: str) -> Any:
    """MMFIX_MMAP (auto: the ranks of a node share one sealed copy); see shared_load."""
    location = _wrapping.argument(args, kwargs, 1, "map_location")
    return shared_load.loader(wrapped, f, kwargs, mmap, str(location) == "cpu")


def _safe_load(
    wrapped: Callable[..., Any], f: Any, args: tuple[Any, ...], kwargs: dict[str, Any], held: bool, mmap: str
) -> Any:
    """A load torch runs with its weights_only unpickler: checked for cost before, through
    mmfix's stand-ins during, and for escaped stand-ins after."""
    costly = _cost_problem(f)
    if costly is not None:
        problem, container = costly
        if container:
            raise CheckpointCorruptError(
                f"cannot load checkpoint {files.describe_source(f)}: {problem}. It was read without being "
                "loaded (nothing in it ran).",
                path=files.path_of(f),
            )
        raise CheckpointRefusedError(
            f"refused to load checkpoint {files.describe_source(f)}: {problem}. It was read without being "
            "loaded (nothing in it ran); no real checkpoint looks like that, so this file is damaged or very "
            "likely malicious: do not load it.",
            path=files.path_of(f),
        )

    load = _loader(wrapped, f, args, kwargs, mmap)
    mark = numpy_guard.begin()
    standins = safe_globals.standins()
    escaping = escapes.begin(standins)
    try:
        try:
            result = load(*args, **kwargs)
        except CheckpointError:
            raise
        except pickle.UnpicklingError as exc:
            checked = _corrupt_or(exc, f, weights_only=True)
            if checked is not exc or "Weights only load failed" not in str(exc) or _TORCH_NEEDS_IMPORT.match(str(exc)):
                # A damaged or foreign file also fails inside the weights_only
                # unpickler; say what is wrong with the file, not which global.
                # torch's "X must be imported to load ..." is a real file this process is not
                # ready for: torch's own error says how to fix it, and mmfix has nothing to add.
                raise checked  # noqa: B904 - the original, or an error naming the file (which keeps it as cause)
            refused = _refused_globals(str(exc), f)
            if safe_globals.HISTORY_BUFFER in refused and safe_globals.ensure_history_buffer() and _rewind(f):
                # MMEngine was not imported yet, so its HistoryBuffer was not on the
                # list; it is now (still weights_only=True): read the file again.
                return _safe_load(wrapped, f, args, kwargs, held, mmap)
            raise _refused_error(f, refused, held, exc) from None
        except Exception as exc:
            # Damaged files fail in many ways (RuntimeError, EOFError, KeyError, struct.error,
            # MemoryError from an absurd length ...): if the file is the problem, say so.
            raise _corrupt_or(exc, f, weights_only=True)  # noqa: B904 - the original, or an error naming the file
        # numpy arrays arrive as vetted builders (see numpy_guard): swap them in.
        try:
            result = numpy_guard.resolve(result, mark, safe_globals.trusted_types)
            escapes.check(result, escaping, standins)
            return result
        except pickle.UnpicklingError as exc:
            raise _refused_error(f, (), held, exc) from None
    finally:
        numpy_guard.discard(mark)  # a failed load's builders must not linger on this thread
        escapes.end(escaping)


def _cost_problem(f: Any) -> tuple[str, bool] | None:
    """What torch's safe unpickler would spend on ``f`` beyond its size (see pickle_cost), read
    before it runs: a path, or a seekable file object at its start (where torch.load reads it
    from). It fails closed: a file object positioned elsewhere is refused (_not_at_start), and so
    is a file the check could not read; only a stream torch itself refuses before reading a byte
    (no ``seek``/``tell``: torch's _check_seekable) is left to torch's own error."""
    from .._checkpoint import replay

    if not isinstance(f, (str, os.PathLike)):
        try:
            position = f.tell()
            f.seek(position)
        except Exception:
            return None  # torch.load raises its own "You can only torch.load from a file that is seekable"
        if position != 0:
            raise _not_at_start(f, position)
    try:
        return replay.load_cost_problem(f)
    except (FileNotFoundError, IsADirectoryError, PermissionError, NotADirectoryError):
        return None  # torch.load names the path itself, as stock
    except OSError as exc:
        # The check could not read what torch is about to read: refuse rather than load it unchecked.
        return (f"the check could not read it ({type(exc).__name__}: {exc}), so the check could not bound it", False)


def _not_at_start(f: Any, position: int) -> CheckpointRefusedError:
    """A file object handed over mid-stream: torch's readers would start at the current position
    (a legacy pickle) or read the whole stream (a zip), and the cost check reads a checkpoint from
    its start; rather than guess which bytes torch will unpickle, refuse (README: deliberate
    differences)."""
    return CheckpointRefusedError(
        f"refused to load checkpoint {files.describe_source(f)}: the file object is positioned at byte "
        f"{position:,}, not at its start, and mmfix checks what a weights_only load will cost from a "
        "checkpoint's start, so the check could not bound it. Nothing was read from it. Pass the path, call "
        "f.seek(0) first, or pass io.BytesIO of the checkpoint's own bytes.",
        path=files.path_of(f),
    )


def _rewind(f: Any) -> bool:
    if isinstance(f, (str, os.PathLike)):
        return True
    try:
        f.seek(0)
        return True
    except Exception:
        return False


def _corrupt_or(exc: BaseException, f: Any, weights_only: bool) -> BaseException:
    """mmfix's clear error if the file itself is the problem, else the original.

    Under torch's full unpickler (``weights_only=False``) the pickle runs the code it names, so
    an error raised while it rebuilds is as likely the caller's classes as the file: only the
    container (zip directory, CRCs, magic) is judged there, never the pickle."""
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)) or _callers_mistake(exc):
        return exc
    reason = _reader_verdict(str(exc))
    if reason is None:
        try:
            reason = diagnosis.diagnose(f, deep=weights_only)
        except Exception:
            reason = None
    if reason is None and weights_only:
        reason = _failed_while_rebuilding(exc)
    if reason is None:
        return exc
    source = files.describe_source(f)
    error = CheckpointCorruptError(
        f"cannot load checkpoint {source}: {reason}. If this is the newest checkpoint of a run, "
        "resume from the previous one (or re-download / re-copy the file).",
        path=files.path_of(f),
    )
    error.__cause__ = exc
    error.__suppress_context__ = True
    return error


# torch.serialization's checks of what the caller passed (a file object without seek/tell,
# an old dill): the caller's mistake, which torch's own error already explains.
_CALLER_CHECKS = frozenset(("_check_seekable", "raise_err_msg", "_check_dill_version"))


def _callers_mistake(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in _CALLER_CHECKS and code.co_filename.endswith(_TORCH_READERS[0]):
            return True
        tb = tb.tb_next
    return False


_REBUILD_ERRORS = (
    TypeError,
    ValueError,
    AttributeError,
    KeyError,
    IndexError,
    EOFError,
    OverflowError,
    LookupError,
    MemoryError,
)
_TORCH_READERS = tuple(
    os.sep + os.path.join("torch", name)
    for name in ("serialization.py", "_weights_only_unpickler.py", "_utils.py", "_tensor.py", "storage.py")
)


def _failed_while_rebuilding(exc: BaseException) -> str | None:
    """A plain Python error raised by torch's own reading code (a persistent id of the wrong
    shape, an allowed function given the wrong arguments, an undecodable record) means the
    file does not describe what torch.save writes: it is damaged, whatever the static reading
    missed. An error from the caller's code (a map_location function) is not the file's."""
    innermost = None
    tb = exc.__traceback__
    while tb is not None:
        innermost = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    if innermost is None or not innermost.endswith(_TORCH_READERS):
        return None
    # torch's C++ tensor constructors raise RuntimeError for arguments of the wrong type; in
    # serialization.py a RuntimeError is about this machine (a CUDA device it lacks), not the file.
    rebuilding = innermost.endswith(_TORCH_READERS[2:4])
    if not isinstance(exc, _REBUILD_ERRORS) and not (rebuilding and isinstance(exc, RuntimeError)):
        return None
    return f"its contents do not rebuild ({type(exc).__name__}: {str(exc)[:200]}); the file is damaged"


_MINIZ = re.compile(r"PytorchStreamReader failed ([^:]*): (.*?)\. This is an internal miniz error")
_VERSION = re.compile(
    r"Attempted to read a PyTorch file with version (\d+), but the maximum supported version "
    r"for reading is (\d+)"
)


def _reader_verdict(message: str) -> str | None:
    """torch's zip reader sometimes knows better than zipfile: take its word for it."""
    match = _MINIZ.search(message)
    if match:
        return f"torch's zip reader rejects it ({match.group(1)}: {match.group(2)}); the file is damaged"
    match = _VERSION.search(message)
    if match:
        return (
            f"it declares format version {match.group(1)} and this torch reads up to {match.group(2)}: "
            "it was written by a newer PyTorch (upgrade torch) or it is damaged"
        )
    return None


def _refused_globals(message: str, f: Any) -> tuple[str, ...]:
    # What torch refused stays listed even if mmfix vets that name: a refused
    # builtins.getattr means the restricted stand-in was not in place.
    found = [safe_globals.qualify(m.group(1)) for p in _REFUSED_PATTERNS for m in p.finditer(message)]
    # torch names only the first refusal; list all of them (read without
    # executing anything) so that one round of trusting is enough.
    try:
        if _rewind(f):
            from .._checkpoint.replay import scan_globals

            allowed = safe_globals.vetted_names() | safe_globals.user_trusted_names()
            found.extend(name for name, ok in scan_globals(f) if not ok and name not in allowed)
            _rewind(f)
    except Exception:
        pass
    return tuple(dict.fromkeys(found))


def _refused_error(f: Any, refused: tuple[str, ...], held: bool, exc: BaseException) -> CheckpointRefusedError:
    source = files.describe_source(f)
    assessed = {g: safe_globals.assess(g) for g in refused}
    hostile = [g for g, (kind, _) in assessed.items() if kind == "hostile"]
    trustable = [g for g, (kind, _) in assessed.items() if kind == "trustable"]
    unvetted = [g for g, (kind, _) in assessed.items() if kind == "unvetted"]
    standin = _STANDIN_REFUSAL.search(str(exc))
    parts = [f"refused to load checkpoint {source}:"]
    if refused:
        parts.append(f"it needs globals that are not known to be safe: {', '.join(refused)}.")
    if standin:
        parts.append(f"mmfix's checks refuse a value in it: {standin.group(1).rstrip('.')}.")
    torch_reason = _TORCH_REASON.search(str(exc))
    if not refused and not standin:
        reason = f": {torch_reason.group(1).strip().rstrip('.')}" if torch_reason else " (it did not say why)"
        parts.append(f"torch's safe loader refuses its structure{reason}.")
    held_note = (
        " (the caller asked for weights_only=False; mmfix held it to the safe loader, "
        "MMFIX_HOLD_WEIGHTS_ONLY=off lets it through)"
        if held
        else ""
    )
    parts.append(f"It was loaded with weights_only=True{held_note}, which rebuilds tensors and plain data only.")
    if hostile or standin or not refused:
        named = (
            "; ".join(f"{g} ({assessed[g][1]})" for g in hostile)
            if hostile
            else ("Nothing MMEngine, numpy or torch writes looks like that")
        )
        parts.append(
            f"{named}: no real checkpoint needs that, so this file is damaged or very likely malicious: "
            "do not load it, and mmfix will not trust it."
        )
    else:
        if trustable:
            parts.append(
                "If you trust this file and where it came from, allow exactly these classes and load again: "
                f"`export MMFIX_TRUSTED_GLOBALS={','.join(trustable)}` or, in Python before loading, "
                f"`mmfix.trust_globals({', '.join(repr(g) for g in trustable)})`. "
                "Trusting a class lets the file build it with any state: only do it for files you trust."
            )
        if unvetted:
            parts.append(
                "mmfix cannot vouch for "
                + "; ".join(f"{g} ({assessed[g][1]})" for g in unvetted)
                + ". Trusting a class lets the file call it with arguments the file chooses: only if you trust "
                "the file and know the class does nothing but hold data, name it by its own module.qualname in "
                "MMFIX_TRUSTED_GLOBALS (mmfix refuses functions and anything that reaches code, files or processes)."
            )
    message = " ".join(parts)
    if "Weights only load failed" in str(exc):
        # torch's own text, whole: code and searches that match "Weights only load failed" or
        # "Unsupported global: GLOBAL ..." (and its add_safe_globals hint) still find it.
        message += f"\n\ntorch's own message:\n{str(exc).strip()}"
    error = CheckpointRefusedError(message, path=files.path_of(f), globals_=refused)
    error.original = exc  # type: ignore[attr-defined]
    return error
