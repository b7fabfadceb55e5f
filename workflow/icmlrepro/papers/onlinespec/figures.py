"""Stage ``onlinespec.figures``: acceptance length per chunk around the shifts, speedup per arm, and the
tuning grid (acceptance length per effective step and arm, the chosen step marked, edges named, the
offline draft's acceptance on the tuning stream as a dashed line)."""

from __future__ import annotations

import pandas as pd

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_parquet

from .arms import ARMS, TUNED, read_tuning


def run(job) -> None:
    df = pd.concat([read_parquet(f) for f in job.input.tables], ignore_index=True)
    fig, (ax,) = new_figure(width=6.0)
    per = df.groupby(["arm", "chunk"]).acceptance_length.mean().unstack("arm")
    for arm in ARMS:
        ax.plot(per.index, per[arm], marker="o", markersize=3, label=arm)
    shifts = df.groupby("chunk").family.first()
    for c in shifts.index[1:]:
        if shifts[c] != shifts[c - 1]:
            ax.axvline(c - 0.5, color="grey", lw=0.8, ls=":")
    for c, fam in shifts.items():
        if c == shifts.index[0] or shifts[c] != shifts[c - 1]:
            ax.text(c - 0.4, ax.get_ylim()[1], fam, fontsize=7, va="top")
    ax.set(xlabel="chunk of the prompt stream", ylabel="acceptance length (tokens/round)",
           title=f"greedy speculative decoding, mean over {df.seed.nunique()} seeds")
    ax.legend(fontsize=7, ncols=3)
    save(fig, job.output.acceptance)

    fig, (ax,) = new_figure()
    sp = df.groupby(["seed", "arm"])[["target_seconds", "spec_seconds"]].sum()
    sp = (sp.target_seconds / sp.spec_seconds).unstack("arm")[list(ARMS)]
    ax.boxplot([sp[a].values for a in ARMS], tick_labels=list(ARMS))
    ax.tick_params(axis="x", labelrotation=30)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set(ylabel="speedup over target-only decoding (wall clock)", title="per seed")
    save(fig, job.output.speedup)

    tuning_figure(read_tuning(job.input.tuning), job.output.tuning)


def tuning_figure(tuning: dict, path) -> None:
    grid = pd.DataFrame(tuning["grid"])
    fig, (ax,) = new_figure(width=6.0)
    for arm in TUNED:
        g = grid[grid.arm == arm].sort_values("step")
        where = "interior" if tuning["interior"][arm] else f"EDGE ({tuning['edge'][arm]} step)"
        line, = ax.plot(g.step, g.acceptance_length, marker="o", markersize=3, label=f"{arm}: {where}")
        best = g[g.step == tuning["best_step"][arm]]
        ax.plot(best.step, best.acceptance_length, marker="*", markersize=11, color=line.get_color(), ls="")
    offline = tuning.get("offline_acceptance_length", float("nan"))
    if offline == offline:  # recorded (not NaN): the reference the tuned arms must beat
        ax.axhline(offline, color="black", lw=1.0, ls="--", label="offline draft (no updates)")
    ax.set_xscale("log")
    ax.set(xlabel="effective step lr / (1 - momentum)", ylabel="acceptance length on the tuning stream",
           title=f"tuning (seed {tuning['tuning_seed']}); * = chosen step")
    ax.legend(fontsize=7)
    save(fig, path)
