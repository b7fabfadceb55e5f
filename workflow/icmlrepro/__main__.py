import os
import sys

# Before any OpenMP runtime loads (torch's libgomp reads this once): idle OpenMP threads sleep instead
# of spinning. With other jobs on the cores, the spinning threads of a 2-thread torch job took 17x the
# CPU per LM training step (0.16 vs 5.7 steps/s, issue 17); the computed bytes are the same.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

if sys.argv[1:2] in (["stage"], ["report"]):  # a pipeline job: its own network namespace where permitted
    from icmlrepro.core.offline import enter_network_namespace

    enter_network_namespace(["-m", "icmlrepro", *sys.argv[1:]])

from icmlrepro.core.cli import main  # noqa: E402

sys.exit(main())
