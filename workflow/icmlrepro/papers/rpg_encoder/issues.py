"""Stage ``issues``: the localization tasks of every seed, and the real changelog tasks.

Synthetic tasks are drawn per seed (targets, styles, kept words) from every repository and
split into dev (tuning) and test halves. Changelog tasks are the real CPython entries that name
one function of the standard-library graph; they are never used for tuning. Every task carries a
main query (name and location masked) and a prefixed one (location kept), whether the prefixed one
leaks the location, and how much of the main query sits in the gold unit's indexed text. Where the changelog
file is absent (not a Debian machine) they are replaced by synthetic standard-library tasks
from their own random stream, marked ``fallback``, so the pipeline still runs end to end.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.seeding import derive_seed

from .changelog_tasks import changelog_tasks
from .news import Entry
from .synthetic_issues import synthetic_tasks, with_leak_columns


def draw(nodes: pd.DataFrame, edges: pd.DataFrame, repos: list[str], t: dict, seed: int, stream: str) -> pd.DataFrame:
    rng = np.random.default_rng(derive_seed(seed, "rpg_encoder", stream))
    frames = [synthetic_tasks(nodes, edges, repo, t["per_repo"], t["styles"], t["keep"], t["max_words"],
                              t["min_words"], t["mention"], t["copied_kept"], rng) for repo in repos]
    return pd.concat(frames, ignore_index=True)


def split(tasks: pd.DataFrame, dev_fraction: float, seed: int) -> pd.Series:
    """dev/test label per task: a random ``dev_fraction`` of each repository's tasks is dev."""
    rng = np.random.default_rng(derive_seed(seed, "rpg_encoder", "split"))
    labels = pd.Series("test", index=tasks.index)
    for _, idx in tasks.groupby("repo").groups.items():
        idx = np.asarray(idx)
        dev = rng.permutation(idx)[: int(round(dev_fraction * len(idx)))]
        labels[dev] = "dev"
    return labels


def run(job) -> None:
    p = job.params
    nodes, edges = read_parquet(job.input.nodes), read_parquet(job.input.edges)
    t = p["tasks"]
    frames = []
    for seed in p["seeds"]:
        tasks = draw(nodes, edges, p["repos"], t, int(seed), "tasks")
        tasks.insert(0, "seed", int(seed))
        tasks["split"] = split(tasks, t["dev_fraction"], int(seed))
        frames.append(tasks)
    write_parquet(job.output.synthetic, pd.concat(frames, ignore_index=True))

    entries = read_parquet(job.input.entries)
    units = nodes[(nodes.repo == "stdlib") & nodes.kind.isin(["function", "method"])].id.tolist()
    if len(entries) and units:
        real = changelog_tasks([Entry(*r) for r in entries[["issue", "section", "text"]].itertuples(index=False)],
                               units, p["news_sections"], "stdlib")
        real = with_leak_columns(real, nodes[nodes.repo == "stdlib"]).assign(reference=real["reference"])
        real["source"] = "changelog"
    else:
        repo = "stdlib" if units else p["repos"][0]
        real = draw(nodes, edges, [repo], t, int(p["seeds"][0]), "changelog_fallback")
        real["reference"], real["source"] = "", "fallback"
    write_parquet(job.output.changelog, real)
