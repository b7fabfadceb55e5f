"""Stage ``timesx.evaluate``: forecasts of every method on the benchmarks, scores, metrics.json.

Per seed (one pretrained set of small forecasters), every method forecasts every window of the
real benchmark, the synthetic-style benchmark and its redraw; each window gets a plain MASE,
normalised per series by SeasonalNaive, aggregated by geometric mean over series and by average rank.
The statistical forecasts are deterministic and the same for every seed.

Controls measured in the same run: the text-aware model's no-text twin (same network and budget, trained
and run without text) and its ensemble, the text-aware models given the text of another window
(shuffled); the rank agreement between
the synthetic-style benchmark and an independent redraw of it. The leakage audit counts context
items of the real benchmark that break a leak rule, and the same for the context a pipeline blind to
release dates would build (what the audit must catch).
"""

from __future__ import annotations

import pandas as pd
import torch

from icmlrepro.core.io import write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.tuning import at_grid_edge

from . import benchmark, neural, scoring
from .context import KINDS, LEAK_RULES
from .methods import ENSEMBLE, RANKED
from .train import load_models
from .workflow_inputs import BENCHMARKS, UNBOUNDED

NEURAL = ("foundation", "textnet", "textrev")
# text controls: the text-aware models given no context, or another window's context
TEXT_ARMS = {"": lambda texts: texts, "_notext": lambda texts: [""] * len(texts),
             "_shuffled": lambda texts: texts[len(texts) // 2:] + texts[:len(texts) // 2]}
TEXT_MODELS = ("textnet", "textrev")
ENSEMBLE_MEMBERS = ("foundation", "textnet")
ENSEMBLES = {ENSEMBLE: ENSEMBLE_MEMBERS, "avgens_notext": ("foundation", "textnet_notext"),
             "avgens_shuffled": ("foundation", "textnet_shuffled"),
             "avgens_foundation_ets": ("foundation", "ets")}  # the last: no text anywhere (diagnostic)
STRONG_SINGLE = ("ets", "arima", "foundation", "textnet", "textrev")
UNIT = "MASE (SeasonalNaive = 1)"


def neural_forecasts(models: dict, vec, windows: list, history: int) -> pd.DataFrame:
    """Forecasts of the neural models; the text-aware ones also with the text removed and shuffled
    (windows in series order, each given the text of the window half the list away)."""
    texts = [w.text for w in windows]
    rows = []
    with torch.no_grad():
        for suffix, arm in TEXT_ARMS.items():
            b = neural.Batch([w.history for w in windows], [w.freq for w in windows], arm(texts), vec, history)
            for name in NEURAL if not suffix else TEXT_MODELS:
                # textnet's no-text arm is its twin trained without text; TextRev's reads no text (diagnostic)
                model = models.get(name + suffix, models[name]) if suffix == "_notext" else models[name]
                for w, f in zip(windows, b.to_values(model(b))):
                    rows += [{"series": w.series, "window": w.window, "method": name + suffix, "step": k,
                              "yhat": float(f[k])} for k in range(f.size)]
    return pd.DataFrame(rows)


def with_ensembles(fc: pd.DataFrame) -> pd.DataFrame:
    """Adds every ensemble of ENSEMBLES whose members are forecast (the mean of the members)."""
    wide = fc.pivot_table(index=["series", "window", "step"], columns="method", values="yhat")
    add = [wide[list(members)].mean(axis=1).rename("yhat").reset_index().assign(method=m)
           for m, members in ENSEMBLES.items() if set(members) <= set(wide.columns)]
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


def leak_counts(tables, context: pd.DataFrame | None = None) -> pd.Series:
    """Items breaking each leak rule, and ``any``, for the benchmark's own context or ``context``."""
    _, docs, windows, own = tables
    flags = benchmark.context_audit(docs, windows, own if context is None else context)
    return pd.concat([flags.sum(), pd.Series({"any": int(flags.any(axis=1).sum())})]).astype(int)


def run(job) -> None:
    s = job.params
    inp = dict(job.input.items())
    seeds = list(s["seeds"])
    tables = {b: benchmark.load({k: inp[f"{b}_{k}"] for k in benchmark.TABLES}) for b in BENCHMARKS}
    unbounded = pd.read_parquet(inp[UNBOUNDED])
    windows = {b: benchmark.windows_of(tables[b]) for b in BENCHMARKS}
    stat = {b: pd.read_parquet(inp[f"statistical_{b}"]) for b in BENCHMARKS}
    mf = MetricsFile("timesx", s["scale"], replicate="seed", replicates=seeds)
    values: dict[str, list[float]] = {}
    units: dict[str, tuple[str, str, str]] = {}

    def put(name, v, unit, direction, text):
        values.setdefault(name, []).append(float(v))
        units[name] = (unit, direction, text)

    scores_out, forecasts_out = [], []
    leaks = leak_counts(tables["real"])
    leaks_unbounded = leak_counts(tables["real"], unbounded)
    for seed in seeds:
        models, vec, tuning = load_models(inp[f"models_seed{seed}"], s)
        for arm, i in tuning["lr_index"].items():
            put(f"train.lr_index.{arm}", i, "index", "none",
                f"learning rate chosen by validation L1 for {arm}: index into lr_grid {list(s['lr_grid'])}")
            put(f"tuned_interior.{arm}", not at_grid_edge(s["lr_grid"][i], s["lr_grid"]), "flag", "none",
                f"1 if the rate chosen for {arm} is interior to lr_grid (not at an edge)")
            put(f"tuning_tie.{arm}", tuning["lr_tie"][arm], "flag", "none",
                f"1 if the tie rule moved {arm}'s rate off the lowest validation loss to the default side")
            put(f"train.lr_selection_se.{arm}", tuning["lr_se"][arm], "L1 (standardised)", "none",
                f"standard error over validation windows of {arm}'s best validation L1 (the tie tolerance)")
            put(f"train.val_loss.{arm}", tuning["val_loss"][arm][i], "L1 (standardised)", "lower",
                f"validation L1 of {arm} at the chosen rate (pretraining generator, held-out windows)")
            put(f"train.val_loss_snaive.{arm}", tuning["val_loss_snaive"][arm], "L1 (standardised)", "none",
                f"validation L1 of SeasonalNaive on the same windows and targets as {arm} (its starting point)")
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
        for other in ("real", "synthetic_redraw"):
            put(f"kendall_tau_rank_synthetic_vs_{other.removeprefix('synthetic_')}",
                scoring.kendall_tau(gm["synthetic"][list(RANKED)], gm[other][list(RANKED)]), "tau", "none",
                f"Kendall tau between the method orderings (geometric-mean scaled MASE) on the synthetic-style "
                f"benchmark and the {other.replace('_', ' ')} benchmark")
        best = min(STRONG_SINGLE, key=lambda m: gm["real"][m])
        for ens, what in ((ENSEMBLE, "the text-aware average ensemble"),
                          ("avgens_notext", "the same ensemble with the text removed (control)"),
                          ("avgens_shuffled", "the same ensemble given another window's text (control)")):
            put(f"mase_best_single_minus_text_ensemble{ens.removeprefix(ENSEMBLE)}", gm["real"][best] - gm["real"][ens],
                UNIT, "higher", f"best strong single baseline (ETS, ARIMA, foundation, textnet, TextRev) minus {what}, real")
        put("real.best_single_index", STRONG_SINGLE.index(best), "index", "none",
            "which strong baseline was best on the real benchmark: index into " + ", ".join(STRONG_SINGLE))
        put("context_items_after_forecast_start", leaks["any"], "items", "lower",
            "context items of the real benchmark breaking a leak rule (issued at/after the window start, data "
            "not yet published under the documented lag, unpublished documentation not reduced, a later year)")
        for rule in LEAK_RULES:
            put(f"real.context_leaks.{rule}", leaks[rule], "items", "lower", "items of the real benchmark breaking this rule")
            put(f"unbounded.context_leaks.{rule}", leaks_unbounded[rule], "items", "none",
                "the same rule on the context built without release dates (zero lag, documentation at the series start)")
        put("unbounded.context_items_after_forecast_start", leaks_unbounded["any"], "items", "none",
            "context items breaking a leak rule when the pipeline ignores release dates: what the audit catches")
        ctx = tables["real"][3]
        for kind in KINDS:
            put(f"real.context_items.{kind}", int((ctx["kind"] == kind).sum()), "items", "none", "context items generated")
        put("real.n_series", tables["real"][1].shape[0], "series", "none", "series in the real benchmark")
        put("real.n_windows", tables["real"][2].shape[0], "windows", "none", "forecast windows in the real benchmark")
        put("synthetic.n_windows", tables["synthetic"][2].shape[0], "windows", "none", "windows of the synthetic-style benchmark")
        put("real.context_items.metadata_reduced", int(ctx["reduced"].sum()), "items", "none",
            "metadata items reduced to what was knowable at the origin (documentation published later)")
    for name, v in values.items():
        unit, direction, text = units[name]
        mf.add(name, v, unit=unit, direction=direction, description=text)
    write_parquet(job.output.scores, pd.concat(scores_out, ignore_index=True))
    fc = pd.concat(forecasts_out, ignore_index=True)
    write_parquet(job.output.forecasts, fc[fc["method"].isin(list(RANKED))].reset_index(drop=True))
    mf.write(job.output.metrics)
