"""OnlineSPEC's verification kernel on a CUDA GPU outside the pipeline: the same code as rule ``onlinespec_kernels``.

    .venv/bin/python workflow/scripts/gpu_benchmark_onlinespec.py [--out results/gpu_benchmark/onlinespec]

Checks against the torch reference and times kernel and reference with ``triton.testing.do_bench``
(achieved bandwidth as a share of the device's data-sheet peak), through
``icmlrepro.papers.onlinespec.kernel_bench.bench``; writes kernels.json and kernels.png under --out.
Exits with code 2 without CUDA (the CPU branch is the pipeline's kernel rule). The GPU-tagged part of the
DAG and both kernel rules in one go: ``bash workflow/scripts/gpu_check.sh``.
"""

import sys

from icmlrepro.core.kernelbench import standalone
from icmlrepro.papers.onlinespec.kernel_bench import bench

if __name__ == "__main__":
    sys.exit(standalone(bench, "results/gpu_benchmark/onlinespec", __doc__.split("\n")[0]))
