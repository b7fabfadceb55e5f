"""EMBGuard figures: per-split potential-risk accuracy and false-positive rate per model; example test scenes
with the action and the verdicts of the guard, the learned salience stand-in and the observation-only classifier."""

from __future__ import annotations

import textwrap

import numpy as np

from icmlrepro.core.figures import new_grid, save
from icmlrepro.core.io import read_npz, read_parquet

from .data import BENIGN, SPLITS

LABELS = {"chance": "chance (coin flip)", "salience_oracle": "salience rule (perfect perception)",
          "salience": "learned hazard salience (over-cautious stand-in)", "guard_confounded": "guard, confounded safe pairs",
          "observation_only": "observation only", "guard": "EMBGuard-style guard",
          "guard_no_removal": "guard w/o hazard removal", "guard_no_action_aug": "guard w/o action aug.",
          "guard_shuffled": "guard, shuffled actions"}


def plot_splits(scores, path) -> None:
    """Bars: mean over seeds; whiskers: min-max over seeds."""
    arms = [a for a in LABELS if a in set(scores["arm"])]
    fig, axes = new_grid(1, 2, width=5.6, height=3.6)
    w = 0.8 / len(arms)
    for ax, (col, groups, ylabel) in zip(axes[0], (("risk_acc", SPLITS, "potential-risk accuracy"),
                                                   ("flag_rate", (*BENIGN, "benign"), "false-positive rate"))):
        for i, arm in enumerate(arms):
            st = scores[scores["arm"] == arm].groupby("group")[col]
            m, lo, hi = (st.agg(f)[list(groups)] for f in ("mean", "min", "max"))
            ax.bar(np.arange(len(groups)) + i * w, m, w, yerr=[m - lo, hi - m], capsize=1.5, label=LABELS[arm])
        ax.set_xticks(np.arange(len(groups)) + 0.4 - w / 2, [g.replace("_", "\n") for g in groups], fontsize=7)
        ax.set(ylabel=ylabel, ylim=(0, 1.05))
    axes[0][0].set_title("accuracy per test split (mean, min-max over seeds)", fontsize=9)
    axes[0][1].set_title("benign pairs flagged unsafe", fontsize=9)
    axes[0][1].legend(fontsize=6)
    save(fig, path)


def plot_examples(ex, images: np.ndarray, path) -> None:
    n = len(ex)
    ncols = 4
    fig, axes = new_grid((n + ncols - 1) // ncols, ncols, width=3.0, height=3.5)
    for ax in axes.flat:
        ax.axis("off")
    for ax, r in zip(axes.flat, ex.itertuples(index=False)):
        ax.imshow(images[r.image].transpose(1, 2, 0), interpolation="nearest")
        verdict = lambda u: "UNSAFE" if u else "safe"  # noqa: E731
        lines = [f"[{r.split}] truth: {verdict(r.unsafe)}", textwrap.fill(f"action: {r.action}", 40),
                 f"guard: {verdict(r.guard_unsafe)}"
                 + (f" | salience: {verdict(r.salience_unsafe)}" if hasattr(r, "salience_unsafe") else "")
                 + (f" | obs-only: {verdict(r.observation_only_unsafe)}" if hasattr(r, "observation_only_unsafe") else ""),
                 textwrap.fill(r.guard_explanation, 46)]
        ax.set_title("\n".join(lines), fontsize=5.5, loc="left")
    save(fig, path)


def run(job) -> None:
    plot_splits(read_parquet(job.input.scores), job.output.splits)
    plot_examples(read_parquet(job.input.examples), read_npz(job.input.images)["images"], job.output.examples)
