"""LEC figures: risk vs alpha against the y = alpha line, retention vs alpha, routing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, new_grid, save
from icmlrepro.core.io import read_parquet

from .evaluate import METHODS

LABELS = {"lec": "LEC", "ucb_hfd": "UCB-HFD", "ucb_clp": "UCB-CLP", "sgr": "SGR", "ltt": "LTT",
          "routing_joint": "routing (joint LEC)", "routing_naive": "routing (naive per-model)"}


def _mean_band(ax, df: pd.DataFrame, col: str, label: str, **kw) -> None:
    g = df.groupby("alpha")[col]
    m, lo, hi = g.mean(), g.min(), g.max()
    line, = ax.plot(m.index, m.values, marker="o", ms=3, label=label, **kw)
    ax.fill_between(m.index, lo.values, hi.values, color=line.get_color(), alpha=0.15, lw=0)


def plot_methods(summary: pd.DataFrame, model: str, col: str, path, ylabel: str, diagonal: bool) -> None:
    fig, (ax,) = new_figure()
    for method in METHODS:
        _mean_band(ax, summary[(summary.system == model) & (summary.method == method)], col, LABELS[method])
    if diagonal:
        a = np.sort(summary.alpha.unique())
        ax.plot(a, a, "k--", lw=1, label="y = α")
    ax.set(xlabel="α (prescribed risk level)", ylabel=ylabel, title=f"{model}: mean over seeds (band: min–max)")
    ax.legend(fontsize=7)
    save(fig, path)


def plot_routing(summary: pd.DataFrame, p, path) -> None:
    fig, axes = new_figure(ncols=2)
    pa, pb = p["routing"]["primary"], p["routing"]["secondary"]
    systems = [("routing_joint", "routing_joint"), ("routing_naive", "routing_naive"),
               (pa, f"LEC on {pa} alone"), (pb, f"LEC on {pb} alone")]
    for system, label in systems:
        d = summary[(summary.system == system) & (summary.method == "lec")]
        _mean_band(axes[0], d, "risk", LABELS.get(label, label))
        _mean_band(axes[1], d, "retention", LABELS.get(label, label))
    a = np.sort(summary.alpha.unique())
    axes[0].plot(a, a, "k--", lw=1, label="y = α")
    axes[0].set(xlabel="α", ylabel="system risk among answered", title="two-model routing: risk")
    axes[1].set(xlabel="α", ylabel="share answered", title="two-model routing: retention")
    axes[0].legend(fontsize=7)
    save(fig, path)


def plot_synthetic(synth: pd.DataFrame, path) -> None:
    laws, sizes = sorted(synth.law.unique()), sorted(synth.n_cal.unique())
    fig, axes = new_grid(len(laws), len(sizes))
    a = np.sort(synth.alpha.unique())
    for i, law in enumerate(laws):
        for ax, n_cal in zip(axes[i], sizes):
            for name, label in (("lec", "LEC (margin from config)"), ("lec_tight", "LEC (margin 1 − α)"),
                                ("lec_nomargin", "no margin (control)")):
                _mean_band(ax, synth[(synth.method == name) & (synth.law == law) & (synth.n_cal == n_cal)],
                           "risk", label)
            ax.plot(a, a, "k--", lw=1, label="y = α")
            ax.set(xlabel="α", ylabel="exact risk among accepted", title=f"law {law}, n_cal = {n_cal}")
    axes[0][0].legend(fontsize=6)
    save(fig, path)


def run(job) -> None:
    p = job.params
    summary = read_parquet(job.input.summary)
    primary = p["routing"]["primary"]
    plot_methods(summary, primary, "risk", job.output.risk, "test risk among accepted", diagonal=True)
    plot_methods(summary, primary, "retention", job.output.retention, "retention (share accepted)", diagonal=False)
    plot_routing(summary, p, job.output.routing)
    plot_synthetic(read_parquet(job.input.synthetic), job.output.synthetic)
