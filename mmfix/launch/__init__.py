"""Legacy (MMDetection 2.x) command lines on 3.x tools: a pure translator and one executor.

``translate`` is a pure function from (argv, environment, the script's parser,
visible GPUs) to a ``Plan``; ``execute`` is the only place that replaces the
process (``os.execve``) to start torchrun.
"""
