"""B-Spar figures: before/after images per arm, training curves, ablation bars."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, new_grid, save
from icmlrepro.core.io import read_npz, read_parquet

LABELS = {"identity": "no edit (trivial)", "prompt": "prompt recipe", "aigc": "AIGC-style global",
          "sparse": "PG, sparse bits", "dense": "PG, dense proxy", "bspar": "B-Spar",
          "bspar_no_prior": "B-Spar - prior", "bspar_no_bayes": "B-Spar - Bayes RM",
          "bspar_no_anchor": "B-Spar - anchor", "oracle": "oracle (ceiling)"}


def _order(arms) -> list[str]:
    return [a for a in LABELS if a in set(arms)]


def plot_examples(ex: dict, path) -> None:
    """Rows: test images; columns: source, each arm's result (first seed), hidden target."""
    cols = ["source", *[a for a in _order(ex) if a != "identity"], "target"]
    n = len(ex["source"])
    fig, axes = new_grid(n, len(cols), width=1.1, height=1.15)
    for i in range(n):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            ax.imshow(np.clip(ex[c][i].transpose(1, 2, 0), 0, 1), interpolation="nearest")
            ax.set_xticks([]), ax.set_yticks([])
            if i == 0:
                ax.set_title(LABELS.get(c, c), fontsize=5)
    save(fig, path)


def plot_curves(curves: pd.DataFrame, path) -> None:
    """Validation success (greedy) and training accept rate over iterations: mean over seeds, band min-max."""
    fig, axes = new_figure(ncols=2, width=4.6)
    for arm in _order(curves["arm"]):
        c = curves[curves["arm"] == arm]
        v = c.dropna(subset=["val_success"]).groupby("iteration")["val_success"].agg(["mean", "min", "max"])
        line, = axes[0].plot(v.index, v["mean"], label=LABELS[arm])
        axes[0].fill_between(v.index, v["min"], v["max"], color=line.get_color(), alpha=0.15, lw=0)
        w = max(1, int(c["iteration"].max()) // 15)
        a = c.groupby("iteration")["accept_rate"].mean().rolling(w, min_periods=1).mean()
        axes[1].plot(a.index, a.values, color=line.get_color(), label=LABELS[arm])
    axes[0].set(xlabel="iteration", ylabel="validation success (greedy)", title="held-out crops, train photos")
    axes[1].set(xlabel="iteration", ylabel="judge accept rate of rollouts", title="sparse feedback received (smoothed)")
    axes[0].legend(fontsize=6)
    save(fig, path)


def plot_bars(per_image: pd.DataFrame, path) -> None:
    """Per arm: success rate, and the share of test images its whole edit sequence leaves within the JND of the
    source (an unedited image counts; bars: mean over seeds, dots: seeds)."""
    arms = _order(per_image["arm"])
    fig, axes = new_figure(ncols=2, width=5.0)
    per_seed = per_image.groupby(["arm", "seed"]).agg(success=("success", "mean"), negligible=("negligible", "mean"))
    for ax, col, label in ((axes[0], "success", "success rate (test photos)"),
                           (axes[1], "negligible", "share left within the JND")):
        for i, arm in enumerate(arms):
            v = per_seed.loc[arm, col]
            ax.bar(i, v.mean(), color="C0" if arm.startswith("bspar") else "C7")
            ax.scatter(np.full(len(v), i), v, s=6, color="k", zorder=3)
        ax.set_xticks(range(len(arms)), [LABELS[a] for a in arms], rotation=60, ha="right", fontsize=6)
        ax.set(ylabel=label)
    save(fig, path)


def run(job) -> None:
    ex = read_npz(job.input.examples)
    plot_examples(ex, job.output.examples)
    plot_curves(read_parquet(job.input.curves), job.output.curves)
    plot_bars(read_parquet(job.input.per_image), job.output.bars)
