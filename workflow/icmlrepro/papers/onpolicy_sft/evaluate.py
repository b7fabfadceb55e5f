"""Stage ``onpolicy_sft.evaluate``: accuracies, corpus phi, the phi -> generalization link and costs
into metrics.json (one value per seed), plus a per-arm table for the figures.

Costs are CPU seconds (single-threaded jobs, so CPU time is the compute; wall time on a shared machine
would measure the neighbours) of the pipeline each arm needs: generation of its corpus
(sampling for ``self`` and the preference pairs, two-stream decoding for the hinted corpora) plus its
fine-tuning at the chosen learning rate. "Ours" is IDFT on the hinted corpus (``hint_idft``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from icmlrepro.core.io import read_json, read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.tuning import at_grid_edge

from .arms import ARMS, CORPORA

OURS = "hint_idft"
# the SFT arm trained on each corpus: the points of the phi -> out-of-domain accuracy link
SFT_ON = {"ground_truth": "sft", "ground_truth_matched": "gt_matched_sft", "self": "self_sft",
          "hinted": "hint_sft", "hinted_beta0": "hint0_sft"}
GENERATION = {"self": "sampling", "ground_truth_matched": "sampling", "pairs": "sampling",
              "hinted": "hinted", "hinted_beta0": "hinted_beta0"}


def arm_seconds(arm: str, grid: pd.DataFrame, gen: dict) -> float:
    """Generation of the arm's corpus plus fine-tuning at its chosen learning rate (NaN if it had no data)."""
    g = grid[grid["arm"] == arm]
    if g["val_acc"].isna().all():
        return float("nan")
    train = float(g.loc[g["val_acc"].idxmax(), "seconds"])
    return train + gen.get(GENERATION.get(ARMS[arm][0], ""), 0.0)


def link(phi: dict[str, float], ood: dict[str, float], shift: int = 0) -> float:
    """Spearman correlation over corpora between -|phi| and the out-of-domain accuracy of SFT on it;
    ``shift`` > 0 pairs each corpus's phi with another corpus's accuracy (the shuffled-pairing null)."""
    names = [c for c in SFT_ON if np.isfinite(phi[c]) and np.isfinite(ood.get(SFT_ON[c], np.nan))]
    if len(names) < 3:
        return float("nan")
    x = -np.abs([phi[c] for c in names])
    y = np.array([ood[SFT_ON[c]] for c in names])
    x = np.roll(x, shift)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.spearmanr(x, y).statistic)


def per_seed(preds: pd.DataFrame, grid: pd.DataFrame, corpus: pd.DataFrame, costs: dict, arms) -> dict:
    acc = preds.groupby(["arm", "split"])["correct"].mean()
    ood_fam = preds[preds["split"] == "ood"].groupby(["arm", "family"])["correct"].mean()
    row = {}
    for arm in ["base", *arms]:
        row[f"id_acc.{arm}"] = float(acc.get((arm, "test"), np.nan))
        # mean over families (each family weighs the same)
        row[f"ood_acc.{arm}"] = float(ood_fam[arm].mean()) if arm in ood_fam.index.get_level_values(0) else np.nan
    phi = {c: float(corpus.loc[corpus["corpus"] == c, "phi"].mean()) for c in CORPORA}
    for c in CORPORA:
        row[f"phi.{c}"] = phi[c]
        row[f"abs_phi.{c}"] = abs(phi[c])
        row[f"size.{c}"] = int((corpus["corpus"] == c).sum())
    for c in ("self", "hinted", "hinted_beta0"):
        row[f"correct_fraction.{c}"] = float(corpus.loc[corpus["corpus"] == c, "correct"].mean())
    row["mean_lambda.hinted"] = float(corpus.loc[corpus["corpus"] == "hinted", "lam"].mean())
    row["abs_phi_ground_truth_minus_self_generated"] = abs(phi["ground_truth"]) - abs(phi["self"])
    row["abs_phi_original_minus_hinted"] = abs(phi["ground_truth"]) - abs(phi["hinted"])
    row["abs_phi_original_minus_hinted_beta0"] = abs(phi["ground_truth"]) - abs(phi["hinted_beta0"])
    ood = {a: row[f"ood_acc.{a}"] for a in arms}
    row["spearman_neg_abs_phi_vs_ood_acc"] = link(phi, ood)
    row["spearman_shuffled_pairing"] = link(phi, ood, shift=1)
    row["n_pairs"] = costs["n_pairs"]
    for name, secs in costs["generation_seconds"].items():
        row[f"seconds.generation.{name}"] = secs
    for arm in arms:
        row[f"seconds.{arm}"] = arm_seconds(arm, grid, costs["generation_seconds"])
        g = grid[grid["arm"] == arm]
        lr = float(g.loc[g["val_acc"].idxmax(), "lr"]) if g["val_acc"].notna().any() else np.nan
        row[f"chosen_lr.{arm}"] = lr
        row[f"lr_at_grid_edge.{arm}"] = np.nan if np.isnan(lr) else float(at_grid_edge(lr, g["lr"]))
    if OURS in arms:
        for other in ("sft", "dpo", "simpo"):
            if other in arms:
                row[f"ood_acc_ours_minus_{other}"] = row[f"ood_acc.{OURS}"] - row[f"ood_acc.{other}"]
                row[f"train_time_ratio_ours_vs_{other}"] = row[f"seconds.{OURS}"] / row[f"seconds.{other}"]
    return row


def _describe(key: str) -> tuple[str, str, bool, str]:
    """(unit, direction, timing, description) of a metric key."""
    head = key.split(".")[0]
    if head in ("id_acc", "ood_acc", "correct_fraction") or key.startswith("ood_acc_ours"):
        what = {"id_acc": "in-domain test accuracy (target family, longer problems)",
                "ood_acc": "out-of-domain accuracy (held-out families, native style; mean over families)",
                "correct_fraction": "share of the corpus's sequences with the right answer"}.get(head, "difference of out-of-domain accuracy")
        return "fraction", "higher", False, what
    if head in ("phi", "abs_phi") or key.startswith("abs_phi_"):
        return "nats/token", "none", False, "centered log-likelihood log p + H under the base model (corpus mean of sequence means)"
    if head.startswith("spearman"):
        return "rank correlation", "higher", False, "Spearman over corpora of -|phi| vs out-of-domain accuracy after SFT on it"
    if head == "seconds" or key.startswith("train_time_ratio"):
        unit = "CPU s" if head == "seconds" else "ratio"
        return unit, "lower", True, "CPU time: corpus generation + fine-tuning at the chosen learning rate"
    if head == "chosen_lr":
        return "learning rate", "none", False, "learning rate picked on in-domain validation accuracy"
    if head == "lr_at_grid_edge":
        return "flag", "none", False, "1 if the picked learning rate is the smallest or largest of the arm's grid"
    return "", "none", False, ""


def run(job) -> None:
    p = job.params
    arms = p["arms"]
    rows, tables = [], []
    for seed in p["seeds"]:
        preds = read_parquet(job.input[f"predictions_{seed}"])
        grid = read_parquet(job.input[f"grid_{seed}"])
        corpus = read_parquet(job.input[f"corpus_{seed}"])
        costs = read_json(job.input[f"costs_{seed}"])
        rows.append(per_seed(preds, grid, corpus, costs, arms))
        tables.append(preds.groupby(["arm", "split"], as_index=False)["correct"].mean().assign(seed=seed))
    mf = MetricsFile("onpolicy_sft", p["scale"], replicate="seed", replicates=list(p["seeds"]))
    for key in rows[0]:
        unit, direction, timing, desc = _describe(key)
        mf.add(key, [r[key] for r in rows], unit=unit, direction=direction, timing=timing, description=desc)
    mf.write(job.output.metrics)
    summary = pd.DataFrame(rows).assign(seed=list(p["seeds"]))
    write_parquet(job.output.table, summary)
