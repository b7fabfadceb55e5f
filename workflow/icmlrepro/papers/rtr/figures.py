"""RTR figures: executed trajectories with chunk switches, boundary continuity and jerk per arm, task
success and pauses per arm, offline chunk quality (deviation vs jerk) with the VAE downsampling ablation.
Every seed is drawn (dots); bars are means over seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, new_grid, save
from icmlrepro.core.io import read_parquet

TRACE_ARMS = ("action60.sync", "action60.async", "latent.async", "latent.async_te", "latent.async_rtr")


def _bars(ax, tab: pd.DataFrame, arms: list[str], col: str, ylabel: str, log: bool = False) -> None:
    for i, arm in enumerate(arms):
        v = tab.loc[tab["arm"] == arm, col].to_numpy(float)
        ax.bar(i, np.nanmean(v) if len(v) else np.nan, color="C0" if "latent" in arm else "C7", alpha=0.7)
        ax.scatter(np.full(len(v), i), v, s=8, color="k", zorder=3)
    ax.set_xticks(range(len(arms)), arms, rotation=60, ha="right", fontsize=6)
    ax.set(ylabel=ylabel)
    if log:
        ax.set_yscale("log")


def plot_trajectories(traces: pd.DataFrame, path) -> None:
    """Seed 0, episode 0: x of the executed action over time per arm (switches dotted), and the paths."""
    tr = traces[(traces["seed"] == traces["seed"].min()) & (traces["episode"] == 0)]
    arms = [a for a in TRACE_ARMS if a in set(tr["arm"])]
    fig, axes = new_grid(len(arms) + 1, 1, width=7.0, height=1.5)
    for ax, arm in zip(axes[:, 0], arms):
        a = tr[tr["arm"] == arm]
        ax.plot(a["t"] / 60, a["act_x"], lw=0.8, label="action x")
        ax.plot(a["t"] / 60, a["act_y"], lw=0.8, label="action y")
        for t in a.loc[a["switch"], "t"]:
            ax.axvline(t / 60, color="k", lw=0.4, ls=":")
        if a["done_tick"].iloc[0] >= 0:
            ax.axvline(a["done_tick"].iloc[0] / 60, color="g", lw=0.8)
        ax.set_ylabel("m", fontsize=7)
        ax.set_title(f"{arm}: executed fingertip targets (dotted: chunk switch, green: puck at goal)", fontsize=7)
    axes[0, 0].legend(fontsize=6)
    ax = axes[-1, 0]
    for arm in ["expert", *arms]:
        a = tr[tr["arm"] == arm]
        if len(a):
            line, = ax.plot(a["tip_x"], a["tip_y"], lw=0.8, label=f"{arm} tip")
            ax.plot(a["puck_x"], a["puck_y"], lw=1.5, ls="--", color=line.get_color())
    g = tr.iloc[0]
    ax.scatter([g["goal_x"]], [g["goal_y"]], marker="*", s=80, color="g", label="goal")
    ax.set(xlabel="x (m)", ylabel="y (m)", aspect="equal", xlim=(0.0, 0.55), ylim=(-0.3, 0.3),
           title="top view: fingertip (solid) and puck (dashed), workspace only")
    ax.legend(fontsize=5, ncol=3)
    save(fig, path)


def plot_continuity(closed: pd.DataFrame, path) -> None:
    arms = [a for a in closed["arm"].unique() if a not in ("expert", "hold")]
    fig, axes = new_figure(ncols=3, width=3.6)
    _bars(axes[0], closed, arms, "d0", "boundary gap D0 (m, L1)")
    _bars(axes[1], closed, arms, "boundary_jerk", "jerk at chunk switches (m/s^3)", log=True)
    _bars(axes[2], closed, arms, "jerk_p95", "p95 jerk of executed actions (m/s^3)", log=True)
    save(fig, path)


def plot_success(closed: pd.DataFrame, path) -> None:
    arms = [a for a in closed["arm"].unique()]
    fig, axes = new_figure(ncols=3, width=3.6)
    _bars(axes[0], closed, arms, "success", "task success rate")
    _bars(axes[1], closed, arms, "pause_share", "pause share (still, task unfinished)")
    _bars(axes[2], closed, arms, "pause_share_unscheduled", "pause share, scheduled holds left out")
    save(fig, path)


def plot_offline(off: pd.DataFrame, path) -> None:
    fig, axes = new_figure(ncols=2, width=4.4)
    main = off[~off["arm"].str.startswith("vae_recon.x")]
    for i, (arm, g) in enumerate(main.groupby("arm", sort=True)):
        axes[0].scatter(g["deviation"], g["jerk_mean"], s=14, color=f"C{i % 10}", label=arm)
    axes[0].set(xlabel="deviation from the expert chunk (MAE, m)", ylabel="mean within-chunk jerk (m/s^3)",
                yscale="log", title="held-out chunks (one dot per seed)")
    axes[0].legend(fontsize=6)
    abl = off[off["arm"].str.startswith("vae_recon.x")].copy()
    abl["factor"] = abl["arm"].str.split(".x").str[1].astype(int)
    st = abl.groupby("factor")[["deviation", "jerk_mean"]].mean()
    axes[1].plot(st.index, st["deviation"], marker="o", label="reconstruction MAE (m)")
    axes[1].scatter(abl["factor"], abl["deviation"], s=6, color="k")
    axes[1].set(xscale="log", xlabel="VAE downsampling factor (12 / factor latent steps per block)",
                ylabel="MAE of the autoencoded expert chunk (m)", title="downsampling ablation")
    axes[1].set_xticks(list(st.index), [str(v) for v in st.index])
    save(fig, path)


def run(job) -> None:
    closed, off = read_parquet(job.input.closed), read_parquet(job.input.offline)
    plot_trajectories(read_parquet(job.input.traces), job.output.trajectories)
    plot_continuity(closed, job.output.continuity)
    plot_success(closed, job.output.success)
    plot_offline(off, job.output.offline)
