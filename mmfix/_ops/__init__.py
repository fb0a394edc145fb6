"""mmcv's compiled ops (``mmcv._ext``) written in PyTorch.

mmcv-lite (mmcv without its compiled extension) installs in seconds; mmcv with
its ops needs a compiler and a quarter of an hour, or a binary built for exactly
the installed torch. Every ``mmcv/ops/*.py`` module loads its functions from
``mmcv._ext`` with ``load_ext('_ext', [names])`` and calls them with the
extension's own calling convention (most write into output tensors they pass
in). This package supplies that module when no compiled one can be imported:

* one module per op family, named as mmcv names it (``nms.py``, ``roi_align.py``
  …): pure functions with the extension's exact signatures, a written-out
  PyTorch implementation, and torchvision's kernel as a fast path where it
  computes the same thing (``_torchvision.py`` says whether it is usable);
* ``_table.py``: every name mmcv's extension has, and the family module that
  implements it (data, one row each);
* ``_ext.py``: assembles the stand-in module from the table; a name without an
  implementation raises ``mmfix.OpUnavailableError`` when called, naming the op,
  the layer that called it and how to get compiled ops.

The patch that installs the module is ``mmfix._patches.mmcv_ops`` (a compiled
extension always wins). Nothing here imports mmcv: the functions are pure, so the
tests can compare them with the compiled kernels in one process.
"""
