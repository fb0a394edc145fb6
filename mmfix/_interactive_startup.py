"""A PYTHONSTARTUP file: ``export PYTHONSTARTUP=$(mmfix startup-file)``.

Python runs it only for interactive sessions (the ``python`` prompt; IPython and
Jupyter read it too when configured to), never for ``python script.py``: use
``mmfix-run``, the ``.pth`` hook or sitecustomize for scripts.
"""

try:
    from mmfix._startup import from_interactive as _mmfix_from_interactive

    _mmfix_from_interactive()
    del _mmfix_from_interactive
except ImportError:
    pass
