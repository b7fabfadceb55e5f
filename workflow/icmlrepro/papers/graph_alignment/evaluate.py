"""From per-seed benchmark scores and transfer results to metrics.json (per-seed values throughout).

Ranking stability at a difficulty: per seed, Kendall tau between that seed's ranking of the models
(by top-1 recall) and the ranking by the mean of the other seeds, averaged over graph sources. The
optimal difficulty is the noise level with the highest mean stability. The optimal-difficulty
claim compares the best interior level with the better of the two extreme levels, per seed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile

from .alignment import leave_one_out_rank_stability
from .data import PAPER
from .models import ANISOTROPIC, ISOTROPIC

SCORES = ("top1", "top3", "top5", "lap")


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


def interior_minus_extremes(by_noise: pd.DataFrame) -> tuple[np.ndarray, float]:
    noises = sorted(by_noise.index)
    if len(noises) < 3:
        raise ValueError("the optimal-difficulty comparison needs at least three noise levels")
    interior = by_noise.loc[noises[1:-1]]
    best = float(interior.mean(axis=1).idxmax())
    extremes = np.maximum(by_noise.loc[noises[0]].to_numpy(), by_noise.loc[noises[-1]].to_numpy())
    return by_noise.loc[best].to_numpy() - extremes, best


def family_gap(scores: pd.DataFrame, seeds: list[int], noise: float, col: str) -> np.ndarray:
    """Per seed: mean score of the anisotropic models minus the isotropic ones at ``noise`` (mean over sources)."""
    d = scores[scores.noise == noise]
    m = d.groupby(["seed", "model"])[col].mean().unstack("model").loc[seeds]
    aniso = [x for x in ANISOTROPIC if x in m.columns]
    iso = [x for x in ISOTROPIC if x in m.columns]
    return (m[aniso].mean(axis=1) - m[iso].mean(axis=1)).to_numpy()


def max_difficulty_correlation(scores: pd.DataFrame, seeds: list[int]) -> np.ndarray:
    """Per seed: the largest Spearman correlation of noise vs top-1 over models and sources (< 0: all degrade)."""
    out = []
    for seed in seeds:
        d = scores[scores.seed == seed]
        rhos = [spearmanr(g.noise, g.top1).statistic for _, g in d.groupby(["source", "model"])]
        out.append(float(np.nanmax(rhos)) if not np.all(np.isnan(rhos)) else np.nan)
    return np.array(out)


def build_metrics(scores: pd.DataFrame, transfer: pd.DataFrame, p, seeds: list[int]) -> tuple[MetricsFile, pd.DataFrame]:
    mf = MetricsFile(PAPER, p["scale"], replicate="seed", replicates=seeds)
    models = list(p["models"])
    s = scores.set_index(["source", "noise", "model", "seed"]).sort_index()
    for source in p["sources"]:
        for noise in p["noises"]:
            for model in models:
                for col in SCORES:
                    mf.add(f"{col}.{source}.{model}@{noise:g}", [s.loc[(source, float(noise), model, seed), col] for seed in seeds],
                           unit="fraction", direction="higher",
                           description=f"{col} alignment score on held-out pairs ({model}, {source} graphs, noise {noise:g})")
    stab = stability_table(scores, seeds, models)
    by_noise = per_seed_stability(stab, seeds)
    for noise in p["noises"]:
        mf.add(f"rank_stability@{noise:g}", by_noise.loc[float(noise)].to_numpy(), unit="Kendall tau", direction="higher",
               description=f"leave-one-seed-out Kendall tau of the model ranking by top-1, mean over sources (noise {noise:g})")
    best_noise = optimal_noise(by_noise)
    gap, interior = interior_minus_extremes(by_noise)
    mf.add("rank_stability_best_interior_minus_extremes", gap, unit="Kendall tau", direction="higher",
           description=f"stability at the best interior noise ({interior:g}) minus the better of the easiest "
                       f"({min(p['noises']):g}) and hardest ({max(p['noises']):g}) levels")
    mf.add("max_spearman_noise_vs_top1_over_models", max_difficulty_correlation(scores, seeds), unit="Spearman rho",
           direction="lower", description="largest Spearman correlation between noise and top-1 over models and sources")
    for noise in p["noises"]:
        mf.add(f"top1_anisotropic_minus_isotropic@{noise:g}", family_gap(scores, seeds, float(noise), "top1"),
               unit="fraction", direction="higher",
               description=f"mean top-1 of anisotropic minus isotropic models (noise {noise:g}, mean over sources)")
    for col in ("top1", "lap"):
        mf.add(f"{col}_anisotropic_minus_isotropic", family_gap(scores, seeds, best_noise, col), unit="fraction",
               direction="higher",
               description=f"mean {col} of anisotropic minus isotropic models at the optimal difficulty (noise {best_noise:g})")
    t = transfer.set_index(["task", "variant", "metric", "seed"]).sort_index()

    def tv(task, variant, metric):
        return np.array([t.loc[(task, variant, metric, seed), "value"] for seed in seeds])

    for variant in ("none", "laplacian", "alignment"):
        mf.add(f"regression_mae.{variant}_pe", tv("regression", variant, "mae"), unit="clustering coefficient",
               direction="lower", description=f"test MAE of the transformer regressor, positional encoding: {variant}")
    mf.add("mae_nope_minus_alignment_pe", tv("regression", "none", "mae") - tv("regression", "alignment", "mae"),
           unit="clustering coefficient", direction="higher", description="MAE without PE minus with alignment PE")
    mf.add("mae_laplacian_pe_minus_alignment_pe",
           tv("regression", "laplacian", "mae") - tv("regression", "alignment", "mae"), unit="clustering coefficient",
           direction="higher", description="MAE with Laplacian PE minus with alignment PE")
    for variant, suffix in (("pretrained", ""), ("random_init", "_random_init")):
        mf.add(f"reconstruction_balanced_accuracy{suffix}", tv("reconstruction", variant, "balanced_accuracy"),
               unit="fraction", direction="higher",
               description=f"edge/non-edge balanced accuracy over all node pairs of held-out graphs ({variant} encoder)")
        mf.add(f"reconstruction_accuracy{suffix}", tv("reconstruction", variant, "accuracy"), unit="fraction",
               direction="higher", description=f"edge/non-edge accuracy over all node pairs ({variant} encoder)")
    mf.add("train_seconds_per_seed", scores.groupby("seed")["train_seconds"].sum().loc[seeds].to_numpy(), unit="s",
           direction="lower", timing=True, description="wall time training all models on all datasets of a seed")
    stab["optimal"] = stab.noise == best_noise
    return mf, stab


def run(job) -> None:
    p = job.params
    seeds = [int(x) for x in p["seeds"]]
    scores = pd.concat([read_parquet(job.input[f"scores_seed{s}"]) for s in seeds], ignore_index=True)
    mf, stab = build_metrics(scores, read_parquet(job.input.transfer), p, seeds)
    write_parquet(job.output.scores, scores)
    write_parquet(job.output.stability, stab)
    mf.write(job.output.metrics)
