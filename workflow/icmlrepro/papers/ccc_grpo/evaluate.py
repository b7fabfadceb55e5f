"""Greedy answers of every arm on the balanced test set; MAE and geometric-mean error by shot region, the slope
and CCC of predictions on targets, each arm's learning-rate grid and choice (tuning.py); metrics.json.

Arms: ``sft`` (token-level SFT on the long-tailed set), ``sft_soft`` (soft-label SFT, a named baseline),
``sft_balanced`` (SFT on uniform targets: the density control), one per RL reward (``pointwise``, ``ccc``,
``ccc_solo``: CCC without the cross-sample terms, the control), and ``train_median`` (the trivial reference: the
training set's median for every image). Each seed is scored on its own data draw (test set and shot regions).
``val_lt_mae.<arm>``: MAE of greedy answers on the seed's held-out split from the training law;
``val_lt_sampled_mae.<arm>`` (SFT and the GRPO arms): MAE of ``EVAL_SAMPLES`` answers sampled per image at the GRPO
temperature on that split, the expected point-wise loss that point-wise GRPO minimises (its gate), with the same
random numbers for every arm. A malformed answer is scored as the training median
(its share is reported as ``well_formed``). Geometric-mean error: exp(mean log max(|e|, 0.5)); integer answers
hit exactly often, and a plain geometric mean would be 0 (0.5 is half the answer's resolution).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_json, read_npz, read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.seeding import derive_seed

from .data import REGIONS, seed_arrays, seen_images, shared_images
from .model import predict, sample_answers
from .rewards import ccc
from .sft import load_model
from .tuning import val_errors

TRIVIAL = "train_median"
GROUPS = ("all", *REGIONS)
GM_FLOOR = 0.5


SFT_ARMS = ("sft", "sft_soft", "sft_balanced")
EVAL_SAMPLES = 4   # sampled answers per held-out image for val_lt_sampled_mae


def arms_of(s: dict) -> list[str]:
    return [*SFT_ARMS, *s["rewards"]]


def prediction_table(job, s: dict, packed: dict) -> tuple[pd.DataFrame, dict, pd.DataFrame, dict]:
    """Every arm's answers per seed and test image, each arm's training seconds per seed, the RL arms' per-step
    training logs, and each arm's MAE on the seed's long-tailed validation split ({arm: {seed: MAE}})."""
    all_regions = read_parquet(job.input.regions)
    rows, logs, secs = [], [], {arm: {} for arm in arms_of(s)}
    val_lt = {arm: {} for arm in [TRIVIAL, *arms_of(s)]}
    sampled = {arm: {} for arm in ["sft", *s["rewards"]]}
    for seed in s["seeds"]:
        arrays = seed_arrays(packed, seed)
        regions = all_regions[all_regions["seed"] == seed].set_index("y")["region"]
        y, median = arrays["test_y"], float(np.median(arrays["train_y"]))
        preds = {TRIVIAL: np.full(len(y), median)}
        val_lt[TRIVIAL][seed] = float(np.abs(median - arrays["val_lt_y"]).mean())
        for arm in arms_of(s):
            model, ck = load_model(job.input[f"{arm}_seed{seed}"], s)
            preds[arm], secs[arm][seed] = predict(model, arrays["test_x"]), float(ck["train_seconds"])
            val_lt[arm][seed] = float(val_errors(model, arrays, "val_lt").mean())
            if arm in sampled:
                q = sample_answers(model, arrays["val_lt_x"], EVAL_SAMPLES, s["rl"]["temperature"],
                                   derive_seed(seed, "ccc_grpo", "eval", "val_lt_samples"))
                sampled[arm][seed] = float(np.abs(np.where(np.isfinite(q), q, median)
                                                  - arrays["val_lt_y"][:, None]).mean())
            if "log" in ck:
                logs.append(pd.DataFrame(ck["log"]).assign(arm=arm, seed=seed))
        for arm, p in preds.items():
            rows.append(pd.DataFrame({"seed": seed, "arm": arm, "y": y, "region": regions.loc[y].to_numpy(),
                                      "well_formed": np.isfinite(p), "pred": np.where(np.isfinite(p), p, median)}))
    return pd.concat(rows, ignore_index=True), secs, pd.concat(logs, ignore_index=True), (val_lt, sampled)


def region_errors(pred: np.ndarray, y: np.ndarray, region: np.ndarray) -> dict[str, tuple[float, float]]:
    """(MAE, geometric-mean error) over all test images and per shot region (NaN for an empty region)."""
    e = np.abs(pred - y)
    out = {}
    for g in GROUPS:
        m = np.ones(len(y), bool) if g == "all" else region == g
        out[g] = ((float(e[m].mean()), float(np.exp(np.log(np.maximum(e[m], GM_FLOOR)).mean())))
                  if m.any() else (np.nan, np.nan))
    return out


def slope(pred: np.ndarray, y: np.ndarray) -> float:
    """OLS slope of predictions on targets (1 = no shrinkage; < 1 = regression to the mean)."""
    return float(np.polyfit(y.astype(float), pred.astype(float), 1)[0])


def arm_summary(t: pd.DataFrame) -> dict[str, float]:
    y, p = t["y"].to_numpy(float), t["pred"].to_numpy(float)
    out = {"slope": slope(p, y), "std_ratio": float(p.std() / y.std()), "test_ccc": ccc(p, y),
           "well_formed": float(t["well_formed"].mean())}
    for g, (mae, gm) in region_errors(p, y, t["region"].to_numpy()).items():
        out[f"mae.{g}"], out[f"gm.{g}"] = mae, gm
    out["mae_few_minus_many"] = out["mae.few"] - out["mae.many"]
    return out


def tuning_table(tuning: dict[str, dict]) -> pd.DataFrame:
    """One row per arm and grid rate: validation MAE on the first seed, and whether it was chosen."""
    return pd.DataFrame([{"arm": arm, "stage": t["stage"], "lr": lr, "val_mae": v, "chosen": i == t["chosen_index"]}
                         for arm, t in tuning.items() for i, (lr, v) in enumerate(zip(t["grid"], t["val_mae"]))])


def add_tuning_metrics(mf: MetricsFile, tuning: dict[str, dict], seeds: list) -> None:
    """The chosen rate, whether it is an end of the grid, and the first seed's validation MAE at every grid
    rate (one value per arm, repeated per seed as the metrics contract wants; direction none: no claim reads
    them)."""
    n = len(seeds)
    for arm, t in tuning.items():
        mf.add(f"lr.{arm}", [t["chosen_lr"]] * n, unit="learning rate", direction="none",
               description=f"{arm}: learning rate chosen on seed {t['tuned_on_seed']}'s validation MAE from the "
                           f"{t['stage']} grid {t['grid']}, then used for every seed")
        mf.add(f"lr_at_grid_edge.{arm}", [float(t["at_grid_edge"])] * n, unit="flag", direction="none",
               description=f"{arm}: 1 if the chosen learning rate is an end of the grid {t['grid']}")
        mf.add(f"lr_tie_to_default.{arm}", [float(t.get("tie_to_default", False))] * n, unit="flag",
               direction="none", description=f"{arm}: 1 if the default rate {t.get('default_lr')} won by the tie "
                                             f"rule (within one standard error of the best rate)")
        mf.add(f"lr_selection_se.{arm}", [float(t.get("selection_se", 0.0))] * n, unit="target units",
               direction="none", description=f"{arm}: standard error of the default-minus-best paired "
                                             f"difference of validation errors (0 when the default is best)")
        for k, (lr, v) in enumerate(zip(t["grid"], t["val_mae"])):
            mf.add(f"val_mae_grid{k}.{arm}", [v] * n, unit="target units", direction="none",
                   description=f"{arm}: validation MAE on seed {t['tuned_on_seed']} at grid point {k} (lr {lr:g})")
        mf.add(f"val_mae.{arm}", [t["val_mae_by_seed"][str(sd)] for sd in seeds], unit="target units",
               direction="lower", description=f"{arm}: validation MAE at the chosen learning rate")


def build_metrics(pred: pd.DataFrame, s: dict, train_seconds: dict, leaked: int | list = 0,
                  tuning: dict[str, dict] | None = None, val_lt: tuple[dict, dict] | None = None) -> MetricsFile:
    seeds = list(s["seeds"])
    mf = MetricsFile("ccc_grpo", s["scale"], replicate="seed", replicates=seeds)
    summ = {(a, sd): arm_summary(g) for (a, sd), g in pred.groupby(["arm", "seed"])}
    arms = [TRIVIAL, *arms_of(s)]

    def v(arm, key):
        return np.array([summ[(arm, sd)][key] for sd in seeds])

    for arm in arms:
        for g in GROUPS:
            mf.add(f"mae.{arm}.{g}", v(arm, f"mae.{g}"), unit="target units", direction="lower",
                   description=f"{arm}: mean absolute error, {g} test images (balanced test set)")
            mf.add(f"gm.{arm}.{g}", v(arm, f"gm.{g}"), unit="target units", direction="lower",
                   description=f"{arm}: geometric-mean error (errors floored at {GM_FLOOR}), {g} test images")
        mf.add(f"slope.{arm}", v(arm, "slope"), unit="slope", direction="none",
               description=f"{arm}: OLS slope of prediction on target (1 = unbiased, < 1 = regression to the mean)")
        mf.add(f"std_ratio.{arm}", v(arm, "std_ratio"), unit="ratio", direction="none",
               description=f"{arm}: std of predictions / std of targets on the test set")
        mf.add(f"test_ccc.{arm}", v(arm, "test_ccc"), unit="CCC", direction="higher",
               description=f"{arm}: concordance correlation of predictions and targets on the test set")
        mf.add(f"mae_few_minus_many.{arm}", v(arm, "mae_few_minus_many"), unit="target units", direction="none",
               description=f"{arm}: few-shot MAE minus many-shot MAE (> 0: the tail is predicted worse)")
        if arm != TRIVIAL:
            mf.add(f"well_formed.{arm}", v(arm, "well_formed"), unit="share", direction="higher",
                   description=f"{arm}: share of greedy answers that pass the format check")
    greedy_lt, sampled_lt = val_lt or ({}, {})
    for arm, by_seed in greedy_lt.items():
        mf.add(f"val_lt_mae.{arm}", [by_seed[sd] for sd in seeds], unit="target units", direction="lower",
               description=f"{arm}: MAE of greedy answers on a held-out split drawn from the (long-tailed) training law")
    for arm, by_seed in sampled_lt.items():
        mf.add(f"val_lt_sampled_mae.{arm}", [by_seed[sd] for sd in seeds], unit="target units", direction="lower",
               description=f"{arm}: MAE of {EVAL_SAMPLES} sampled answers per image (GRPO temperature) on the held-out "
                           f"training-law split: the expected point-wise loss")
    for base in ("sft", "sft_soft", "pointwise"):
        if base not in arms:
            continue
        for arm in (a for a in arms if a not in (TRIVIAL, base)):
            for g in GROUPS:
                mf.add(f"mae_gain_vs_{base}.{arm}.{g}", v(base, f"mae.{g}") - v(arm, f"mae.{g}"),
                       unit="target units", direction="higher",
                       description=f"MAE of {base} minus MAE of {arm}, {g} test images (> 0: {arm} is better)")
            for g in ("few", "medium"):
                gain = (v(base, f"mae.{g}") - v(arm, f"mae.{g}")) - (v(base, "mae.many") - v(arm, "mae.many"))
                mf.add(f"mae_gain_vs_{base}_{g}_minus_many.{arm}", gain, unit="target units", direction="higher",
                       description=f"MAE reduction of {arm} over {base} in the {g}-shot region minus that in the "
                                   f"many-shot region")
            mf.add(f"test_ccc_gain_vs_{base}.{arm}", v(arm, "test_ccc") - v(base, "test_ccc"), unit="CCC",
                   direction="higher", description=f"test CCC of {arm} minus that of {base}")
    leaked = [float(v) for v in leaked] if isinstance(leaked, list) else [float(leaked)] * len(seeds)
    mf.add("test_images_in_training", leaked, unit="images", direction="lower",
           description="test images that also occur in a training set or the validation split (the "
                       "split's audit: must be 0)")
    add_tuning_metrics(mf, tuning or {}, seeds)
    for arm, secs in train_seconds.items():
        mf.add(f"train_seconds.{arm}", [secs[sd] for sd in seeds], unit="s", direction="lower", timing=True,
               description=f"wall time of one training run of arm {arm} at the chosen rate (RL arms: GRPO "
                           f"only, after SFT; tuning runs not counted)")
    return mf


def run(job) -> None:
    s = job.params
    packed = read_npz(job.input.images)
    pred, secs, logs, val_lt = prediction_table(job, s, packed)
    leaked = [shared_images(seen_images(a), a["test_x"]) for a in (seed_arrays(packed, sd) for sd in s["seeds"])]
    tuning = {arm: read_json(job.input[f"tuning_{arm}"]) for arm in arms_of(s)}
    write_parquet(job.output.tuning, tuning_table(tuning))
    write_parquet(job.output.rl_log, logs)
    write_parquet(job.output.predictions, pred)
    build_metrics(pred, s, secs, leaked, tuning, val_lt).write(job.output.metrics)
