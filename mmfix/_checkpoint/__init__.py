"""The checkpoint subsystem: everything mmfix does to a checkpoint file, one module per job.

* ``atomic``: writes that never leave a truncated file under the final name.
* ``safe_globals``: which globals a weights_only load may use, and the guarded
  stand-ins (HistoryBuffer, getattr) that make MMEngine checkpoints load safely.
* ``numpy_guard``: numpy values rebuilt from validated arguments only.
* ``pickle_reader``: a bounded, static reader of pickles (builds and runs nothing).
* ``files``: what a file is (format, zip container checks).
* ``replay``: the pickle replayed statically (its globals, storages, consistency).
* ``diagnosis``: why a file cannot be read, in one sentence.
* ``report``: what ``mmfix inspect`` prints.
* ``shared_load``: the ranks of a node loading one file share one sealed copy.

The patches (``mmfix._patches.torch_load`` and friends) are the only runtime users.
"""
