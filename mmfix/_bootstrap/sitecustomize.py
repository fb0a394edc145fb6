# Put on PYTHONPATH by `mmfix-run`: activates mmfix in this interpreter and every
# Python child (they inherit PYTHONPATH), then runs the sitecustomize it hides.
try:
    from mmfix._startup import activate_and_chain
except ImportError:  # another interpreter without mmfix installed: stay out of its way
    pass
else:
    activate_and_chain(__file__, door="mmfix-run")
