"""ML-Embed figures: quality along each Matryoshka axis, the quality-cost frontier, language-group bars."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_parquet

from .evaluate import RANDOM

LABELS = {"plain": "full-size, truncated (baseline)", "mrl": "MRL", "mrl_mll": "MRL+MLL", "3dml": "3D-ML",
          "3dml_highres": "3D-ML, high-resource langs only", RANDOM: "untrained encoder (floor)"}


def _arms(grid: pd.DataFrame) -> list[str]:
    return [a for a in LABELS if a in set(grid["arm"])]


def plot_axes(grid: pd.DataFrame, s: dict, path) -> None:
    """Recall@1 along each axis with the other two at full size: mean over seeds, band min-max."""
    full = {"rank": max(s["ranks"]), "layer": s["layers"], "dim": s["d"]}
    fig, axes = new_figure(ncols=3)
    g = grid[grid["group"] == "all"]
    for ax, axis in zip(axes, ("dim", "layer", "rank")):
        others = [k for k in full if k != axis]
        sub = g[(g[others[0]] == full[others[0]]) & (g[others[1]] == full[others[1]])]
        for arm in _arms(grid):
            st = sub[sub["arm"] == arm].groupby(axis)["r1"].agg(["mean", "min", "max"])
            line, = ax.plot(st.index, st["mean"], marker="o", ms=3, label=LABELS[arm])
            ax.fill_between(st.index, st["min"], st["max"], color=line.get_color(), alpha=0.15, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(sub[axis].unique()), [str(v) for v in sorted(sub[axis].unique())])
        ax.set(xlabel={"dim": "output dim d'", "layer": "exit layer l", "rank": "embedding rank r'"}[axis],
               ylabel="recall@1 (all eval languages)", title=f"cut along {axis}")
    axes[0].legend(fontsize=6)
    save(fig, path)


def pareto(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points not beaten by a cheaper-or-equal point of higher quality, in ascending cost."""
    order = np.lexsort((-y, x))
    xs, ys, best = [], [], -np.inf
    for i in order:
        if y[i] > best:
            xs.append(x[i]); ys.append(y[i]); best = y[i]
    return np.array(xs), np.array(ys)


def plot_frontier(grid: pd.DataFrame, path) -> None:
    """Every sub-model (rank x layer x dim) as parameters x bytes per vector cost vs recall@1: Pareto front per arm."""
    g = grid[grid["group"] == "all"].groupby(["arm", "rank", "layer", "dim"], as_index=False)[["r1", "params", "bytes_per_vector"]].mean()
    fig, axes = new_figure(ncols=2)
    for ax, cost, label in ((axes[0], "params", "parameters of the sub-model"), (axes[1], "bytes_per_vector", "bytes per stored vector")):
        for arm in _arms(grid):
            a = g[g["arm"] == arm]
            xs, ys = pareto(a[cost].to_numpy(float), a["r1"].to_numpy(float))
            line, = ax.step(xs, ys, where="post", label=LABELS[arm])
            ax.scatter(a[cost], a["r1"], s=4, color=line.get_color(), alpha=0.3)
        ax.set(xscale="log", xlabel=label, ylabel="recall@1 (mean over seeds)", title="quality-cost frontier")
    axes[0].legend(fontsize=6)
    save(fig, path)


def plot_groups(grid: pd.DataFrame, s: dict, path) -> None:
    g = grid[(grid["rank"] == max(s["ranks"])) & (grid["layer"] == s["layers"]) & (grid["dim"] == s["d"])]
    groups, arms = ["high", "low"], _arms(grid)
    fig, (ax,) = new_figure(width=6.0)
    w = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        st = g[g["arm"] == arm].groupby("group")["r1"]
        m, lo, hi = st.mean()[groups], st.min()[groups], st.max()[groups]
        x = np.arange(len(groups)) + i * w
        ax.bar(x, m, w, label=LABELS[arm], yerr=[m - lo, hi - m], capsize=2)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - w / 2, ["high-resource", "low-resource"])
    ax.set(ylabel="recall@1, full-size model", title="per language group (bar: mean, whisker: min-max over seeds)")
    ax.legend(fontsize=6)
    save(fig, path)


def run(job) -> None:
    s, grid = job.params, read_parquet(job.input.grid)
    plot_axes(grid, s, job.output.axes)
    plot_frontier(grid, job.output.frontier)
    plot_groups(grid, s, job.output.groups)
