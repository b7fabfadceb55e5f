"""CCC-GRPO figures: error by shot region per arm, predicted vs true values, the RL training curves, and the
learning-rate grids (validation MAE per rate and arm)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, new_grid, save
from icmlrepro.core.io import read_parquet

from .data import REGIONS
from .evaluate import TRIVIAL

LABELS = {"sft": "token-level SFT", "sft_soft": "soft-label SFT", "sft_balanced": "SFT on balanced targets (control)",
          "pointwise": "GRPO, point-wise reward", "ccc": "GRPO, CCC reward",
          "ccc_solo": "GRPO, CCC without cross-sample terms (control)", TRIVIAL: "training median (trivial)"}


COLORS = {arm: f"C{i}" for i, arm in enumerate(LABELS)}  # one colour per arm in every panel


def _arms(pred: pd.DataFrame) -> list[str]:
    return [a for a in LABELS if a in set(pred["arm"])]


def plot_regions(pred: pd.DataFrame, regions: pd.DataFrame, path) -> None:
    """MAE per shot region and arm (bar: mean over seeds, dots: seeds), and the training histogram by region."""
    fig, (ax, axh) = new_figure(ncols=2)
    groups, arms = ["all", *REGIONS], _arms(pred)
    err = pred.assign(e=(pred["pred"] - pred["y"]).abs())
    per_seed = pd.concat([err.groupby(["arm", "seed"])["e"].mean().rename("all").reset_index().assign(group="all")
                          .rename(columns={"all": "mae"}),
                          err.groupby(["arm", "seed", "region"])["e"].mean().rename("mae").reset_index()
                          .rename(columns={"region": "group"})])
    w = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        a = per_seed[per_seed["arm"] == arm]
        m = a.groupby("group")["mae"].mean().reindex(groups)
        x = np.arange(len(groups)) + i * w
        ax.bar(x, m, w, label=LABELS[arm], color=COLORS[arm], alpha=0.85)
        for j, g in enumerate(groups):
            vals = a.loc[a["group"] == g, "mae"]
            ax.scatter(np.full(len(vals), x[j]), vals, s=5, color="k", zorder=3)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - w / 2, [f"{g}-shot" if g != "all" else "all" for g in groups])
    ax.set(ylabel="test MAE (balanced test set)", title="error by shot region (dots: seeds)")
    ax.legend(fontsize=6)
    from matplotlib.patches import Patch

    shades = {"many": "0.25", "medium": "0.55", "few": "0.8"}
    if "seed" in regions:   # every seed draws its own training set: show the first seed's
        regions = regions[regions["seed"] == regions["seed"].min()]
    axh.bar(regions["y"], regions["train_count"], color=[shades[r] for r in regions["region"]], width=1.0)
    axh.set(xlabel="target value", ylabel="training images", title="long-tailed training targets (first seed)")
    axh.legend(handles=[Patch(color=c, label=f"{r}-shot") for r, c in shades.items()], fontsize=7)
    save(fig, path)


def plot_scatter(pred: pd.DataFrame, path) -> None:
    """Predicted vs true value per arm (all seeds; mean prediction per target as a line, identity dashed)."""
    arms = [a for a in _arms(pred) if a != TRIVIAL]
    fig, axes = new_grid(1, len(arms), width=3.0, height=3.0)
    lim = [pred["y"].min() - 1, pred["y"].max() + 1]
    for ax, arm in zip(axes[0], arms):
        a = pred[pred["arm"] == arm]
        jitter = np.random.default_rng(0).uniform(-0.3, 0.3, len(a))
        ax.scatter(a["y"] + jitter, a["pred"], s=2, alpha=0.15, color=COLORS[arm])
        mean = a.groupby("y")["pred"].mean()
        ax.plot(mean.index, mean.values, color="k", lw=1, label="mean prediction")
        ax.plot(lim, lim, "--", color="grey", lw=1, label="identity")
        ax.set(xlim=lim, ylim=lim, xlabel="true value", title=LABELS[arm])
        ax.title.set_fontsize(7)
    axes[0][0].set_ylabel("predicted value (greedy)")
    axes[0][0].legend(fontsize=6)
    save(fig, path)


def plot_rl_curves(log: pd.DataFrame, path) -> None:
    """Per RL arm, over GRPO steps (mean over seeds): mean absolute error and spread (std) of the sampled
    answers, and the KL to the SFT model."""
    fig, axes = new_figure(ncols=3)
    for arm in [a for a in LABELS if a in set(log["arm"])]:
        a = log[log["arm"] == arm].groupby("step")[["abs_error", "answer_std", "kl"]].mean()
        for ax, col in zip(axes, ("abs_error", "answer_std", "kl")):
            ax.plot(a.index, a[col], label=LABELS[arm], color=COLORS[arm])
    for ax, t in zip(axes, ("|answer - target| of rollouts", "std of rollout answers", "KL to SFT (k3)")):
        ax.set(xlabel="GRPO step", title=t)
    axes[0].legend(fontsize=6)
    save(fig, path)


def plot_lr_grid(tuning: pd.DataFrame, path) -> None:
    """Validation MAE over each arm's learning-rate grid (first seed), SFT and GRPO stages side by side; the
    chosen rate is ringed (a ring at a line's end = the optimum sits at the grid's edge)."""
    fig, axes = new_figure(ncols=2)
    for ax, (stage, title) in zip(axes, (("sft", "SFT arms"), ("rl", "GRPO arms (KL weight fixed)"))):
        for arm, a in tuning[tuning["stage"] == stage].groupby("arm", sort=False):
            ax.plot(a["lr"], a["val_mae"], "o-", color=COLORS[arm], label=LABELS[arm], ms=3)
            c = a[a["chosen"]]
            ax.scatter(c["lr"], c["val_mae"], s=80, facecolors="none", edgecolors=COLORS[arm], zorder=3)
        ax.set(xscale="log", xlabel="learning rate", ylabel="validation MAE (first seed)", title=title)
        grid = sorted(set(tuning.loc[tuning["stage"] == stage, "lr"]))
        ax.set_xticks(grid, [f"{v:g}" for v in grid], minor=False)
        ax.set_xticks([], minor=True)
        ax.legend(fontsize=6)
    save(fig, path)


def run(job) -> None:
    pred = read_parquet(job.input.predictions)
    plot_regions(pred, read_parquet(job.input.regions), job.output.regions)
    plot_scatter(pred, job.output.scatter)
    plot_rl_curves(read_parquet(job.input.rl_log), job.output.curves)
    plot_lr_grid(read_parquet(job.input.tuning), job.output.lr_grid)
