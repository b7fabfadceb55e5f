"""Stage ``timesx.evaluate``: forecasts of every method on both benchmarks, scores, metrics.json.

Per seed (one pretrained set of small forecasters), every method forecasts every window of the
real and the synthetic-style benchmark; each window gets a plain MASE, normalised per series by
SeasonalNaive, aggregated by geometric mean over series and by average rank. The statistical
forecasts are deterministic and the same for every seed. The leakage audit counts context items
of the real benchmark that postdate their window.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import write_parquet
from icmlrepro.core.metrics import MetricsFile

from . import benchmark, neural, scoring
from .context import KINDS, leaking
from .train import load_models

BENCHMARKS = ("real", "synthetic")
NEURAL = ("foundation", "textnet", "textrev")
ENSEMBLE = "avgens"  # the simple average of the time-series model and the text-aware model
ENSEMBLE_MEMBERS = ("foundation", "textnet")
NO_TEXT_ENSEMBLE = "avgens_notext"  # diagnostic: foundation + ETS, no text anywhere
RANKED = ("snaive", "ets", "arima", "foundation", "textnet", "textrev", ENSEMBLE)
STRONG_SINGLE = ("ets", "arima", "foundation", "textnet", "textrev")
UNIT = "MASE (SeasonalNaive = 1)"


def neural_forecasts(models: dict, vec, windows: list, history: int) -> pd.DataFrame:
    b = neural.Batch([w.history for w in windows], [w.freq for w in windows], [w.text for w in windows], vec, history)
    rows = []
    with torch.no_grad():
        for name in NEURAL:
            for w, f in zip(windows, b.to_values(models[name](b))):
                rows += [{"series": w.series, "window": w.window, "method": name, "step": k, "yhat": float(f[k])}
                         for k in range(f.size)]
    return pd.DataFrame(rows)


def with_ensembles(fc: pd.DataFrame) -> pd.DataFrame:
    wide = fc.pivot_table(index=["series", "window", "step"], columns="method", values="yhat")
    extra = {ENSEMBLE: wide[list(ENSEMBLE_MEMBERS)].mean(axis=1),
             NO_TEXT_ENSEMBLE: wide[["foundation", "ets"]].mean(axis=1)}
    add = [s.rename("yhat").reset_index().assign(method=m) for m, s in extra.items()]
    return pd.concat([fc, *add], ignore_index=True)


def window_errors(fc: pd.DataFrame, windows: list) -> pd.DataFrame:
    """Plain MASE per (series, window, method)."""
    by_key = {(w.series, w.window): w for w in windows}
    rows = []
    for (sid, k, method), g in fc.groupby(["series", "window", "method"], sort=True):
        w = by_key[(sid, k)]
        yhat = g.sort_values("step")["yhat"].to_numpy()
        rows.append({"series": sid, "window": k, "method": method,
                     "mase": scoring.mase(w.future, yhat, w.history, w.season)})
    return pd.DataFrame(rows)


def leak_count(tables) -> int:
    _, _, windows, context = tables
    start = windows.set_index(["series", "window"])["window_start"]
    return int(leaking(context, start.loc[list(zip(context["series"], context["window"]))].reset_index(drop=True)).sum())


def run(job) -> None:
    s = job.params
    inp = dict(job.input.items())
    seeds = list(s["seeds"])
    tables = {b: benchmark.load({k: inp[f"{b}_{k}"] for k in benchmark.TABLES}) for b in BENCHMARKS}
    windows = {b: benchmark.windows_of(tables[b]) for b in BENCHMARKS}
    stat = {b: pd.read_parquet(inp[f"statistical_{b}"]) for b in BENCHMARKS}
    mf = MetricsFile("timesx", s["scale"], replicate="seed", replicates=seeds)
    values: dict[str, list[float]] = {}
    units: dict[str, tuple[str, str, str]] = {}

    def put(name, v, unit, direction, text):
        values.setdefault(name, []).append(float(v))
        units[name] = (unit, direction, text)

    scores_out, forecasts_out = [], []
    n_leaks = leak_count(tables["real"])
    for seed in seeds:
        models, vec = load_models(inp[f"models_seed{seed}"], s)
        gm = {}
        for b in BENCHMARKS:
            fc = with_ensembles(pd.concat([stat[b], neural_forecasts(models, vec, windows[b], s["history"])],
                                          ignore_index=True))
            scaled = scoring.scaled_mase(window_errors(fc, windows[b]))
            gm[b] = pd.Series({m: scoring.geometric_mean(scaled[m]) for m in scaled.columns})
            ranks = scoring.average_rank(scaled[list(RANKED)])
            for m in scaled.columns:
                put(f"{b}.mase.{m}", gm[b][m], UNIT, "lower", f"geometric mean over series, {b} benchmark")
            for m in RANKED:
                put(f"{b}.avg_rank.{m}", ranks[m], "rank", "lower", f"average rank over series among {len(RANKED)} methods")
            long = scaled.reset_index().melt(id_vars="series", var_name="method", value_name="scaled_mase")
            scores_out.append(long.assign(seed=seed, benchmark=b))
            if seed == seeds[0]:
                forecasts_out.append(fc.assign(benchmark=b))
        put("kendall_tau_rank_synthetic_vs_real",
            scoring.kendall_tau(gm["synthetic"][list(RANKED)], gm["real"][list(RANKED)]), "tau", "none",
            "Kendall tau between the method orderings (geometric-mean scaled MASE) on the two benchmarks")
        best = min(STRONG_SINGLE, key=lambda m: gm["real"][m])
        put("mase_best_single_minus_text_ensemble", gm["real"][best] - gm["real"][ENSEMBLE], UNIT, "higher",
            "best strong single baseline (ETS, ARIMA, foundation, textnet, TextRev) minus the text-aware average ensemble, real")
        put("real.best_single_index", STRONG_SINGLE.index(best), "index", "none",
            "which strong baseline was best on the real benchmark: index into " + ", ".join(STRONG_SINGLE))
        put("context_items_after_forecast_start", n_leaks, "items", "lower",
            "context items of the real benchmark issued at/after their window start or naming a later year")
        ctx = tables["real"][3]
        for kind in KINDS:
            put(f"real.context_items.{kind}", int((ctx["kind"] == kind).sum()), "items", "none", "context items generated")
        put("real.n_series", tables["real"][1].shape[0], "series", "none", "series in the real benchmark")
        put("real.n_windows", tables["real"][2].shape[0], "windows", "none", "forecast windows in the real benchmark")
        put("synthetic.n_windows", tables["synthetic"][2].shape[0], "windows", "none", "windows of the synthetic-style benchmark")
    for name, v in values.items():
        unit, direction, text = units[name]
        mf.add(name, v, unit=unit, direction=direction, description=text)
    write_parquet(job.output.scores, pd.concat(scores_out, ignore_index=True))
    fc = pd.concat(forecasts_out, ignore_index=True)
    write_parquet(job.output.forecasts, fc[fc["method"].isin(list(RANKED))].reset_index(drop=True))
    mf.write(job.output.metrics)
