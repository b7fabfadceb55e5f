"""Figures: alignment accuracy vs difficulty per model (headline input, with chance, the raw-degree
reference and the 1-WL ceiling), the two inputs side by side at the main noise, ranking stability vs difficulty, transfer."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_parquet

from .models import ANISOTROPIC, ISOTROPIC, REFERENCES


def plot_accuracy(scores: pd.DataFrame, headline: str, path) -> None:
    scores = scores[scores.input == headline]
    sources = sorted(scores.source.unique())
    fig, axes = new_figure(ncols=len(sources))
    for ax, source in zip(axes, sources):
        d = scores[scores.source == source]
        for ref, style in zip(REFERENCES, (":", "-.", "--")):
            g = d[d.model == ref].groupby("noise")["top1"].mean()
            ax.plot(g.index, g.values, style, color="grey", lw=1.5, label=ref.replace("_", " "))
        for model in [m for m in ISOTROPIC + ANISOTROPIC if m in set(d.model)]:
            g = d[d.model == model].groupby("noise")["top1"]
            m, lo, hi = g.mean(), g.min(), g.max()
            style = "--" if model in ISOTROPIC else "-"
            line, = ax.plot(m.index, m.values, style, marker="o", ms=3, label=model)
            ax.fill_between(m.index, lo.values, hi.values, color=line.get_color(), alpha=0.1, lw=0)
        ax.set_title(f"{source} graphs, {headline} input (mean; band: min-max over seeds)", fontsize=8)
        ax.set(xlabel="corruption noise (difficulty)", ylabel="top-1 alignment recall")
    axes[0].legend(fontsize=6, ncol=2, title="dashed: isotropic", title_fontsize=6)
    save(fig, path)


def plot_inputs(scores: pd.DataFrame, main_noise: float, path) -> None:
    """Top-1 per model at the main noise for each input (mean over sources; dots: seeds)."""
    d = scores[scores.noise == main_noise]
    inputs = list(dict.fromkeys(d.input))
    models = [m for m in (*ISOTROPIC, *ANISOTROPIC, *REFERENCES) if m in set(d.model)]
    fig, (ax,) = new_figure()
    width = 0.8 / len(inputs)
    for j, inp in enumerate(inputs):
        per_seed = d[d.input == inp].groupby(["model", "seed"])["top1"].mean()
        x = np.arange(len(models)) + (j - (len(inputs) - 1) / 2) * width
        ax.bar(x, [per_seed.loc[m].mean() for m in models], width, label=f"{inp} input")
        for xi, m in zip(x, models):
            ax.scatter(np.full(len(per_seed.loc[m]), xi), per_seed.loc[m].values, s=5, color="k", zorder=3)
    ax.axvline(len(ISOTROPIC) - 0.5, color="grey", lw=0.8)
    ax.axvline(len(ISOTROPIC) + len(ANISOTROPIC) - 0.5, color="grey", lw=0.8)
    ax.set_xticks(np.arange(len(models)), models, rotation=60, fontsize=6)
    ax.set_ylabel("top-1 alignment recall")
    ax.set_title(f"inputs at the main noise {main_noise:g}\n(isotropic | anisotropic | references)", fontsize=8)
    ax.legend(fontsize=6)
    save(fig, path)


def plot_stability(stab: pd.DataFrame, path) -> None:
    fig, (ax,) = new_figure()
    for source, d in stab.groupby("source"):
        g = d.groupby("noise")["stability"].mean()
        ax.plot(g.index, g.values, marker="o", ms=3, alpha=0.6, label=f"{source} graphs")
    by = stab.groupby(["noise", "seed"])["stability"].mean().reset_index()
    ax.scatter(by.noise, by.stability, s=8, color="grey", label="per seed (mean over sources)")
    mean = by.groupby("noise")["stability"].mean()
    ax.plot(mean.index, mean.values, "k-", lw=2, label="mean")
    best = stab.loc[stab.optimal, "noise"].iloc[0]
    ax.axvline(best, color="k", ls=":", lw=1, label=f"optimal noise {best:g}")
    ax.set(xlabel="corruption noise (difficulty)", ylabel="rank stability (leave-one-seed-out Kendall τ)",
           title="model-ranking stability across seeds")
    ax.legend(fontsize=6)
    save(fig, path)


def plot_transfer(transfer: pd.DataFrame, path) -> None:
    fig, axes = new_figure(ncols=2)
    reg = transfer[transfer.task == "regression"]
    rec = transfer[(transfer.task == "reconstruction") & (transfer.metric == "balanced_accuracy")]
    for ax, d, ylabel, title in ((axes[0], reg, "test MAE (avg. clustering)", "transformer graph regression"),
                                 (axes[1], rec, "balanced accuracy (edge / non-edge)", "structure reconstruction")):
        variants = list(dict.fromkeys(d.variant))
        means = [d[d.variant == v].value.mean() for v in variants]
        ax.bar(np.arange(len(variants)), means, color="lightsteelblue")
        for i, v in enumerate(variants):
            vals = d[d.variant == v].value.to_numpy()
            ax.scatter(np.full(vals.size, i), vals, s=10, color="k", zorder=3)
        labels = [("training mean" if v == "mean" else f"{v} PE") if ax is axes[0] else f"{v} encoder"
                  for v in variants]
        ax.set_xticks(np.arange(len(variants)), labels, fontsize=6, rotation=20)
        ax.set(ylabel=ylabel, title=title)
    save(fig, path)


def run(job) -> None:
    scores = read_parquet(job.input.scores)
    plot_accuracy(scores, job.params["input"], job.output.accuracy)
    plot_inputs(scores, float(job.params["main_noise"]), job.output.inputs)
    plot_stability(read_parquet(job.input.stability), job.output.stability)
    plot_transfer(read_parquet(job.input.transfer), job.output.transfer)
