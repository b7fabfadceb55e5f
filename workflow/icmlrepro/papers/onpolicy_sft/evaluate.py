"""Stage ``onpolicy_sft.evaluate``: accuracies, corpus phi, the phi -> generalization link and costs
into metrics.json (one value per seed), plus a per-arm table for the figures.

Costs are CPU seconds (single-threaded jobs, so CPU time is the compute; wall time on a shared machine
would measure the neighbours) of the pipeline each arm needs: generation of its corpus
(sampling for ``self`` and the preference pairs, two-stream decoding for the hinted corpora) plus its
fine-tuning at the chosen learning rate. "Ours" is IDFT on the hinted corpus (``hint_idft``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy import stats

from icmlrepro.core.io import read_json, read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.tuning import at_grid_edge

from .arms import ARMS, CORPORA
from .data import answer_shares

OURS = "hint_idft"
# the SFT arm trained on each corpus: the points of the phi -> out-of-domain accuracy link
SFT_ON = {"ground_truth": "sft", "ground_truth_matched": "gt_matched_sft", "self": "self_sft",
          "hinted": "hint_sft", "hinted_beta0": "hint0_sft"}
GENERATION = {"self": "sampling", "ground_truth_matched": "sampling", "pairs": "sampling",
              "hinted": "hinted", "hinted_beta0": "hinted_beta0"}


def _chosen(g: pd.DataFrame) -> pd.Series | None:
    """The grid row the train stage picked (``chosen``; older grids: the first best validation accuracy)."""
    if g["val_acc"].isna().all():
        return None
    if "chosen" in g and g["chosen"].any():
        return g[g["chosen"].astype(bool)].iloc[0]
    return g.loc[g["val_acc"].idxmax()]


def arm_seconds(arm: str, grid: pd.DataFrame, gen: dict) -> float:
    """Generation of the arm's corpus plus fine-tuning at its chosen learning rate (NaN if it had no data)."""
    row = _chosen(grid[grid["arm"] == arm])
    if row is None:
        return float("nan")
    return float(row["seconds"]) + gen.get(GENERATION.get(ARMS[arm][0], ""), 0.0)


def selection(g: pd.DataFrame) -> dict[str, float]:
    """How sure the learning-rate pick is: the validation margin of the chosen rate over the best other rate,
    its paired standard error over validation problems (sd of the per-problem difference / sqrt n), and
    whether the best accuracy was tied (the tie then went to the default rate)."""
    row = _chosen(g)
    others = g[(g["lr"] != row["lr"])] if row is not None else g.iloc[:0]
    if row is None or others["val_acc"].isna().all() or "val_hits" not in g:
        return {"margin": np.nan, "se": np.nan, "tie": np.nan}
    runner = others.loc[others["val_acc"].idxmax()]
    diff = np.asarray(row["val_hits"], float) - np.asarray(runner["val_hits"], float)
    se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else np.nan
    return {"margin": float(row["val_acc"] - runner["val_acc"]), "se": se,
            "tie": float(row["val_acc"] == runner["val_acc"])}


def _pairs(phi: dict[str, float], ood: dict[str, float]):
    names = [c for c in SFT_ON if np.isfinite(phi[c]) and np.isfinite(ood.get(SFT_ON[c], np.nan))]
    return -np.abs([phi[c] for c in names]), np.array([ood[SFT_ON[c]] for c in names])


def _spearman(x, y) -> float:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.spearmanr(x, y).statistic)


def link(phi: dict[str, float], ood: dict[str, float]) -> float:
    """Spearman correlation over corpora between -|phi| and the out-of-domain accuracy of SFT on it."""
    return _spearman(*_pairs(phi, ood))


def link_null(phi: dict[str, float], ood: dict[str, float]) -> np.ndarray:
    """The permutation null of ``link``: its value under every pairing of the corpora's phi with their
    accuracies (all n! permutations; 120 for the five corpora)."""
    x, y = _pairs(phi, ood)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return np.array([np.nan])
    return np.array([_spearman(x[list(perm)], y) for perm in itertools.permutations(range(len(x)))])


def per_seed(preds: pd.DataFrame, grid: pd.DataFrame, corpus: pd.DataFrame, costs: dict, arms,
             ood: pd.DataFrame | None = None, pretrain_max_steps: int | None = None) -> dict:
    acc = preds.groupby(["arm", "split"])["correct"].mean()
    ood_preds = preds[preds["split"] == "ood"]
    ood_fam = ood_preds.groupby(["arm", "family"])["correct"].mean()
    row = {}
    if ood is not None:
        shares = answer_shares(ood)
        # the trivial reference: always the family's most common answer (mean over families, as ood_acc)
        row["ood_acc.majority"] = float(np.mean(list(shares.values())))
        row["ood_majority_share"] = float(max(shares.values()))
        row["ood_n"] = int(len(ood))
    for arm in ["base", *arms]:
        row[f"id_acc.{arm}"] = float(acc.get((arm, "test"), np.nan))
        # mean over families (each family weighs the same)
        row[f"ood_acc.{arm}"] = float(ood_fam[arm].mean()) if arm in ood_fam.index.get_level_values(0) else np.nan
        if pretrain_max_steps is not None:
            # the out-of-domain items at pretraining difficulty vs beyond it (mean over families, as ood_acc)
            mine = ood_preds[ood_preds["arm"] == arm]
            for part, sel in (("within", mine["difficulty"] <= pretrain_max_steps),
                              ("beyond", mine["difficulty"] > pretrain_max_steps)):
                fam = mine[sel].groupby("family")["correct"].mean()
                row[f"ood_acc_{part}_pretraining.{arm}"] = float(fam.mean()) if len(fam) else np.nan
    # phi and size of each corpus as trained on (column ``train``: the hinted corpora may keep only their
    # correct re-generations); correct_fraction reads every generated row
    trained = corpus[corpus["train"].astype(bool)] if "train" in corpus else corpus
    phi = {c: float(trained.loc[trained["corpus"] == c, "phi"].mean()) for c in CORPORA}
    for c in CORPORA:
        row[f"phi.{c}"] = phi[c]
        row[f"abs_phi.{c}"] = abs(phi[c])
        row[f"size.{c}"] = int((trained["corpus"] == c).sum())
    for c in ("self", "hinted", "hinted_beta0"):
        row[f"correct_fraction.{c}"] = float(corpus.loc[corpus["corpus"] == c, "correct"].mean())
    row["mean_lambda.hinted"] = float(corpus.loc[corpus["corpus"] == "hinted", "lam"].mean())
    row["abs_phi_ground_truth_minus_self_generated"] = abs(phi["ground_truth"]) - abs(phi["self"])
    # hinted decoding's realignment reads every re-generation (what the decoder wrote), not the rows kept for
    # training: keeping the right answers selects confident sequences and moves phi up (phi_generated vs phi)
    generated = {c: float(corpus.loc[corpus["corpus"] == c, "phi"].mean()) for c in ("hinted", "hinted_beta0")}
    for c, v in generated.items():
        row[f"phi_generated.{c}"] = v
    row["abs_phi_original_minus_hinted"] = abs(phi["ground_truth"]) - abs(generated["hinted"])
    row["abs_phi_original_minus_hinted_beta0"] = abs(phi["ground_truth"]) - abs(generated["hinted_beta0"])
    ood = {a: row[f"ood_acc.{a}"] for a in arms}
    row["spearman_neg_abs_phi_vs_ood_acc"] = link(phi, ood)
    null = link_null(phi, ood)
    # the permutation null over all pairings: its 95th percentile is the control (what a chance pairing
    # reaches one time in twenty), and the exact one-sided p-value is reported
    row["spearman_null_q95"] = float(np.quantile(null, 0.95)) if np.isfinite(null).all() else np.nan
    row["spearman_perm_p"] = (float(np.mean(null >= row["spearman_neg_abs_phi_vs_ood_acc"] - 1e-12))
                              if np.isfinite(null).all() else np.nan)
    row["n_pairs"] = costs["n_pairs"]
    for name, secs in costs["generation_seconds"].items():
        row[f"seconds.generation.{name}"] = secs
    for arm in arms:
        row[f"seconds.{arm}"] = arm_seconds(arm, grid, costs["generation_seconds"])
        g = grid[grid["arm"] == arm]
        chosen = _chosen(g)
        lr = np.nan if chosen is None else float(chosen["lr"])
        row[f"chosen_lr.{arm}"] = lr
        row[f"lr_at_grid_edge.{arm}"] = np.nan if np.isnan(lr) else float(at_grid_edge(lr, g["lr"]))
        row[f"tuned_interior.{arm}"] = np.nan if np.isnan(lr) else 1.0 - row[f"lr_at_grid_edge.{arm}"]
        sel = selection(g)
        row[f"lr_selection_margin.{arm}"] = sel["margin"]
        row[f"lr_selection_se.{arm}"] = sel["se"]
        # 1 when the tie rule (rates within one standard error of the best validation accuracy) moved the pick
        # to the default rate; grids without the column: an exact tie
        moved = g["moved_by_tie"].dropna() if "moved_by_tie" in g else g.iloc[:0]
        row[f"tuning_tie.{arm}"] = float(bool(moved.iloc[0])) if len(moved) else sel["tie"]
        if ARMS[arm][0] == "pairs":  # NaN where the arm did not train (no pairs) or ran one stage
            # two-stage DPO / SimPO: what the preference stage added to the SFT-on-chosen model (validation)
            stage = np.nan if chosen is None else float(chosen.get("sft_stage_val_acc", np.nan))
            row[f"pref_stage_val_gain.{arm}"] = float(chosen["val_acc"]) - stage if np.isfinite(stage) else np.nan
            # the same on the test problems, which the rate's pick never saw (no selection bias)
            stage_t = np.nan if chosen is None else float(chosen.get("sft_stage_test_acc", np.nan))
            row[f"pref_stage_test_gain.{arm}"] = row[f"id_acc.{arm}"] - stage_t if np.isfinite(stage_t) else np.nan
    if OURS in arms:
        for other in ("sft", "dpo", "simpo"):
            if other in arms:
                row[f"ood_acc_ours_minus_{other}"] = row[f"ood_acc.{OURS}"] - row[f"ood_acc.{other}"]
                row[f"train_time_ratio_ours_vs_{other}"] = row[f"seconds.{OURS}"] / row[f"seconds.{other}"]
    for other in ("dpo", "simpo"):
        if other in arms:
            row[f"ood_acc_base_minus_{other}"] = row["ood_acc.base"] - row[f"ood_acc.{other}"]
    return row


def fold_base_gaps(rows: list[dict]) -> None:
    """``ood_gap_base_vs_<rl>``: the base model's out-of-domain gap to DPO / SimPO, signed to the side of its
    mean over seeds (|mean| with a per-seed spread). The on-par test (a gap within +-5 points) is failed by
    the untrained base exactly when this exceeds 0.05 over its CI; the gate on_par_discriminates reads it."""
    for other in ("dpo", "simpo"):
        key = f"ood_acc_base_minus_{other}"
        if rows and key in rows[0]:
            sign = 1.0 if np.nanmean([r[key] for r in rows]) >= 0 else -1.0
            for r in rows:
                r[f"ood_gap_base_vs_{other}"] = sign * r[key]


def _describe(key: str) -> tuple[str, str, bool, str]:
    """(unit, direction, timing, description) of a metric key."""
    head = key.split(".")[0]
    if key == "spearman_perm_p":
        return "p-value", "lower", False, "exact permutation p of the phi link over all pairings of the corpora"
    if key == "spearman_null_q95":
        return "rank correlation", "none", False, "95th percentile of the link over all pairings (permutation null)"
    if head in ("id_acc", "ood_acc", "correct_fraction", "ood_acc_within_pretraining", "ood_acc_beyond_pretraining") \
            or key.startswith("ood_acc_ours"):
        what = {"id_acc": "in-domain test accuracy (target family, longer problems)",
                "ood_acc": "out-of-domain accuracy (held-out families, native style; mean over families)",
                "ood_acc_within_pretraining": "out-of-domain accuracy on the items at pretraining difficulty",
                "ood_acc_beyond_pretraining": "out-of-domain accuracy on the items with more steps than pretraining",
                "correct_fraction": "share of the corpus's sequences with the right answer"}.get(head, "difference of out-of-domain accuracy")
        return "fraction", "higher", False, what
    if head in ("phi", "abs_phi", "phi_generated") or key.startswith("abs_phi_"):
        return "nats/token", "none", False, "centered log-likelihood log p + H under the base model (corpus mean of sequence means)"
    if head.startswith("spearman"):
        return "rank correlation", "higher", False, "Spearman over corpora of -|phi| vs out-of-domain accuracy after SFT on it"
    if head == "seconds" or key.startswith("train_time_ratio"):
        unit = "CPU s" if head == "seconds" else "ratio"
        return unit, "lower", True, "CPU time: corpus generation + fine-tuning at the chosen learning rate"
    if head == "chosen_lr":
        return "learning rate", "none", False, "learning rate picked on in-domain validation accuracy"
    if head == "lr_selection_margin":
        return "fraction", "none", False, "validation accuracy of the chosen rate minus the best other rate's"
    if head == "lr_selection_se":
        return "fraction", "none", False, "paired standard error of that margin over the validation problems"
    if head == "tuning_tie":
        return "flag", "none", False, ("1 if the default rate won by the tie rule (another rate's validation accuracy "
                                       "was higher by less than one standard error)")
    if key in ("ood_majority_share", "ood_n"):
        return ("fraction" if key != "ood_n" else "count"), "none", False, (
            "largest share of one answer within an out-of-domain family" if key != "ood_n"
            else "out-of-domain items per seed")
    if key.startswith("ood_gap_base_vs") or key.startswith("ood_acc_base_minus"):
        return "fraction", "none", False, "out-of-domain accuracy of the base model minus the offline-RL arm's"
    if head == "lr_at_grid_edge":
        return "flag", "none", False, "1 if the picked learning rate is the smallest or largest of the arm's grid"
    if head == "pref_stage_val_gain":
        return "fraction", "higher", False, ("validation accuracy after the preference stage at the chosen rate minus "
                                             "the SFT-on-chosen stage's alone (two-stage DPO / SimPO)")
    if head == "pref_stage_test_gain":
        return "fraction", "higher", False, ("in-domain test accuracy after the preference stage at the chosen rate "
                                             "minus the SFT-on-chosen stage's alone (two-stage DPO / SimPO)")
    if head == "tuned_interior":
        return "flag", "none", False, "1 if the picked learning rate is interior to the arm's grid"
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
        ood = read_parquet(job.input.ood)
        rows.append(per_seed(preds, grid, corpus, costs, arms, ood[ood["seed"] == seed],
                             int(p["pretrain"]["steps_range"][1]) if "pretrain" in p else None))
        tables.append(preds.groupby(["arm", "split"], as_index=False)["correct"].mean().assign(seed=seed))
    fold_base_gaps(rows)
    mf = MetricsFile("onpolicy_sft", p["scale"], replicate="seed", replicates=list(p["seeds"]))
    for key in rows[0]:
        unit, direction, timing, desc = _describe(key)
        mf.add(key, [r[key] for r in rows], unit=unit, direction=direction, timing=timing, description=desc)
    mf.write(job.output.metrics)
    summary = pd.DataFrame(rows).assign(seed=list(p["seeds"]))
    write_parquet(job.output.table, summary)
