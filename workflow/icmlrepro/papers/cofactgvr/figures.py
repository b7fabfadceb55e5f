"""CofactGVR figures: scores per arm (every seed shown), training curves, example scenes with evidence boxes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_grid, save
from icmlrepro.core.io import read_parquet

from .arms import LABELS, START
from .data import TASKS, load_split
PANELS = (("acc", "test_id", "accuracy, test_id (cue as in training)"),
          ("acc", "test_broken", "accuracy, test_broken (cue misleads)"),
          ("iou", "test_id", "evidence IoU, test_id"),
          ("shortcut", "test_id", "shortcut rate, test_id (lower is better)"),
          ("mask_drop", "test_id", "faithfulness: accuracy drop, evidence masked"))


def plot_arms(scores: pd.DataFrame, arms: list[str], n_values: int, path) -> None:
    """One panel per score: bar = mean over seeds, dots = seeds; chance line on the accuracy panels."""
    order = [START, *arms]
    fig, axes = new_grid(1, len(PANELS), width=3.0, height=3.6)
    for ax, (score, split, title) in zip(axes[0], PANELS):
        sub = scores[(scores["score"] == score) & (scores["split"] == split)]
        for i, arm in enumerate(order):
            v = sub.loc[sub["arm"] == arm, "value"].to_numpy()
            ax.bar(i, v.mean(), color=f"C{i}", alpha=0.6)
            ax.scatter(np.full(len(v), i), v, s=8, color="k", zorder=3)
        if score == "acc":
            ax.axhline(1.0 / n_values, color="grey", ls=":", lw=1, label="chance")
            ax.legend(fontsize=6)
        ax.set_xticks(range(len(order)), [LABELS[a] for a in order], rotation=60, ha="right", fontsize=6)
        ax.set_title(title, fontsize=7)
    save(fig, path)


def plot_curves(curves: pd.DataFrame, arms: list[str], path) -> None:
    """Training answer accuracy, evidence hit rate and Q-PAS kept share per iteration (mean over seeds,
    rolling mean over 10 iterations; band = min-max over seeds of that rolling mean)."""
    fig, axes = new_grid(1, 3, width=3.6)
    for ax, col, title in zip(axes[0], ("train_acc", "evidence_hit", "kept_fraction"),
                              ("training answer accuracy", "training evidence hit rate", "rollouts kept for updates")):
        for i, arm in enumerate(arms):
            c = curves[curves["arm"] == arm].pivot(index="iteration", columns="seed", values=col)
            c = c.rolling(10, min_periods=1).mean()
            ax.plot(c.index, c.mean(1), color=f"C{i + 1}", label=LABELS[arm], lw=1)
            ax.fill_between(c.index, c.min(1), c.max(1), color=f"C{i + 1}", alpha=0.12, lw=0)
        ax.set(xlabel="GRPO iteration", title=title)
    axes[0][0].legend(fontsize=6)
    save(fig, path)


MARKERS = "osD^vP*X"


def plot_examples(preds: pd.DataFrame, split: dict, arms: list[str], grid: int, path) -> None:
    """Cue-broken test scenes: objects (colour = colour value, marker = shape value, label = pattern value),
    background tint as the panel colour, the target cell in green, each arm's predicted evidence (seed of
    the first replicate) as a box; the title gives the question, the answer and each arm's answer."""
    show = [a for a in ("grpo", "cofactgvr", "grpo_cf") if a in arms][:2]
    p = preds[(preds["split"] == "test_broken") & (preds["seed"] == preds["seed"].min())]
    items = sorted(p["item"].unique())[:4]
    fig, axes = new_grid(1, len(items), width=2.8, height=3.6)
    tasks = list(TASKS)
    for ax, item in zip(axes[0], items):
        ax.set_facecolor((*[0.85 + 0.03 * k for k in range(3)][:2], 0.75 + 0.06 * int(split["tint"][item])))
        for o, cell in enumerate(split["cells"][item]):
            r, c = divmod(int(cell), grid)
            col, shp, pat = split["attrs"][item, o]
            ax.scatter(c, r, s=260, marker=MARKERS[shp % len(MARKERS)], color=f"C{col}", edgecolor="k")
            ax.text(c, r, str(pat), ha="center", va="center", fontsize=7, color="w")
        t = int(split["target_cell"][item])
        ax.add_patch(_box(t, grid, "green", "-", 0.5))
        answers = []
        for j, arm in enumerate(show):
            row = p[(p["arm"] == arm) & (p["item"] == item)].iloc[0]
            if row["evidence"] < grid * grid:
                ax.add_patch(_box(int(row["evidence"]), grid, f"C{arms.index(arm) + 1}", "--", 0.42 - 0.06 * j))
            answers.append(f"{LABELS[arm].split(' (')[0]}: {row['answer']}")
        q_attr, a_attr = TASKS[tasks[split["task"][item]]]
        q_val = int(np.argmax(split["q"][item][len(TASKS):]))
        ax.set_title(f"{a_attr} of the {q_attr}={q_val} object?\nanswer {split['answer'][item]} | tint "
                     f"{split['tint'][item]}\n" + ", ".join(answers), fontsize=6)
        ax.set(xlim=(-0.6, grid - 0.4), ylim=(grid - 0.4, -0.6), xticks=[], yticks=[], aspect="equal")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color="green", label="target object")]
    handles += [Line2D([], [], color=f"C{arms.index(a) + 1}", ls="--", label=f"evidence: {LABELS[a]}") for a in show]
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=len(handles), frameon=False)
    save(fig, path)


def _box(cell: int, grid: int, color, ls, half: float):
    from matplotlib.patches import Rectangle

    r, c = divmod(cell, grid)
    return Rectangle((c - half, r - half), 2 * half, 2 * half, fill=False, edgecolor=color, ls=ls, lw=1.6)


def run(job) -> None:
    s = job.params
    plot_arms(read_parquet(job.input.scores), s["arms"], s["n_values"], job.output.arms)
    plot_curves(read_parquet(job.input.curves), s["arms"], job.output.curves)
    first = min(s["seeds"])  # the examples show the first seed's scenes (each seed draws its own)
    plot_examples(read_parquet(job.input.predictions), load_split(job.input.test_broken, first), s["arms"], s["grid"],
                  job.output.examples)

