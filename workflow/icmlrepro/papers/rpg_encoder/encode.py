"""Stage ``encode`` (rule ``rpg_encoder_train``): the RPG of every repository, as node and edge tables.

The encoder has nothing to train; this is the step that the paper spends its LLM calls on
(semantic lifting and reorganisation), so its ledger of lifting calls per repository is kept,
with the graph's structure checked and counted through networkx (:func:`.encoder.structure`).
"""

from __future__ import annotations

import time

import pandas as pd

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.seeding import derive_seed

from . import encoder as E
from .lifting import Lifter


def settings(p) -> E.Settings:
    """The encoder settings of a stage; the clustering seed derives from the first seed (one graph per scale)."""
    return E.Settings.from_params(p["lifting"], derive_seed(int(p["seeds"][0]), "rpg_encoder", "hierarchy"))


def run(job) -> None:
    p = job.params
    src = read_parquet(job.input.sources)
    st = settings(p)
    nodes, edges, stats = [], [], []
    for repo in p["repos"]:
        sel = src[src.repo == repo]
        files = dict(zip(sel.path, sel.source))
        lifter = Lifter(st.max_words, st.summary_terms)
        t0 = time.perf_counter()
        rpg = E.encode(repo, files, st, lifter)
        seconds = time.perf_counter() - t0
        n, e = E.node_table(rpg), E.edge_table(rpg)
        nodes.append(n)
        edges.append(e)
        stats.append({"repo": repo, "files": len(rpg.files), "units": len(rpg.features),
                      **{f"lifted_{k}": int(v) for k, v in sorted(lifter.calls.items())},
                      **E.structure(n, e), "seconds": seconds})
    write_parquet(job.output.nodes, pd.concat(nodes, ignore_index=True))
    write_parquet(job.output.edges, pd.concat(edges, ignore_index=True))
    write_parquet(job.output.stats, pd.DataFrame(stats))
