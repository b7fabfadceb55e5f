"""From per-seed benchmark scores and transfer results to metrics.json (per-seed values throughout).

Everything a claim reads is fixed before the run: the headline input (config ``input``: degree
embeddings at default, so that every layer, attention included, has something to tell nodes apart by;
all-ones features are the extra input, a control) and the main noise level (``main_noise``), at which
the two model families are compared. Nothing is chosen by looking at the scores. Subsets of the
anisotropic family (``ANISOTROPIC_SUBSETS``) are reported as controls of the family comparison.

Ranking stability at a difficulty: per seed, Kendall tau between that seed's ranking of the models
(by top-1 recall) and the ranking by the mean of the other seeds, averaged over graph sources. The
optimal-difficulty claim compares the mean stability of the interior levels with the better of the
two extreme levels, per seed (no interior level is picked after the fact); the argmax level is shown
in the figure only.

Calibration (checklist item 13): top-1 of the main isotropic baseline (GCN) at the main noise level
beside chance, the raw-degree reference and the 1-WL ceiling (``wl_ceiling``: the most any model of
the zoo can reach; on the small real subgraphs about half the nodes share their WL colour with another
node). The gates place GCN between chance (0) and that ceiling (1); the share of chance-to-perfect is
reported too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile

from .alignment import leave_one_out_rank_stability
from .data import PAPER, runs
from .models import ANISOTROPIC, ATTENTION_BLIND, ISOTROPIC, REFERENCES

SCORES = ("top1", "top3", "top5", "lap")
MAIN_BASELINE = "gcn"


def stability_table(scores: pd.DataFrame, seeds: list[int], models: list[str]) -> pd.DataFrame:
    """One row per (source, noise, seed) with the leave-one-seed-out Kendall tau of the top-1 ranking."""
    rows = []
    for (source, noise), d in scores.groupby(["source", "noise"], sort=True):
        mat = d.pivot(index="seed", columns="model", values="top1").loc[seeds, models].to_numpy()
        for seed, tau in zip(seeds, leave_one_out_rank_stability(mat)):
            rows.append({"source": source, "noise": float(noise), "seed": seed, "stability": tau})
    return pd.DataFrame(rows)


def per_seed_stability(stab: pd.DataFrame, seeds: list[int]) -> pd.DataFrame:
    """(noise x seed) stability averaged over sources."""
    return stab.groupby(["noise", "seed"])["stability"].mean().unstack("seed").loc[:, seeds]


def optimal_noise(by_noise: pd.DataFrame) -> float:
    return float(by_noise.mean(axis=1).idxmax())


def interior_and_extremes(by_noise: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per seed: mean stability over the interior noise levels, and the better of the two extremes."""
    noises = sorted(by_noise.index)
    if len(noises) < 3:
        raise ValueError("the optimal-difficulty comparison needs at least three noise levels")
    interior = by_noise.loc[noises[1:-1]].mean(axis=0).to_numpy()
    extremes = np.maximum(by_noise.loc[noises[0]].to_numpy(), by_noise.loc[noises[-1]].to_numpy())
    return interior, extremes


# Subsets of the anisotropic family reported as controls of the family comparison (never claims):
# without PNA and GraphGPS (the two the paper groups as anisotropic although PNA weighs neighbours by
# fixed aggregators and scalers, and GraphGPS adds global attention), PNA and GraphGPS alone, and
# without the layers that are blind on all-ones inputs (models.ATTENTION_BLIND).
ANISOTROPIC_SUBSETS = {
    "without_pna_gps": tuple(x for x in ANISOTROPIC if x not in ("pna", "gps")),
    "pna_gps_only": ("pna", "gps"),
    "without_blind": tuple(x for x in ANISOTROPIC if x not in ATTENTION_BLIND),
}


def family_means(scores: pd.DataFrame, seeds: list[int], col: str,
                 anisotropic=ANISOTROPIC) -> tuple[np.ndarray, np.ndarray]:
    """Per seed: mean ``col`` of the anisotropic (or the given subset) and of the isotropic models (mean
    over sources)."""
    m = scores.groupby(["seed", "model"])[col].mean().unstack("model").loc[seeds]
    aniso = [x for x in anisotropic if x in m.columns]
    iso = [x for x in ISOTROPIC if x in m.columns]
    return m[aniso].mean(axis=1).to_numpy(), m[iso].mean(axis=1).to_numpy()


def spearman_or_zero(x, y) -> float:
    """Spearman rho; 0 for a constant series (a model at chance everywhere shows no trend)."""
    return 0.0 if np.ptp(np.asarray(y, float)) == 0 else float(spearmanr(x, y).statistic)


def difficulty_trend(scores: pd.DataFrame, seeds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per seed, mean over sources: Spearman of noise vs the models' mean top-1, and the largest
    Spearman of noise vs top-1 over single models (< 0: every model degrades)."""
    mean_rho, max_rho = [], []
    for seed in seeds:
        d = scores[scores.seed == seed]
        per_source, per_model = [], []
        for _, g in d.groupby("source"):
            m = g.groupby("noise")["top1"].mean()
            per_source.append(spearman_or_zero(m.index, m.values))
            per_model += [spearman_or_zero(h.noise, h.top1) for _, h in g.groupby("model")]
        mean_rho.append(float(np.mean(per_source)))
        max_rho.append(float(np.max(per_model)))
    return np.array(mean_rho), np.array(max_rho)


def add_scores(mf: MetricsFile, s: pd.DataFrame, plan, models: list[str], seeds: list[int],
               main_noise: float) -> None:
    """Every score per (inputs, source, noise, model); the main noise's also under ``@main``, the name that the
    claims' gates read at every scale (the main noise is fixed before the run and differs between scales)."""
    for inputs, source, noise in plan:
        for model in [*models, *REFERENCES]:
            for col in SCORES:
                values = [s.loc[(inputs, source, noise, model, seed), col] for seed in seeds]
                what = f"{col} alignment score on held-out pairs ({model}, {inputs} input, {source} graphs"
                mf.add(f"{col}.{inputs}.{source}.{model}@{noise:g}", values, unit="fraction",
                       direction="higher", description=f"{what}, noise {noise:g})")
                if float(noise) == main_noise:
                    mf.add(f"{col}.{inputs}.{source}.{model}@main", values, unit="fraction", direction="higher",
                           description=f"{what}, the main noise {noise:g})")


def add_benchmark(mf: MetricsFile, scores: pd.DataFrame, p, seeds: list[int]) -> pd.DataFrame:
    """Difficulty, stability, family and calibration metrics; returns the stability table."""
    models, main = list(p["models"]), float(p["main_noise"])
    head = scores[(scores.input == p["input"]) & scores.model.isin(models)]
    stab = stability_table(head, seeds, models)
    by_noise = per_seed_stability(stab, seeds)
    for noise in p["noises"]:
        mf.add(f"rank_stability@{noise:g}", by_noise.loc[float(noise)].to_numpy(), unit="Kendall tau",
               direction="higher", description=f"leave-one-seed-out Kendall tau of the model ranking by top-1, "
                                               f"mean over sources ({p['input']} input, noise {noise:g})")
    interior, extremes = interior_and_extremes(by_noise)
    mf.add("rank_stability_interior", interior, unit="Kendall tau", direction="higher",
           description="mean rank stability over the interior noise levels (0 = rankings carry no information)")
    mf.add("rank_stability_interior_minus_extremes", interior - extremes, unit="Kendall tau", direction="higher",
           description=f"mean stability of the interior levels minus the better of the easiest "
                       f"({min(p['noises']):g}) and hardest ({max(p['noises']):g}) levels")
    mean_rho, max_rho = difficulty_trend(head, seeds)
    mf.add("spearman_noise_vs_mean_top1", mean_rho, unit="Spearman rho", direction="lower",
           description="Spearman correlation of noise and the models' mean top-1, mean over sources")
    mf.add("max_spearman_noise_vs_top1_over_models", max_rho, unit="Spearman rho", direction="lower",
           description="largest Spearman correlation of noise and top-1 over single models and sources "
                       "(0 for a model at the same score on every level)")
    for noise in p["noises"]:
        a, i = family_means(head[head.noise == float(noise)], seeds, "top1")
        mf.add(f"top1_anisotropic_minus_isotropic.{p['input']}@{noise:g}", a - i, unit="fraction",
               direction="higher", description=f"mean top-1 of anisotropic minus isotropic models "
                                               f"({p['input']} input, noise {noise:g}, mean over sources)")
    for inputs in [p["input"], *p["extra_inputs"]]:
        at_main = scores[(scores.input == inputs) & (scores.noise == main) & scores.model.isin(models)]
        for col in ("top1", "lap"):
            a, i = family_means(at_main, seeds, col)
            for family, v in (("anisotropic", a), ("isotropic", i)):
                mf.add(f"{col}_{family}.{inputs}", v, unit="fraction", direction="higher",
                       description=f"mean {col} of the {family} models at the main noise {main:g} "
                                   f"({inputs} input, mean over sources)")
            mf.add(f"{col}_anisotropic_minus_isotropic.{inputs}", a - i, unit="fraction", direction="higher",
                   description=f"mean {col} of anisotropic minus isotropic models at the main noise {main:g} "
                               f"({inputs} input, mean over sources)")
        for subset, members in ANISOTROPIC_SUBSETS.items():
            a, i = family_means(at_main, seeds, "top1", members)
            mf.add(f"top1_anisotropic_minus_isotropic.{inputs}.{subset}", a - i, unit="fraction",
                   direction="higher", description=f"control of the family comparison: mean top-1 of "
                   f"{', '.join(members)} minus the isotropic models at the main noise {main:g} ({inputs} input, "
                   "mean over sources)")
        ref = scores[(scores.input == inputs) & (scores.noise == main)]
        by = ref.groupby(["seed", "model"])["top1"].mean().unstack("model").loc[seeds]
        chance = by["chance"].to_numpy()
        mf.add(f"calibration.{MAIN_BASELINE}_normalized_top1.{inputs}",
               (by[MAIN_BASELINE].to_numpy() - chance) / (1 - chance), unit="fraction of chance-to-ceiling",
               direction="higher", description=f"top-1 of the main baseline ({MAIN_BASELINE}) at the main noise "
                                               f"{main:g}, 0 = chance, 1 = perfect ({inputs} input, mean over "
                                               "sources; the gates use the 1-WL ceiling per source instead)")
    return stab


def add_transfer(mf: MetricsFile, transfer: pd.DataFrame, seeds: list[int]) -> None:
    t = transfer.set_index(["task", "variant", "metric", "seed"]).sort_index()

    def tv(task, variant, metric):
        return np.array([t.loc[(task, variant, metric, seed), "value"] for seed in seeds])

    for variant in ("mean", "none", "laplacian", "alignment", "random_init"):
        what = "predicting the training mean (trivial reference)" if variant == "mean" else \
            f"the transformer regressor, positional encoding: {variant}"
        mf.add(f"regression_mae.{variant}_pe" if variant != "mean" else "regression_mae.mean_predictor",
               tv("regression", variant, "mae"), unit="clustering coefficient", direction="lower",
               description=f"test MAE of {what}")
    for base, label in (("none", "nope"), ("laplacian", "laplacian_pe")):
        for pe in ("alignment", "random_init"):
            mf.add(f"mae_{label}_minus_{pe}_pe", tv("regression", base, "mae") - tv("regression", pe, "mae"),
                   unit="clustering coefficient", direction="higher",
                   description=f"MAE with {base} PE minus with {pe} PE")
    for variant, suffix in (("pretrained", ""), ("random_init", "_random_init")):
        mf.add(f"reconstruction_balanced_accuracy{suffix}", tv("reconstruction", variant, "balanced_accuracy"),
               unit="fraction", direction="higher",
               description=f"edge/non-edge balanced accuracy over all node pairs of held-out graphs ({variant} encoder)")
        mf.add(f"reconstruction_accuracy{suffix}", tv("reconstruction", variant, "accuracy"), unit="fraction",
               direction="higher", description=f"edge/non-edge accuracy over all node pairs ({variant} encoder)")


def add_tuning(mf: MetricsFile, tuning: pd.DataFrame, seeds: list[int]) -> None:
    """The chosen learning rate per (input, model), the same for every seed (one tuning stream), with the
    interior flag (1 = not at an end of lr_grid) and the tie flag (1 = the tie rule moved the pick)."""
    for r in tuning[tuning.chosen].itertuples():
        edge = " -- at the edge of the grid" if r.at_edge else ""
        n = len(seeds)
        mf.add(f"tuned_lr.{r.input}.{r.model}", [float(r.lr)] * n, unit="learning rate", direction="none",
               description=f"Adam learning rate chosen on the tuning stream's validation loss{edge}")
        mf.add(f"tuned_interior.{r.input}.{r.model}", [float(not r.at_edge)] * n, unit="flag", direction="none",
               description="1 if the chosen learning rate is inside lr_grid, 0 at its smallest or largest value")
        mf.add(f"tuning_tie.{r.input}.{r.model}", [float(bool(r.tie))] * n, unit="flag", direction="none",
               description=f"1 if rates within one standard error ({r.tolerance:.3g}) of the lowest validation "
                           "loss tied and the tie rule moved the pick towards the default rate")


def build_metrics(scores: pd.DataFrame, transfer: pd.DataFrame, tuning: pd.DataFrame, p,
                  seeds: list[int]) -> tuple[MetricsFile, pd.DataFrame]:
    mf = MetricsFile(PAPER, p["scale"], replicate="seed", replicates=seeds)
    s = scores.set_index(["input", "source", "noise", "model", "seed"]).sort_index()
    add_scores(mf, s, runs(p), list(p["models"]), seeds, float(p["main_noise"]))
    stab = add_benchmark(mf, scores, p, seeds)
    add_transfer(mf, transfer, seeds)
    add_tuning(mf, tuning, seeds)
    mf.add("train_seconds_per_seed", scores.groupby("seed")["train_seconds"].sum().loc[seeds].to_numpy(), unit="s",
           direction="lower", timing=True, description="wall time training all models on all datasets of a seed")
    stab["optimal"] = stab.noise == optimal_noise(per_seed_stability(stab, seeds))
    return mf, stab


def run(job) -> None:
    p = job.params
    seeds = [int(x) for x in p["seeds"]]
    scores = pd.concat([read_parquet(job.input[f"scores_seed{s}"]) for s in seeds], ignore_index=True)
    tuning = pd.concat([read_parquet(v) for k, v in job.input.items() if k.startswith("tune_")], ignore_index=True)
    mf, stab = build_metrics(scores, read_parquet(job.input.transfer), tuning, p, seeds)
    write_parquet(job.output.scores, scores)
    write_parquet(job.output.stability, stab)
    mf.write(job.output.metrics)
