"""Benchmark cases for mmfix's PyTorch ops, one module per op family (``benchmarks/ops.py`` runs them).

Each module defines ``cases()``, yielding ``(label, run)`` where ``run(ext)`` makes one
realistic call (forward, or forward and backward) through ``ext`` — mmcv's compiled
extension or mmfix's — with inputs built once, outside the timed part: ``run`` is
called as ``run(ext)()``, and only the returned callable is timed.
"""
