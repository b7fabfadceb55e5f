"""Switch the network guard on in every Python process a pipeline job starts.

Python imports ``sitecustomize`` at start-up from its path. The rules put this directory on
``PYTHONPATH`` and set ``ICMLREPRO_NETWORK_GUARD=1`` (icmlrepro.core.offline.job_environment),
and a guarded process exports both to its children, so a ``subprocess`` or multiprocessing
``spawn`` child is guarded before any of its own code runs (a ``fork`` child inherits the hook).
Without the variable this module does nothing.
"""

import os

if os.environ.get("ICMLREPRO_NETWORK_GUARD") == "1":
    from icmlrepro.core.offline import install_network_guard

    install_network_guard()
