"""The stand-in extension as a whole: every name, clear errors, the same names as compiled mmcv."""

from __future__ import annotations

import pytest

from mmfix._ops._table import EXT_FUNCTIONS


def test_every_compiled_name_exists(compiled_ext, mmfix_ext):
    compiled = {n for n in dir(compiled_ext) if not n.startswith("__")}
    assert compiled == set(EXT_FUNCTIONS)
    for name in compiled:
        assert callable(getattr(mmfix_ext, name)), name


def test_an_unavailable_op_names_itself_and_the_way_out(mmfix_ext):
    import torch

    import mmfix._errors as errors

    class Caller(torch.nn.Module):
        def forward(self):
            return mmfix_ext.indice_conv_forward(torch.zeros(1))

    with pytest.raises(errors.OpUnavailableError) as info:
        Caller()()
    message = str(info.value)
    assert "`indice_conv_forward`" in message
    assert "Caller" in message  # the layer that called it
    assert "spconv" in message  # the sparse-conv alternative
    assert "--no-build-isolation" in message  # how to get compiled ops
    assert info.value.op == "indice_conv_forward"


def test_build_info_says_nothing_was_compiled(mmfix_ext):
    assert "mmfix" in mmfix_ext.get_compiler_version()
    assert mmfix_ext.get_compiling_cuda_version() == "not available"
