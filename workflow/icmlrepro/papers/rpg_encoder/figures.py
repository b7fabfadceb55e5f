"""RPG-Encoder figures: localization accuracy, maintenance cost per release, cost against size, coverage."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_parquet

from .navigation import METHODS

LABELS = {"bm25_code": "BM25 over code", "dep_graph": "dependency graph", "rpg": "RPG navigation"}


def plot_localization(acc: pd.DataFrame, path) -> None:
    """Acc@5 at function and file level on the main (leak-free) tasks and, beside them, on the tasks as
    first written (location kept, copied words left in); bars = mean over seeds, dots = seeds."""
    fig, axes = new_figure(ncols=2, width=5.0)
    cols = [(lvl, v) for v in ("main", "prefixed") for lvl in ("function", "file")]
    width = 0.8 / len(METHODS)
    for ax, taskset in zip(axes, ("synthetic", "changelog")):
        d = acc[(acc.taskset == taskset) & (acc.subset == "all") & (acc.k == 5)]
        for j, m in enumerate(METHODS):
            x = np.arange(len(cols)) + (j - (len(METHODS) - 1) / 2) * width
            vals = [d[(d.method == m) & (d.level == lvl) & (d.variant == v)]["accuracy"].to_numpy() for lvl, v in cols]
            ax.bar(x, [v.mean() if v.size else np.nan for v in vals], width, label=LABELS[m])
            for xi, v in zip(x, vals):
                ax.plot(np.full(v.size, xi), v, "k.", ms=2)
        ax.set_xticks(np.arange(len(cols)), [f"{lvl}\n{'leak-free' if v == 'main' else 'prefixed'}" for lvl, v in cols],
                      fontsize=7)
        ax.set(ylim=(0, 1), ylabel="Acc@5", title=f"{taskset} issues")
    axes[0].legend(fontsize=7)
    save(fig, path)


def plot_releases(rel: pd.DataFrame, path) -> None:
    """Lifting calls per release difference: incremental update vs full rebuild (log scale; costs do
    not depend on the clustering seed, so one seed's replay is shown)."""
    fig, (ax,) = new_figure(width=6.0, height=4.2)
    if len(rel):
        rel = rel[rel.seed == rel.seed.min()]
        labels = [f"{'' if r.kind == 'series' else '(vendored) '}{r.package} {r.old}→{r.new}"
                  for r in rel.itertuples()]
        x = np.arange(len(rel))
        inc = rel["incremental_cost"].to_numpy(dtype=float)
        ax.bar(x - 0.2, rel["full_cost"], 0.4, label="full rebuild")
        ax.bar(x + 0.2, np.where(inc > 0, inc, np.nan), 0.4, label="incremental update")
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.5)
        for xi in x[inc == 0]:  # nothing to re-lift: no bar on a log scale, say so
            ax.annotate("0", (xi + 0.2, 0.6), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=6)
        ax.legend(fontsize=7)
    ax.set(ylabel="lifting calls", title="maintenance cost per release difference")
    save(fig, path)


def plot_scaling(commits: pd.DataFrame, path) -> None:
    """Cost per commit of one fixed size against repository size, both paths, every seed and commit."""
    fig, (ax,) = new_figure()
    for (col, label), color in zip((("full_cost", "full rebuild"), ("incremental_cost", "incremental update")),
                                   ("C0", "C1")):
        ax.plot(commits["units"], commits[col], "o", ms=3, alpha=0.6, color=color, label=label)
        m = commits.groupby("units")[col].mean()
        ax.plot(m.index, m.values, "-", lw=1, color=color)
    for repo, g in commits.groupby("repo"):
        ax.annotate(repo, (g["units"].iloc[0], g["full_cost"].iloc[0]), fontsize=6)
    ax.set(xscale="log", yscale="log", xlabel="repository size (units)", ylabel="lifting calls per commit",
           title="cost of one same-sized commit")
    ax.legend(fontsize=7)
    save(fig, path)


def plot_coverage(cov: pd.DataFrame, path) -> None:
    """Per repository: entities rebuilt from the RPG's stubs (name and kind; with the signature) and by
    the documentation-only representation."""
    fig, (ax,) = new_figure()
    per = cov.groupby("repo", sort=True)[["rpg_name", "rpg", "docs"]].mean()
    x = np.arange(len(per))
    ax.bar(x - 0.27, per["rpg_name"], 0.27, label="RPG stub: name and kind")
    ax.bar(x, per["rpg"], 0.27, label="RPG stub: with signature")
    ax.bar(x + 0.27, per["docs"], 0.27, label="documentation only")
    ax.set_xticks(x, per.index, rotation=30, ha="right", fontsize=7)
    ax.set(ylim=(0, 1.05), ylabel="share of run-time functions/classes", title="reconstruction coverage")
    ax.legend(fontsize=7, loc="lower left")
    save(fig, path)


def run(job) -> None:
    plot_localization(read_parquet(job.input.accuracy), job.output.localization)
    plot_releases(read_parquet(job.input.releases), job.output.releases)
    plot_scaling(read_parquet(job.input.commits), job.output.scaling)
    plot_coverage(read_parquet(job.input.coverage), job.output.coverage)
