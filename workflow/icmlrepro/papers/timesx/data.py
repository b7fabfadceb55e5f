"""Stage ``timesx.data``: the real benchmark (statsmodels series + automated context) and the
synthetic-style benchmark, each written as four parquet tables.

The synthetic-style benchmark is drawn once per configuration (from the base seed), like a
published benchmark; the stochastic parts of the study are the pretrained forecasters (per seed).
"""

from __future__ import annotations

import numpy as np

from icmlrepro.core.seeding import derive_seed

from . import benchmark
from .synthetic import synthetic_benchmark


def run(job) -> None:
    s = job.params
    out = dict(job.output.items())
    benchmark.save({k: out[f"real_{k}"] for k in benchmark.TABLES}, benchmark.real_benchmark(s))
    rng = np.random.default_rng(derive_seed(s["seeds"][0], "timesx", "synthetic benchmark"))
    synth = synthetic_benchmark(rng, s["synthetic_series"], s["synthetic_history"])
    benchmark.save({k: out[f"synthetic_{k}"] for k in benchmark.TABLES}, synth)
