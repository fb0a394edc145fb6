"""mmfix's exception types.

The checkpoint errors subclass what torch raises today for the same situation
(``pickle.UnpicklingError`` for a refused global, ``RuntimeError`` for a file it
cannot read), so an ``except`` clause written for stock torch still catches them.
This module imports pickle, so ``mmfix/__init__`` exposes it lazily.

Every class says it lives in ``mmfix`` (where users import it from), so a traceback
and torchrun's summary print ``mmfix.CheckpointCorruptError``, and pickling finds it
through ``mmfix.__getattr__``.
"""

from __future__ import annotations

import pickle


class MmfixUsageError(SystemExit):
    """A command line or environment mmfix can name the mistake in.

    A ``SystemExit`` with a message: the user sees one paragraph and exit code 2,
    as argparse does for its own usage errors, never a traceback.
    """

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(code)
        self.message = message
        self.code = code
        self.exit_status = code  # SystemExit.code is typed loosely (str | int | None)

    def __str__(self) -> str:
        return self.message


class CheckpointError(RuntimeError):
    """A checkpoint could not be loaded, for a reason mmfix can name."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CheckpointCorruptError(CheckpointError):
    """The file is missing, empty, truncated or not a PyTorch checkpoint at all."""


class CheckpointRefusedError(CheckpointError, pickle.UnpicklingError):
    """The safe (weights_only) loader refused globals the file asks for."""

    def __init__(self, message: str, path: str | None = None, globals_: tuple[str, ...] = ()) -> None:
        super().__init__(message, path)
        self.globals = globals_


class CheckpointMismatchError(CheckpointError):
    """A 2.x run's checkpoint leaves model parameters missing or keys unused (MMEngine would only warn)."""


class DeviceAssignmentError(RuntimeError):
    """A worker's LOCAL_RANK names a GPU this process cannot see."""


class OpUnavailableError(NotImplementedError):
    """An mmcv op that neither a compiled ``mmcv._ext`` nor mmfix's PyTorch ops provide."""

    def __init__(self, message: str, op: str | None = None) -> None:
        super().__init__(message)
        self.op = op


class UnusedParametersError(RuntimeError):
    """DDP found parameters that took no part in the loss."""

    def __init__(self, message: str, parameters: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.parameters = parameters


class CheckpointSaveError(OSError):
    """A checkpoint could not be written (disk full, quota, permissions); nothing torn was left.

    Built as ``CheckpointSaveError(errno, message, path)``; prints as the message alone,
    which already names the file and the cause (no ``[Errno 28] …: 'path'`` around it).
    """

    def __str__(self) -> str:
        return self.strerror or super().__str__()


class ConfigConversionError(MmfixUsageError):
    """A 2.x config key or value has no 3.x equivalent (or clashes with the 3.x key), or an
    old-format config of a toolbox whose conversion mmfix does not have yet.

    A ``MmfixUsageError``: the tools stop with this one paragraph and exit status 2,
    never a traceback, and before anything is built or launched.
    """

    def __init__(
        self,
        key: str,
        value: object,
        offers: str,
        source: str | None = None,
        *,
        message: str | None = None,
        releases: tuple[str, str] = ("MMDetection 2.x", "MMDetection 3.x"),
    ) -> None:
        # ``message``: the whole paragraph, for a config mmfix stops as a whole (another toolbox's
        # old-format config, whose conversion is not available yet): then ``key`` names its old keys.
        # ``releases``: the toolbox's legacy and current release lines the paragraph names.
        where = f" in {source}" if source else ""
        if message is None:
            message = (
                f"mmfix: cannot convert the {releases[0]} config{where}: `{key}` = {value!r} has no "
                f"{releases[1]} equivalent. {offers}"
            )
        super().__init__(message)
        self.key = key
        self.value = value
        self.offers = offers


PUBLIC = (
    MmfixUsageError,
    ConfigConversionError,
    CheckpointError,
    CheckpointCorruptError,
    CheckpointRefusedError,
    CheckpointMismatchError,
    DeviceAssignmentError,
    UnusedParametersError,
    CheckpointSaveError,
    OpUnavailableError,
)
for _cls in PUBLIC:
    _cls.__module__ = "mmfix"
del _cls

#: The errors that end a run with their message alone when they reach the top (see _excepthook).
ENDS_A_RUN = (CheckpointError, CheckpointSaveError, DeviceAssignmentError, UnusedParametersError, OpUnavailableError)
