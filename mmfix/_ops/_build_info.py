"""What ``mmcv.ops.get_compiler_version()`` and ``get_compiling_cuda_version()`` answer.

MMEngine's and MMDetection's ``collect_env`` print them as "MMCV Compiler" and
"MMCV CUDA Compiler": the truthful answer is that nothing was compiled.
"""

from __future__ import annotations


def get_compiler_version() -> str:
    from .._version import __version__

    return f"none (mmfix {__version__}: mmcv's ops in PyTorch)"


def get_compiling_cuda_version() -> str:
    return "not available"
