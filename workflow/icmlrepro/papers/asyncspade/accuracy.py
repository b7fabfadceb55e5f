"""Stage ``asyncspade.accuracy``: exact-answer accuracy of every method at every token budget.

Per seed, the same evaluation tasks are decoded greedily with full attention, oracle token top-k,
Quest and AsyncSpade (asynchronous worker) at each budget, through the substrate's evaluation loop.
AsyncSpade also records, at decode time, the recall of the oracle top-k and the cosine between the
predicted and the true query. Selection results do not depend on timing (a late worker is waited
for), so the outputs are deterministic.
"""

from __future__ import annotations

import pandas as pd

from icmlrepro.core.device import torch_device
from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.seeding import seed_everything
from icmlrepro.lm.data import tasks_from_table
from icmlrepro.lm.evaluate import evaluate_model
from icmlrepro.lm.model import load

from .decoding import SparseAttention

SPARSE = ("oracle", "quest", "asyncspade")


def selector_options(p: dict, page_size: int) -> dict:
    """The SparseAttention options shared by every stage, from the paper's settings."""
    return dict(window=p["window"], order=p["order"], lam=p["ridge_lambda"], dense_layers=p["dense_layers"],
                page_size=page_size, min_pages=p["min_pages"])


def run(job) -> None:
    p = job.params
    seed = int(job.wildcards.seed)
    seed_everything(seed)
    model, tok = load(job.input.target, torch_device())
    tasks = tasks_from_table(read_parquet(job.input.eval))
    runs = [("full", 0)] + [(m, b) for b in p["budgets"] for m in SPARSE]
    tables = []
    for method, budget in runs:
        with SparseAttention(model, method, budget, measure=method == "asyncspade",
                             **selector_options(p, p["page_size"])) as sa:
            df, _ = evaluate_model(model, tok, tasks, p["eval_batch_size"], p["max_new_tokens"])
        summary = sa.overlap() if method == "asyncspade" else {}
        df.insert(0, "seed", seed)
        df.insert(1, "method", method)
        df.insert(2, "budget", budget)
        df["decode_recall"] = summary.get("mean_recall", float("nan"))
        df["decode_cosine"] = summary.get("mean_cosine", float("nan"))
        tables.append(df)
    write_parquet(job.output.table, pd.concat(tables, ignore_index=True))
