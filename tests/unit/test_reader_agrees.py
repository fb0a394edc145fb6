"""The static reader of ``mmfix inspect`` reads what torch's safe loader reads (issue 19, item 7)."""

from __future__ import annotations

import inspect
import pickle
import pickletools
import re

import pytest

from mmfix._checkpoint import numpy_guard, pickle_reader


def test_the_readers_opcode_table_is_the_installed_torchs() -> None:
    from torch import _weights_only_unpickler as wou

    source = inspect.getsource(wou.Unpickler.load)
    names = {op.name for op in pickletools.opcodes}
    handled = set(re.findall(r"\b([A-Z][A-Z0-9_]+)\[0\]", source)) & names
    assert len(handled) > 20  # the scan sees torch's dispatch
    assert handled == pickle_reader.TORCH_OPCODES


@pytest.mark.parametrize("spec", ["S8\n", "U4\n", "f8\n", " S8", "S08", "S8 "])
def test_dtype_strings_numpy_writes_otherwise_are_refused_by_the_shared_validator(spec: str) -> None:
    # "S8\n" passed a "$"-anchored pattern; numpy then refused it at load time while inspect,
    # which only runs the validator, called the file loadable.
    with pytest.raises(pickle.UnpicklingError):
        numpy_guard.check_dtype_args((spec, False, True))


@pytest.mark.parametrize("spec", ["S8", "U4", "f8", "b1", "c16"])
def test_the_validator_accepts_only_what_numpy_builds(spec: str) -> None:
    import numpy as np

    assert numpy_guard.check_dtype_args((spec, False, True)) == spec
    np.dtype(spec)
