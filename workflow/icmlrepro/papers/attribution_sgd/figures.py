"""Figures: robustness vs SGD noise scale per workload and method, sharpness vs input curvature,
softmax vs kernel attention, and the headline workload's arms (controls, regulariser, cost)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

from icmlrepro.core.figures import new_figure, new_grid, save
from icmlrepro.core.io import read_parquet


def plot_noise(s: pd.DataFrame, path) -> None:
    d = s[(s.perturbation == "attack") & ~s.role.str.startswith(("shuffled", "gd_reg"))]
    work = sorted(d.groupby(["dataset", "model"]).groups)
    ncols = min(4, len(work))
    fig, axes = new_grid((len(work) + ncols - 1) // ncols, ncols)
    for ax, (ds, m) in zip(axes.flat, work):
        w = d[(d.dataset == ds) & (d.model == m)]
        for meth, g in w.groupby("method"):
            mean = g.groupby("noise_scale")["topk"].mean()
            line, = ax.plot(mean.index, mean.values, marker="o", ms=3, label=meth)
            ax.scatter(g.noise_scale, g.topk, s=6, color=line.get_color(), alpha=0.4)
        ax.set(xscale="log", xlabel="SGD noise scale lr / B (leftmost: full-batch GD)",
               ylabel="top-k intersection under attack", title=f"{ds}, {m}")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=6)
    for ax in axes.flat[len(work):]:
        ax.axis("off")
    save(fig, path)


def plot_curvature(s: pd.DataFrame, path) -> None:
    a = s[~s.role.str.startswith(("shuffled", "gd_reg"))].drop_duplicates(["dataset", "model", "arm", "seed"])
    fig, (ax,) = new_figure(width=5.0)
    for (ds, m), g in a.groupby(["dataset", "model"]):
        ax.scatter(g.sharpness, g.input_curvature, s=10 + 400 * g.noise_scale.clip(upper=0.1), label=f"{ds}, {m}",
                   alpha=0.7)
    ax.set(xscale="log", yscale="log", xlabel="sharpness: top Hessian eigenvalue (parameters)",
           ylabel="input-Hessian Frobenius norm", title="one point per arm and seed (size: noise scale)")
    ax.legend(fontsize=6)
    save(fig, path)


def plot_attention(s: pd.DataFrame, path) -> None:
    d = s[s.model.str.startswith("vit") & s.role.isin(["sgd_high", "gd"])]
    fig, axes = new_figure(ncols=2)
    for ax, pert in zip(axes, ("attack", "noise")):
        x = 0
        for (ds, m), g in d[d.perturbation == pert].groupby(["dataset", "model"]):
            for meth, color in (("saliency", "C0"), ("rollout", "C3")):
                w = g[g.method == meth].pivot_table(index="seed", columns="role", values="topk")
                gain = (w["sgd_high"] - w["gd"]).to_numpy()
                ax.bar(x, gain.mean(), color=color, alpha=0.6, label=meth if x < 2 else None)
                ax.scatter(np.full(len(gain), x), gain, color="k", s=8)
                ax.text(x, 0, f"{ds}\n{m.split('_')[1]}", fontsize=6, ha="center", va="top")
                x += 1
            x += 0.5
        ax.axhline(0, color="k", lw=0.8)
        ax.set(xticks=[], ylabel="top-k gain: high-noise SGD − GD", title=f"attention vs gradient attribution ({pert})")
        ax.legend(fontsize=7)
    save(fig, path)


def plot_headline(s: pd.DataFrame, p, path) -> None:
    hd, hm = p["headline"]["dataset"], p["headline"]["model"]
    d = s[(s.dataset == hd) & (s.model == hm) & (s.perturbation == "attack") & (s.method == "saliency")]
    order = list(dict.fromkeys(d.sort_values("noise_scale", ascending=False).role))
    fig, axes = new_figure(ncols=2, width=5.0)
    for ax, col, label in ((axes[0], "topk", "top-k intersection under attack (saliency)"),
                           (axes[1], "train_seconds", "training wall time (s)")):
        for i, role in enumerate(order):
            vals = d[d.role == role][col].to_numpy()
            ax.bar(i, vals.mean(), color="C1" if role.startswith("shuffled") else "C2" if "reg" in role else "C0",
                   alpha=0.6)
            ax.scatter(np.full(len(vals), i), vals, color="k", s=8)
        ax.set_xticks(range(len(order)), order, rotation=60, fontsize=6)
        ax.set(ylabel=label, title=f"{hd}, {hm}: every arm (points: seeds)")
    save(fig, path)


def run(job) -> None:
    s = read_parquet(job.input.summary)
    plot_noise(s, job.output.noise)
    plot_curvature(s, job.output.curvature)
    plot_attention(s, job.output.attention)
    plot_headline(s, job.params, job.output.headline)
