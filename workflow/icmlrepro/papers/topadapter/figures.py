"""TopAdapter figures: accuracy vs trainable parameters per arm (the paper's efficiency plot) and the ablation
bars (TopAdapter, each module removed, the noise control), every seed shown."""

from __future__ import annotations

import numpy as np

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_json, read_parquet
from icmlrepro.core.tuning import at_grid_edge

from .evaluate import LABELS
from .train import BASELINES, TOPADAPTER_ARMS

ABLATIONS = [a for a in TOPADAPTER_ARMS]


def lr_note(a, grid) -> str:
    """The learning rates an arm picked, per seed, with * on a pick at the edge of the grid."""
    return "lr " + ",".join(f"{lr:.0e}" + ("*" if at_grid_edge(lr, grid) else "") for lr in a.sort_values("seed")["lr"])


def plot_efficiency(ch, path) -> None:
    fig, (ax,) = new_figure(width=6.4, height=4.2)
    for arm in [a for a in (*BASELINES, "topadapter") if a in set(ch["arm"])]:
        a = ch[ch["arm"] == arm]
        x = a["trainable"].to_numpy(float)
        pts = ax.scatter(x, a["test_acc"], s=10, alpha=0.4)
        ax.errorbar(x.mean(), a["test_acc"].mean(), yerr=a["test_acc"].std(ddof=0), fmt="o", ms=6,
                    color=pts.get_facecolor()[0], capsize=2, label=f"{LABELS[arm]} ({lr_note(a, ch.attrs['grid'])})")
    ax.axhline(ch.attrs.get("chance", np.nan), ls=":", c="grey", lw=1, label="chance")
    ax.set(xscale="log", xlabel="trainable parameters (log)", ylabel="downstream test accuracy",
           title="accuracy vs trainable parameters (dots: seeds; marker: mean +- sd)")
    ax.legend(fontsize=6, loc="lower right", title="lr picked per seed, * = grid edge", title_fontsize=6)
    save(fig, path)


def plot_ablation(ch, path) -> None:
    arms = [a for a in ABLATIONS if a in set(ch["arm"])]
    fig, (ax,) = new_figure(width=6.4, height=3.6)
    for i, arm in enumerate(arms):
        v = ch[ch["arm"] == arm].sort_values("seed")["test_acc"].to_numpy()
        ax.bar(i, v.mean(), 0.7, color="C3" if arm == "noise_topology" else ("C0" if arm == "topadapter" else "C7"))
        ax.scatter(np.full(len(v), i) + np.linspace(-0.15, 0.15, len(v)), v, s=8, c="k", zorder=3)
    ax.set_xticks(range(len(arms)), [LABELS[a].replace("TopAdapter", "TA").replace(" (control)", "")
                                     + "\n" + lr_note(ch[ch["arm"] == a], ch.attrs["grid"]) for a in arms],
                  rotation=25, ha="right", fontsize=6)
    lo = ch[ch["arm"].isin(arms)]["test_acc"].min()
    ax.set(ylabel="downstream test accuracy", ylim=(max(0.0, lo - 0.1), None),
           title="TopAdapter ablations (bar: mean, dots: seeds; red: noise control)")
    save(fig, path)


def run(job) -> None:
    table = read_parquet(job.input.table)
    ch = table[table["chosen"]].copy()
    ch.attrs["chance"] = 1.0 / len(read_json(job.input.summary)["downstream"]["classes"])
    ch.attrs["grid"] = sorted(table["lr"].unique().tolist())  # every rate tried (the same grid for every arm)
    plot_efficiency(ch, job.output.efficiency)
    plot_ablation(ch, job.output.ablation)
