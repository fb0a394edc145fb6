"""Legacy components whose current namesake computes something else, kept under a name of their own.

Where a 0.x component's current namesake changed what it computes and the current toolbox has no
arguments that give the old result back, a converted config names mmfix's copy of the 0.x
component instead (the config converter adds the module to ``custom_imports``, which registers it
in the toolbox's registry). One module per toolbox (MMPose's 3D lifting in a module of its own,
``mmpose_lifting``); each imports only its own toolbox.
"""
