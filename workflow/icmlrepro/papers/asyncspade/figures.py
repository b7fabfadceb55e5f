"""Stage ``asyncspade.figures``: TPOT against context per method, accuracy against budget, and
top-k recall of the predicted query against the window size."""

from __future__ import annotations

import pandas as pd

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_parquet

STYLE = {"full": "k-", "quest": "C1-o", "oracle": "C2-s", "asyncspade": "C0-^", "ideal": "C0:"}


def run(job) -> None:
    tp = read_parquet(job.input.tpot)
    batches = sorted(tp.batch.unique())
    fig, axes = new_figure(ncols=len(batches))
    for ax, b in zip(axes, batches):
        d = tp[tp.batch == b].groupby(["method", "context"]).tpot_ms.agg(["mean", "min", "max"]).reset_index()
        for m, g in d.groupby("method"):
            ax.plot(g.context, g["mean"], STYLE.get(m, "-"), label=m, markersize=4)
            ax.fill_between(g.context, g["min"], g["max"], alpha=0.15, color=ax.lines[-1].get_color())
        ax.set(xscale="log", xlabel="context (tokens)", ylabel="TPOT (ms)",
               title=f"batch {b}, budget {int(tp.budget.iloc[0])} ({tp.device.iloc[0]})")
    axes[0].legend(fontsize=7)
    save(fig, job.output.tpot)

    acc = pd.concat([read_parquet(f) for f in job.input.accuracy], ignore_index=True)
    per = acc.groupby(["seed", "method", "budget"]).correct.mean().reset_index()
    fig, (ax,) = new_figure()
    full = per[per.method == "full"].correct
    ax.axhspan(full.min(), full.max(), color="k", alpha=0.1)
    ax.axhline(full.mean(), color="k", label="full attention")
    for m in ("oracle", "quest", "asyncspade"):
        g = per[per.method == m].groupby("budget").correct.agg(["mean", "min", "max"]).reset_index()
        ax.errorbar(g.budget, g["mean"], yerr=[g["mean"] - g["min"], g["max"] - g["mean"]], fmt=STYLE[m],
                    capsize=2, label=m, markersize=4)
    ax.set(xscale="log", xlabel="token budget", ylabel="exact-answer accuracy",
           title=f"accuracy vs budget ({per.seed.nunique()} seeds, range)")
    ax.legend(fontsize=7)
    save(fig, job.output.accuracy)

    pred = pd.concat([read_parquet(f) for f in job.input.prediction], ignore_index=True)
    fig, (ax,) = new_figure()
    ar = pred[pred.predictor != "previous query"].groupby(["seed", "window"]).recall.mean().reset_index()
    g = ar.groupby("window").recall.agg(["mean", "min", "max"]).reset_index()
    ax.errorbar(g.window, g["mean"], yerr=[g["mean"] - g["min"], g["max"] - g["mean"]], fmt="C0-o", capsize=2,
                label="ridge AR predictor")
    prev = pred[pred.predictor == "previous query"].groupby("seed").recall.mean()
    ax.axhline(prev.mean(), color="C3", ls="--", label="previous query reused")
    ax.set(xscale="log", xlabel="window W (recent queries)", ylabel="recall of the true top-k",
           ylim=(0, 1), title="next-query prediction (teacher-forced)")
    ax.legend(fontsize=7)
    save(fig, job.output.recall)
