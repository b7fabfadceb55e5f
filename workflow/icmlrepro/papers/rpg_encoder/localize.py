"""Stage ``localize``: tune every method on the dev tasks, then rank the test and changelog tasks.

Per seed, each method's grid (same size for all, :func:`.navigation.check_equal_budget`) is
searched on that seed's dev tasks (main queries); the chosen setting ranks the seed's test tasks
and the changelog tasks, in the main form and, beside it, as first written (location kept,
copied words left in the gold's text: :data:`.navigation.VARIANTS`). The changelog set is fixed, so a seed's replicate of it is a bootstrap
resample (``draws`` = how often a task is drawn), giving the spread a benchmark of that size has.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.seeding import derive_seed

from .navigation import METHODS, RepoIndex, check_equal_budget, localize, tune


def run(job) -> None:
    p = job.params
    check_equal_budget(p["tuning"])
    nodes, edges = read_parquet(job.input.nodes), read_parquet(job.input.edges)
    synthetic, changelog = read_parquet(job.input.synthetic), read_parquet(job.input.changelog)
    repos = sorted(set(p["repos"]))
    indexes = {r: RepoIndex.build(r, nodes, edges, p["fixed"].get("component_files")) for r in repos}
    ranks, tables, seconds = [], [], []
    for seed in p["seeds"]:
        seed = int(seed)
        t0 = time.perf_counter()
        tasks = synthetic[synthetic.seed == seed]
        dev, test = tasks[tasks.split == "dev"], tasks[tasks.split == "test"]
        draws = np.bincount(np.random.default_rng(derive_seed(seed, "rpg_encoder", "bootstrap"))
                            .integers(0, len(changelog), len(changelog)), minlength=len(changelog))
        for method in METHODS:
            params, table = tune(indexes, dev, method, p["tuning"][method], p["fixed"])
            table.insert(0, "seed", seed)
            table["params_json"] = [json.dumps(params, sort_keys=True) if c else "" for c in table["chosen"]]
            tables.append(table)
            for taskset, frame, weight, variants in (
                    ("test", test, np.ones(len(test), dtype=int), ("main", "copied", "prefixed")),
                    ("changelog", changelog, draws, ("main", "prefixed"))):
                for variant in variants:
                    r = localize(indexes, frame, method, params, p["fixed"], variant)
                    r.insert(0, "variant", variant)
                    r.insert(0, "taskset", taskset)
                    r.insert(0, "method", method)
                    r.insert(0, "seed", seed)
                    r["repo"] = frame["repo"].to_numpy()
                    r["template"] = frame["template"].to_numpy()
                    for col in ("location_leak", "location_leak_main"):
                        r[col] = frame[col].to_numpy(dtype=bool)
                    for col in ("overlap_indexed", "overlap_after"):
                        r[col] = frame[col].to_numpy(dtype=float)
                    r["draws"] = weight
                    ranks.append(r)
        seconds.append({"seed": seed, "seconds": time.perf_counter() - t0})
    write_parquet(job.output.ranks, pd.concat(ranks, ignore_index=True))
    write_parquet(job.output.tuning, pd.concat(tables, ignore_index=True))
    write_parquet(job.output.timing, pd.DataFrame(seconds))
