"""On-Policy SFT figures: out-of-domain vs in-domain accuracy per arm, phi per corpus with the
phi -> generalization link, and wall-clock cost per arm (every seed shown)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet

from .arms import CORPORA
from .evaluate import SFT_ON

LABELS = {"base": "base model (no fine-tuning)", "sft": "SFT", "dft": "DFT", "idft": "IDFT",
          "self_sft": "SFT on own correct samples", "gt_matched_sft": "SFT on their ground truth",
          "hint_sft": "SFT on hinted decoding", "hint0_sft": "SFT on hinted, beta=0",
          "hint_idft": "IDFT on hinted decoding (ours)", "dpo": "DPO", "simpo": "SimPO"}
RL_LIKE = ("dpo", "simpo")


def plot_accuracy(t: pd.DataFrame, arms, path) -> None:
    from icmlrepro.core.figures import new_figure, save

    fig, (ax,) = new_figure(width=6.0, height=4.6)
    for i, arm in enumerate(["base", *arms]):
        x, y = t[f"id_acc.{arm}"], t[f"ood_acc.{arm}"]
        marker = "s" if arm in RL_LIKE else ("*" if arm == "hint_idft" else "o")
        pts = ax.scatter(x, y, s=14, alpha=0.35, marker=marker, color=f"C{i % 10}")
        ax.scatter([x.mean()], [y.mean()], s=70, marker=marker, color=pts.get_facecolor()[0][:3],
                   edgecolor="k", label=LABELS[arm])
    ax.set(xlabel="in-domain test accuracy", ylabel="out-of-domain accuracy (held-out families)",
           title="generalization vs in-domain fit (big: mean, small: seeds)")
    ax.legend(fontsize=6, loc="best")
    save(fig, path)


def plot_phi(t: pd.DataFrame, path) -> None:
    from icmlrepro.core.figures import new_figure, save

    fig, (a, b) = new_figure(ncols=2, width=4.6)
    for i, c in enumerate(CORPORA):
        v = t[f"phi.{c}"]
        a.bar(i, v.mean(), color=f"C{i}", alpha=0.6)
        a.scatter(np.full(len(v), i), v, s=10, color="k")
    a.axhline(0, color="k", lw=0.6)
    a.set_xticks(range(len(CORPORA)), [c.replace("_", "\n") for c in CORPORA], fontsize=6)
    a.set(ylabel="corpus phi (log p + H, nats/token)", title="DDT: alignment of each corpus")
    for i, (c, arm) in enumerate(SFT_ON.items()):
        b.scatter(-t[f"abs_phi.{c}"], t[f"ood_acc.{arm}"], s=14, color=f"C{CORPORA.index(c)}",
                  label=c.replace("_", " "))
    b.set(xlabel="-|phi| of the training corpus", ylabel="out-of-domain accuracy after SFT on it",
          title="phi vs generalization (one dot per seed)")
    b.legend(fontsize=6)
    save(fig, path)


def plot_cost(t: pd.DataFrame, arms, path) -> None:
    from icmlrepro.core.figures import new_figure, save

    fig, (ax,) = new_figure(width=6.0)
    for i, arm in enumerate(arms):
        v = t[f"seconds.{arm}"]
        ax.bar(i, v.mean(), color="C3" if arm in RL_LIKE else "C0", alpha=0.6)
        ax.scatter(np.full(len(v), i), v, s=10, color="k")
    ax.set_xticks(range(len(arms)), [LABELS[a].replace(" (ours)", "\n(ours)") for a in arms], rotation=60,
                  fontsize=6, ha="right")
    ax.set(ylabel="CPU s (generation + fine-tuning)", title="cost per arm (red: offline RL)")
    save(fig, path)


def run(job) -> None:
    t = read_parquet(job.input.table)
    arms = job.params["arms"]
    plot_accuracy(t, arms, job.output.accuracy)
    plot_phi(t, job.output.phi)
    plot_cost(t, arms, job.output.cost)
