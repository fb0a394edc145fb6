"""Legacy (2.x-era OpenMMLab) command lines on 3.x tools: a pure translator and one executor.

``translate`` is a pure function from (argv, environment, the script's parser,
visible GPUs) to a ``Plan``. It is built from ``tokens`` (argv split by what the
parser and a table accept), ``topology`` (processes, devices, launch environment)
and ``rules`` (each toolbox's legacy flags as data, one row per flag, and which
toolbox a script belongs to).

Around it, the impure shell: ``checks`` (files, ports and evaluators a plan is
checked against before anything starts, and the machine's GPUs and CPU cores),
``report`` (the one log line of a launch, ``mmfix translate``'s output),
``early`` (what happens at interpreter start, before the script runs) and
``execute``, the only place that replaces the process (``os.execve``) to start
torchrun. ``_patches.legacy_cli`` is the argparse adapter that runs the same
pipeline at parse time.
"""
