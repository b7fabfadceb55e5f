"""Stage ``asyncspade.evaluate``: metrics.json from the prediction, accuracy and TPOT tables.

Replicates: seeds for accuracy and query prediction (each seed draws new tasks and traces), and
interleaved repetitions for timings (marked ``timing``; they are the only values that differ between
two identical runs). Which workload a timing claim is read at:

- TPOT reductions vs Quest and vs full attention: the heaviest workload that ran (most cached
  tokens, batch x context; workloads that do not fit the device's memory are skipped), the
  long-generation regime the paper targets;
- full overlap and theoretical-optimal TPOT ("within a certain workload range"): the workload fixed
  in the config before the run (``tpot.claim_workload``), never the best one after the fact (a
  minimum over workloads would turn noise into a pass).

Kernel checks and timings (rule ``asyncspade_kernels``) are added as they are (``core.kernelbench``):
timings exist on CUDA only and are NaN, said so in their description, elsewhere.

Accuracy differences are paired per seed and averaged over the budgets of the sweep.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_json, read_parquet
from icmlrepro.core.kernelbench import kernel_metrics
from icmlrepro.core.metrics import MetricsFile

from .memory import heaviest
from .tpot import METHODS as TIMED


def accuracy_metrics(mf: MetricsFile, acc: pd.DataFrame, seeds: list[int], headline: int) -> None:
    """Accuracy of every method at every budget; the claims' paired differences at the ``headline`` budget, fixed
    in the config before any run (their means over the budgets are reported beside); and, per budget, each sparse
    method's gap to oracle token top-k with AsyncSpade's decode-time recall of that top-k. AsyncSpade picks tokens,
    not pages, from the cache the oracle reads, so its gap to the oracle is the cost of predicting the query; Quest's
    is the cost of its page granularity and key-bound estimate."""
    per = acc.groupby(["seed", "method", "budget"])["correct"].mean()
    full = per.xs("full", level="method").droplevel("budget").reindex(seeds)
    mf.add("accuracy.full", full.values, unit="fraction", direction="higher",
           description="exact-answer accuracy with full attention (greedy)")
    budgets = sorted(b for b in acc.budget.unique() if b > 0)
    if headline not in budgets:
        raise ValueError(f"headline budget {headline} is not among the accuracy budgets {budgets}")
    table = {}
    for method in ("oracle", "quest", "asyncspade"):
        for b in budgets:
            v = per.xs((method, b), level=("method", "budget")).reindex(seeds)
            table[method, b] = v.values
            mf.add(f"accuracy.{method}.b{b}", v.values, unit="fraction", direction="higher",
                   description=f"exact-answer accuracy, {method}, token budget {b}")

    def other_at(other, b):
        return full.values if other == "full" else table[other, b]

    for other, name in (("quest", "quest"), ("full", "full"), ("oracle", "oracle_topk")):
        mf.add(f"acc_asyncspade_minus_{name}", table["asyncspade", headline] - other_at(other, headline),
               unit="fraction", direction="higher",
               description=f"AsyncSpade accuracy minus {other}'s, paired per seed, at the headline budget {headline}")
        mf.add(f"acc_asyncspade_minus_{name}.mean_over_budgets",
               np.mean([table["asyncspade", b] - other_at(other, b) for b in budgets], axis=0), unit="fraction",
               direction="higher", description=f"the same, mean over budgets {budgets} (reported, not judged)")
    recall = acc[acc.method == "asyncspade"].groupby(["seed", "budget"])["decode_recall"].mean()
    for b in budgets:
        for method in ("quest", "asyncspade"):
            mf.add(f"acc_gap_to_oracle.{method}.b{b}", table["oracle", b] - table[method, b], unit="fraction",
                   direction="lower", description=f"oracle token top-k accuracy minus {method}'s at budget {b}")
        mf.add(f"decode_topk_recall_asyncspade.b{b}", recall.xs(b, level="budget").reindex(seeds).values,
               unit="fraction", direction="higher",
               description=f"during decoding at budget {b}: share of the true query's top-k that AsyncSpade read")
    rec = acc[acc.method == "asyncspade"].groupby("seed")["decode_recall"].mean().reindex(seeds)
    mf.add("decode_topk_recall_asyncspade", rec.values, unit="fraction", direction="higher",
           description="during decoding: recall of the true query's top-k by AsyncSpade's selection (mean over budgets)")


def prediction_metrics(mf: MetricsFile, pred: pd.DataFrame, seeds: list[int], window: int, order: int) -> None:
    per = pred.groupby(["seed", "predictor"])[["recall", "cosine"]].mean()
    main = f"ridge AR({order}), W={window}"
    ar = per.xs(main, level="predictor").reindex(seeds)
    prev = per.xs("previous query", level="predictor").reindex(seeds)
    mf.add("predicted_query_topk_recall", ar.recall.values, unit="fraction", direction="higher",
           description=f"teacher-forced recall of the true query's top-k by the predicted query ({main})")
    mf.add("predicted_query_cosine", ar.cosine.values, unit="cosine", direction="higher",
           description=f"cosine of predicted and true pre-RoPE query ({main})")
    mf.add("previous_query_topk_recall", prev.recall.values, unit="fraction", direction="higher",
           description="the same recall when the previous query is reused unchanged (no regression)")
    mf.add("recall_gain_over_previous_query", ar.recall.values - prev.recall.values, unit="fraction",
           direction="higher", description="what the temporal regression adds over reusing the previous query")


def tpot_metrics(mf: MetricsFile, tp: pd.DataFrame, claim_at: tuple[int, int]) -> None:
    wide = tp.pivot_table(index=["context", "batch", "repeat"], columns="method", values="tpot_ms")
    waits = tp[tp.method == "asyncspade"].set_index(["context", "batch", "repeat"])
    workloads = sorted({(c, b) for c, b, _ in wide.index})
    for ctx, b in workloads:
        w = wide.xs((ctx, b), level=("context", "batch"))
        for m in TIMED:
            mf.add(f"tpot_ms.{m}.n{ctx}.b{b}", w[m].values, unit="ms", direction="lower", timing=True,
                   description=f"time per output token, {m}, context {ctx}, batch {b} (one value per repetition)")
    heavy = heaviest(workloads)
    w = wide.xs(heavy, level=("context", "batch"))
    for other in ("quest", "full"):
        mf.add(f"tpot_reduction_vs_{other}", 1 - w["asyncspade"].values / w[other].values, unit="fraction",
               direction="higher", timing=True,
               description=f"1 - TPOT_asyncspade / TPOT_{other} at context {heavy[0]}, batch {heavy[1]}")
    at = wide.xs(claim_at, level=("context", "batch"))
    where = f"context {claim_at[0]}, batch {claim_at[1]} (tpot.claim_workload, fixed before the run)"
    mf.add("tpot_ratio_asyncspade_vs_ideal_sparse", at["asyncspade"].values / at["ideal"].values, unit="ratio",
           direction="lower", timing=True, description=f"TPOT_asyncspade / TPOT with indices given for free, {where}")
    mf.add("tpot_ratio_oracle_vs_ideal_sparse", at["oracle"].values / at["ideal"].values, unit="ratio",
           direction="lower", timing=True,
           description=f"TPOT of synchronous token top-k / ideal sparse TPOT, {where}: the same selection on the "
                       "critical path (the ratio the asynchronous design claims to remove)")
    mf.add("selection_wait_fraction_claim_workload", waits.wait_rate.xs(claim_at, level=("context", "batch")).values,
           unit="fraction", direction="lower", timing=True,
           description=f"share of selections the decode loop waited for (host blocked on the worker, or on CUDA "
                       f"the decode stream stalled on the worker's event), {where}")
    mf.add("selection_wait_fraction_heaviest_workload", waits.wait_rate.xs(heavy, level=("context", "batch")).values,
           unit="fraction", direction="lower", timing=True,
           description=f"share of selections waited for at context {heavy[0]}, batch {heavy[1]}")
    h = waits.xs(heavy, level=("context", "batch"))
    mf.add("predictor_time_share_of_step", h.predict_ms_per_step.values / w["ideal"].values, unit="fraction",
           direction="lower", timing=True,
           description=f"query-predictor device time per decode step / ideal sparse step, context {heavy[0]}, "
                       f"batch {heavy[1]}")


def run(job) -> None:
    p = job.params
    seeds = list(p["seeds"])
    mf = MetricsFile("asyncspade", p["scale"], replicate="seed", replicates=seeds)
    acc = pd.concat([read_parquet(f) for f in job.input.accuracy], ignore_index=True)
    pred = pd.concat([read_parquet(f) for f in job.input.prediction], ignore_index=True)
    accuracy_metrics(mf, acc, seeds, p["headline_budget"])
    prediction_metrics(mf, pred, seeds, p["window"], p["order"])
    t = p["tpot"]
    tpot_metrics(mf, read_parquet(job.input.tpot), (t["claim_workload"]["context"], t["claim_workload"]["batch"]))
    kernel_metrics(mf, read_json(job.input.kernels))
    mf.write(job.output.metrics)
