"""Greedy evaluation of every arm and seed (plus the untrained policy and trivial references); metrics.json.

Per split (``test_id``: the training law, cue present; ``test_broken``: the cue points to a wrong answer):
  accuracy (overall and per task: the stand-ins for benchmarks), evidence IoU (the predicted evidence is one
  cell and so is the target object, so IoU is 1 on a hit and 0 otherwise), format rate, shortcut rate
  (answer correct while the evidence misses the target), and faithfulness = accuracy drop when the
  predicted evidence cell is masked (question and evidence location fixed, re-answered greedily).
References: chance (1 / n_values), the cue-only rule (answer the background tint: the shortcut
itself), and the warm-started policy every arm starts from (``start``: before any RL).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import read_json, read_parquet, read_torch, write_parquet
from icmlrepro.core.metrics import MetricsFile

from .arms import START
from .data import TASKS, load_split, tint_answer_share
from .model import GVRPolicy, greedy_act, mask_cells
from .train import new_policy, tensors

TEST_SPLITS = ("test_id", "test_broken")  # never "val": it only picks learning rates


@torch.no_grad()
def greedy(policy: GVRPolicy, split: dict) -> pd.DataFrame:
    """One row per test item: predicted evidence and answer, factual and with the evidence masked."""
    x, q, y, t = tensors(split)
    e, a = greedy_act(policy, x, q)
    a_masked = policy.answer_logits(mask_cells(x, e), q, e).argmax(-1)
    return pd.DataFrame({"item": np.arange(len(y)), "task": np.asarray(list(TASKS))[split["task"]],
                         "evidence": e.numpy(), "answer": a.numpy(), "answer_masked": a_masked.numpy(),
                         "correct": (a == y).numpy(), "correct_masked": (a_masked == y).numpy(),
                         "hit": (e == t).numpy(), "valid": (e < x.shape[1]).numpy()})


def summarise(pred: pd.DataFrame) -> dict[str, float]:
    """The scores of one policy on one split (see the module docstring)."""
    out = {"acc": pred["correct"].mean(), "iou": pred["hit"].mean(), "format": pred["valid"].mean(),
           "shortcut": (pred["correct"] & ~pred["hit"]).mean(),
           "mask_drop": pred["correct"].mean() - pred["correct_masked"].mean()}
    out |= {f"acc.{task}": g["correct"].mean() for task, g in pred.groupby("task")}
    return {k: float(v) for k, v in out.items()}


def score_all(job, s: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores: one row per arm x seed x split x score, predictions of every item)."""
    data = {seed: {sp: load_split(job.input[sp], seed) for sp in TEST_SPLITS} for seed in s["seeds"]}
    rows, preds = [], []
    cks = {a: read_torch(job.input[a]) for a in s["arms"]}
    for arm in [START, *s["arms"]]:
        for seed in s["seeds"]:
            splits = data[seed]  # each seed's own test scenes
            policy = new_policy(s, seed)
            if arm == START:  # identical in every arm's checkpoint: read the first one
                policy.load_state_dict(cks[s["arms"][0]]["seeds"][seed]["start"])
            else:
                policy.load_state_dict(cks[arm]["seeds"][seed]["state"])
                rows.append({"arm": arm, "seed": seed, "split": "train", "score": "train_seconds",
                             "value": cks[arm]["seeds"][seed]["train_seconds"]})
            for sp, split in splits.items():
                pred = greedy(policy.eval(), split)
                preds.append(pred.assign(arm=arm, seed=seed, split=sp))
                rows += [{"arm": arm, "seed": seed, "split": sp, "score": k, "value": v}
                         for k, v in summarise(pred).items()]
    return pd.DataFrame(rows), pd.concat(preds, ignore_index=True)


def late_std(log: pd.DataFrame, col: str = "train_acc") -> float:
    """Std of a training curve over the last quarter of the iterations (instability late in training)."""
    n = int(log["iteration"].max()) + 1
    return float(log.loc[log["iteration"] >= n - max(n // 4, 2), col].std(ddof=1))


def build_metrics(scores: pd.DataFrame, logs: pd.DataFrame, splits: dict, s: dict, tuning: dict) -> MetricsFile:
    seeds = list(s["seeds"])
    mf = MetricsFile("cofactgvr", s["scale"], replicate="seed", replicates=seeds)
    v = scores.set_index(["arm", "split", "score", "seed"])["value"].sort_index()

    def vals(arm, split, score):
        return np.array([float(v.loc[(arm, split, score, sd)]) for sd in seeds])

    units = {"acc": ("accuracy", "higher"), "iou": ("IoU", "higher"), "format": ("share", "higher"),
             "shortcut": ("share of items", "lower"), "mask_drop": ("accuracy drop", "higher")}
    what = {"acc": "answer accuracy", "iou": "evidence IoU with the target object (one cell: hit rate)",
            "format": "share of answers with a valid evidence cell",
            "shortcut": "shortcut rate (answer correct, evidence misses the target)",
            "mask_drop": "faithfulness: accuracy drop when the predicted evidence cell is masked"}
    names = {START: "warm-started policy before RL"} | {a: f"arm {a}" for a in s["arms"]}
    for arm, name in names.items():
        for sp in TEST_SPLITS:
            for score, (unit, direction) in units.items():
                mf.add(f"{score}.{arm}.{sp}", vals(arm, sp, score), unit=unit, direction=direction,
                       description=f"{name}: {what[score]}, split {sp}")
            for task in TASKS:
                mf.add(f"acc.{arm}.{sp}.{task}", vals(arm, sp, f"acc.{task}"), unit="accuracy", direction="higher",
                       description=f"{name}: answer accuracy on task {task}, split {sp}")
        mf.add(f"acc.{arm}.all", np.mean([vals(arm, sp, "acc") for sp in TEST_SPLITS], 0), unit="accuracy",
               direction="higher", description=f"{name}: answer accuracy over both test splits (equal sizes)")
    for arm in s["arms"]:
        lg = logs[logs["arm"] == arm]
        mf.add(f"late_train_acc_std.{arm}", [late_std(lg[lg["seed"] == sd]) for sd in seeds], unit="accuracy (std)",
               direction="lower", description=f"arm {arm}: std of the training answer accuracy over the last quarter "
                                              f"of the iterations (training stability)")
        mf.add(f"updates_kept_fraction.{arm}", [float(lg.loc[lg["seed"] == sd, "kept_fraction"].mean()) for sd in seeds],
               unit="share", direction="none", description=f"arm {arm}: share of rollouts kept for updates (Q-PAS filter; 1 without)")
        tu = tuning[arm]
        mf.add(f"lr.{arm}", [float(tu["chosen_lr"])] * len(seeds), unit="learning rate", direction="none",
               description=f"arm {arm}: GRPO learning rate picked from {sorted(s['lr_grid'])} by greedy answer accuracy "
                           f"on the val split (training law) of seed {tu['seed']}; used for every seed")
        mf.add(f"lr_at_grid_edge.{arm}", [float(tu["at_grid_edge"])] * len(seeds), unit="flag", direction="lower",
               description=f"arm {arm}: 1 if the picked learning rate is the smallest or largest of the grid")
        picked = next(r["val_acc"] for r in tu["grid"] if r["lr"] == tu["chosen_lr"])
        mf.add(f"val_acc.{arm}", [float(picked)] * len(seeds), unit="accuracy",
               direction="higher", description=f"arm {arm}: val accuracy of seed {tu['seed']} at the picked rate "
                                               f"(the tuning score; not a test number)")
        mf.add(f"val_acc_se.{arm}", [float(tu["val_acc_se"])] * len(seeds), unit="accuracy", direction="none",
               description=f"arm {arm}: standard error of the best val accuracy (sqrt(p(1-p)/n_val)); rates within "
                           f"it of the best are tied")
        mf.add(f"tuning_ties.{arm}", [float(tu["ties"])] * len(seeds), unit="rates", direction="none",
               description=f"arm {arm}: other rates of the grid tied with the best val accuracy (within one standard "
                           f"error); ties go to the default rate {s['lr_default']} (or the tied rate nearest to it)")
        mf.add(f"train_seconds.{arm}", vals(arm, "train", "train_seconds"), unit="s", direction="lower", timing=True,
               description=f"arm {arm}: wall time of training one seed (equal rollouts and gradient steps in every arm)")
        if arm != "grpo" and "grpo" in s["arms"]:
            for score, sign, label in (("shortcut", -1, "reduction"), ("iou", 1, "gain"), ("mask_drop", 1, "gain")):
                sp = "test_id"
                mf.add(f"{score}_{label}_vs_grpo.{arm}", sign * (vals(arm, sp, score) - vals("grpo", sp, score)),
                       unit=units[score][0], direction="higher",
                       description=f"{what[score]} on test_id: arm {arm} vs plain GRPO "
                                   f"({'GRPO minus arm' if sign < 0 else 'arm minus GRPO'}, per seed)")
    for sp in TEST_SPLITS:
        mf.add(f"acc.cue_only.{sp}", [tint_answer_share(splits[sd][sp]) for sd in seeds], unit="accuracy",
               direction="higher", description=f"trivial reference: answer the background tint (the shortcut), split {sp} "
                                               f"(each seed's own test scenes)")
    mf.add("acc.chance", [1.0 / s["n_values"]] * len(seeds), unit="accuracy", direction="higher",
           description="trivial reference: a uniformly random answer")
    mf.add("iou.chance", [1.0 / s["grid"] ** 2] * len(seeds), unit="IoU", direction="higher",
           description="trivial reference: a uniformly random evidence cell")
    return mf


def run(job) -> None:
    s = job.params
    scores, preds = score_all(job, s)
    logs = pd.concat([read_parquet(job.input[f"log_{a}"]) for a in s["arms"]], ignore_index=True)
    splits = {seed: {sp: load_split(job.input[sp], seed) for sp in TEST_SPLITS} for seed in s["seeds"]}
    write_parquet(job.output.scores, scores)
    write_parquet(job.output.curves, logs)
    write_parquet(job.output.predictions, preds[(preds["item"] < s["n_examples"])])
    tuning = {a: read_json(job.input[f"tuning_{a}"]) for a in s["arms"]}
    build_metrics(scores, logs, splits, s, tuning).write(job.output.metrics)
