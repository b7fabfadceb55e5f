"""Stage ``timesx.figures``: the method ranking on the benchmarks (with the trivial reference and the
text controls), the rank transfer, and one real window with its forecasts."""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.figures import new_figure, save
from icmlrepro.core.io import read_parquet

from .methods import RANKED

SHOWN = RANKED + ("naive", "textnet_notext", "avgens_notext", "avgens_shuffled")  # + reference and controls
from .scoring import average_rank, geometric_mean


def _per_seed(scores: pd.DataFrame, bench: str, fn, methods=RANKED) -> pd.DataFrame:
    """One row per seed, one column per method, of ``fn`` applied to the series x method table."""
    out = {}
    for seed, g in scores[scores["benchmark"] == bench].groupby("seed"):
        table = g.pivot_table(index="series", columns="method", values="scaled_mase")[list(methods)]
        out[seed] = fn(table)
    return pd.DataFrame(out).T


def run(job) -> None:
    scores = read_parquet(job.input.scores)
    benches = (("synthetic", "tab:orange"), ("synthetic_redraw", "tab:olive"), ("real", "tab:blue"))
    gms = {b: _per_seed(scores, b, lambda t: t.apply(geometric_mean), SHOWN) for b, _ in benches}
    ranks = {b: _per_seed(scores, b, average_rank) for b in ("synthetic", "real")}

    fig, (ax,) = new_figure(width=8.0)
    x = np.arange(len(SHOWN))
    for i, (b, color) in enumerate(benches):
        g = gms[b]
        ax.bar(x + (i - 1) * 0.27, g.mean(), 0.27, color=color, label=f"{b.replace('_', ' ')} benchmark",
               yerr=np.clip([g.mean() - g.min(), g.max() - g.mean()], 0, None), capsize=2)  # fp noise
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(x, SHOWN, rotation=35, ha="right")
    ax.set_ylabel("MASE, SeasonalNaive = 1 (geo. mean)")
    ax.legend(fontsize=8)
    save(fig, job.output.mase)

    fig, (ax,) = new_figure()
    rs, rr = ranks["synthetic"].mean(), ranks["real"].mean()
    ax.scatter(rs, rr)
    for m in RANKED:
        ax.annotate(m, (rs[m], rr[m]), fontsize=8, xytext=(3, 3), textcoords="offset points")
    lo, hi = min(rs.min(), rr.min()) - 0.3, max(rs.max(), rr.max()) + 0.3
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls=":")
    ax.set_xlabel("average rank, synthetic-style benchmark")
    ax.set_ylabel("average rank, real benchmark")
    save(fig, job.output.ranks)

    fc = read_parquet(job.input.forecasts)
    obs = read_parquet(job.input.real_obs)
    windows = read_parquet(job.input.real_windows)
    w = windows.sort_values(["series", "window"]).iloc[-1]
    g = obs[obs["series"] == w["series"]].sort_values("t")
    t, v = pd.DatetimeIndex(g["t"]), g["value"].to_numpy()
    lo = max(0, int(w["origin"]) - 3 * int(w["horizon"]))
    fig, (ax,) = new_figure(width=6.0)
    ax.plot(t[lo:w["origin"] + w["horizon"]], v[lo:w["origin"] + w["horizon"]], color="k", lw=1, label="observed")
    f = fc[(fc["benchmark"] == "real") & (fc["series"] == w["series"]) & (fc["window"] == w["window"])]
    ft = t[w["origin"]:w["origin"] + w["horizon"]]
    for m in ("snaive", "ets", "foundation", "textnet", "avgens"):
        ax.plot(ft, f[f["method"] == m].sort_values("step")["yhat"].to_numpy(), lw=1, label=m)
    ax.axvline(t[w["origin"]], color="grey", ls=":")
    ax.set_title(f"{w['series']}, last window (seed 0 models)", fontsize=9)
    ax.legend(fontsize=7)
    save(fig, job.output.example)
