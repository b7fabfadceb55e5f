"""Stage ``timesx.data``: the real benchmark (statsmodels series + automated context), the
synthetic-style benchmark and an independent redraw of it, each written as four parquet tables, and
the real benchmark's context as a pipeline blind to release dates would build it (the audit's
positive case).

The synthetic-style benchmark is drawn once per configuration (from the base seed), like a
published benchmark; the stochastic parts of the study are the pretrained forecasters (per seed).
The redraw (another stream of the same held-out generator) measures how much method rankings move
between two benchmarks of the same kind: the control of the rank-transfer claim.
"""

from __future__ import annotations

import numpy as np

from icmlrepro.core.io import write_parquet
from icmlrepro.core.seeding import derive_seed

from . import benchmark
from .synthetic import synthetic_benchmark
from .workflow_inputs import UNBOUNDED


def run(job) -> None:
    s = job.params
    out = dict(job.output.items())
    benchmark.save({k: out[f"real_{k}"] for k in benchmark.TABLES}, benchmark.real_benchmark(s))
    write_parquet(out[UNBOUNDED], benchmark.real_benchmark(s, release_dates=False)[3])
    for name in ("synthetic", "synthetic_redraw"):
        rng = np.random.default_rng(derive_seed(s["seeds"][0], "timesx", "synthetic benchmark", name))
        synth = synthetic_benchmark(rng, s["synthetic_series"], s["synthetic_history"])
        benchmark.save({k: out[f"{name}_{k}"] for k in benchmark.TABLES}, synth)
