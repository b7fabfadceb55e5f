"""event2vec figures: accuracy vs events per stream, accuracy vs resolution, speed and size side by side."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import NullFormatter

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_parquet

from .simulator import CLASSES

LABELS = {"event2vec": "event2vec", "event2vec_shuffled_t": "event2vec, shuffled timestamps (control)",
          "frame_cnn": "frame-histogram CNN", "voxel_cnn": "voxel-grid CNN", "point_set": "point set (PointNet)"}


def _sweep(acc, sweep: str, x: str, xlabel: str, path, log_x: bool) -> None:
    fig, axes = new_figure()
    ax = axes[0]
    sub = acc[acc["sweep"] == sweep]
    for arm in [a for a in LABELS if a in set(sub["arm"])]:
        st = sub[sub["arm"] == arm].groupby(x)["acc"].agg(["mean", "min", "max"])
        line, = ax.plot(st.index, st["mean"], marker="o", ms=3, label=LABELS[arm])
        ax.fill_between(st.index, st["min"], st["max"], color=line.get_color(), alpha=0.15, lw=0)
    ax.axhline(1 / len(CLASSES), color="grey", ls=":", lw=1, label="chance")
    if log_x:
        ax.set_xscale("log", base=2)
    ax.set(xlabel=xlabel, ylabel="test accuracy (mean, band = seeds' range)", ylim=(0, 1.02))
    ax.legend(fontsize=6)
    save(fig, path)


def plot_speed(speed, path) -> None:
    fig, axes = new_figure(ncols=2)
    arms = [a for a in LABELS if a in set(speed["arm"])]
    st = speed.groupby("arm")[["throughput", "latency_ms"]].median().loc[arms]
    y = np.arange(len(arms))
    for ax, col, label in zip(axes, ("throughput", "latency_ms"), ("streams/s, batched", "ms per stream, batch 1")):
        ax.barh(y, st[col])
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # minor tick labels of a narrow log axis overlap
        for yi, v in zip(y, st[col]):
            ax.annotate(f"{v:.3g}", (v, yi), xytext=(2, 0), textcoords="offset points", va="center", fontsize=6)
        ax.set_yticks(y, [LABELS[a] for a in arms], fontsize=6)
        ax.set(xlabel=label + ", median of seeds")
    device = speed["device"].iloc[0] if "device" in speed else "cpu"
    axes[0].set_title(f"end to end, raw events to logits, on {device}", fontsize=7)
    save(fig, path)


def run(job) -> None:
    acc, speed = read_parquet(job.input.accuracy), read_parquet(job.input.speed)
    _sweep(acc, "events", "budget", "events per stream (random subsample)", job.output.events, log_x=True)
    _sweep(acc, "resolution", "resolution", "sensor resolution (pixels per side)", job.output.resolution, log_x=True)
    plot_speed(speed, job.output.speed)
