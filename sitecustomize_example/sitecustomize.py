# Activates mmfix in every Python process that has this folder on PYTHONPATH,
# then imports the next sitecustomize on the path so yours still runs.
# Usage: export PYTHONPATH=/path/to/sitecustomize_example${PYTHONPATH:+:$PYTHONPATH}
try:
    from mmfix._startup import activate_and_chain
except ImportError:  # mmfix is not installed in this interpreter
    pass
else:
    activate_and_chain(__file__)
