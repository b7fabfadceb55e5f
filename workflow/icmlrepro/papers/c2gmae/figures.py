"""C2-GMAE figures: the ladder's probe accuracy per graph, accuracy against homophily,
context-use consistency against reconstruction error, and per density bin the training coverage
(fixed in expectation by the sampler) beside the trained model's reconstruction error (measured)."""

from __future__ import annotations

import numpy as np

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_parquet

LABELS = {"graphmae": "GraphMAE", "pe": "+ PE reference", "pe_density": "+ density masking",
          "c2gmae": "+ hetero amplification (C2-GMAE)", "raw_features": "probe on raw features",
          "mlp": "MLP on raw features", "majority_class": "majority class"}
REFERENCES = {"raw_features": "k_", "mlp": "r_", "majority_class": "b_"}


def plot_ladder(summary, rungs, path) -> None:
    graphs = list(dict.fromkeys(summary.sort_values("edge_homophily", ascending=False).graph))
    fig, (ax,) = new_figure(width=max(4.2, 1.3 * len(graphs)))
    width = 0.8 / len(rungs)
    for i, rung in enumerate(rungs):
        sel = summary[summary.rung == rung]
        xs = np.arange(len(graphs)) + (i - (len(rungs) - 1) / 2) * width
        means = [sel[sel.graph == g].test_acc.mean() for g in graphs]
        ax.bar(xs, means, width, label=LABELS.get(rung, rung))
        for x, g in zip(xs, graphs):  # every seed shown
            v = sel[sel.graph == g].test_acc.to_numpy()
            ax.plot(np.full(v.size, x), v, "k.", ms=2)
    for ref, marker in REFERENCES.items():  # raw-feature references: a marker across each graph's group
        sel = summary[summary.rung == ref]
        means = [sel[sel.graph == g].test_acc.mean() for g in graphs]
        ax.plot(np.arange(len(graphs)), means, marker, ms=9, mew=1.5, ls="none", label=LABELS[ref])
    ax.set_xticks(np.arange(len(graphs)), graphs, rotation=20, fontsize=7)
    ax.set_ylabel("linear-probe test accuracy")
    ax.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below: keeps markers visible
    save(fig, path)


def plot_vs_homophily(summary, rungs, path) -> None:
    """Lines join the contextual SBMs only; other (real) graphs are single open markers."""
    fig, (ax,) = new_figure()
    sbm = summary.graph.str.startswith("csbm")
    for rung in rungs:
        sel = summary[summary.rung == rung]
        g = sel[sbm[sel.index]].groupby("edge_homophily").test_acc
        line = ax.errorbar(g.mean().index, g.mean().values, yerr=g.std().fillna(0).values, marker="o", ms=3,
                           capsize=2, label=LABELS.get(rung, rung))
        real = sel[~sbm[sel.index]].groupby("edge_homophily").test_acc
        ax.errorbar(real.mean().index, real.mean().values, yerr=real.std().fillna(0).values, marker="s", ms=5,
                    mfc="none", ls="none", capsize=2, color=line[0].get_color())
    ax.set_title("lines: contextual SBMs; squares: real-feature graphs", fontsize=7)
    ax.set_xlabel("measured edge homophily")
    ax.set_ylabel("linear-probe test accuracy")
    ax.legend(fontsize=6)
    save(fig, path)


def plot_consistency(summary, rungs, path) -> None:
    fig, (ax,) = new_figure()
    for rung in rungs:
        sel = summary[summary.rung == rung]
        ax.scatter(sel.recon_loss, sel.consistency, s=10, label=LABELS.get(rung, rung))
    ax.set_xscale("log")
    ax.set_xlabel("reconstruction error (SCE, shared masks)")
    ax.set_ylabel("context-use consistency (1 - TV)")
    ax.legend(fontsize=6)
    save(fig, path)


def plot_coverage(bins, rungs, path) -> None:
    fig, (ax, ax2) = new_figure(ncols=2)
    # reconstruction error relative to the graph's mean over bins, so that graphs of different scale pool
    rel = bins.recon_error / bins.groupby(["graph", "seed", "rung"]).recon_error.transform("mean")
    for rung in rungs:
        sel = bins.rung == rung
        g = bins[sel].groupby("bin").coverage
        ax.errorbar(g.mean().index, g.mean().values, yerr=g.std().fillna(0).values, marker="o", ms=3, capsize=2,
                    label=LABELS.get(rung, rung))
        r = rel[sel].groupby(bins[sel].bin)
        ax2.errorbar(r.mean().index, r.mean().values, yerr=r.std().fillna(0).values, marker="o", ms=3, capsize=2,
                     label=LABELS.get(rung, rung))
    ax.set_xlabel("density bin (0 = densest)")
    ax.set_ylabel("share masked at least once per window")
    ax.set_title("sampler (expected value equal by construction)", fontsize=7)
    ax2.set_xlabel("density bin (0 = densest)")
    ax2.set_ylabel("reconstruction error / graph's mean over bins")
    ax2.set_title("trained model, shared evaluation masks", fontsize=7)
    ax.legend(fontsize=6)
    save(fig, path)


def run(job) -> None:
    rungs = job.params["rungs"]
    summary = read_parquet(job.input.summary)
    plot_ladder(summary, rungs, job.output.ladder)
    plot_vs_homophily(summary, rungs, job.output.homophily)
    plot_consistency(summary, rungs, job.output.consistency)
    plot_coverage(read_parquet(job.input.bins), rungs, job.output.coverage)
