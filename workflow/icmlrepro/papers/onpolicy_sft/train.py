"""Stage ``onpolicy_sft.train`` (one job per seed): build the corpora from the base model, then
fine-tune every arm over the same learning-rate grid, pick each arm's rate on in-domain validation
accuracy, and score the pick on the in-domain test set and the out-of-domain families.

One job per seed (not per arm x seed): every arm needs the seed's corpora, and a job costs seconds of
interpreter start-up on a 2-core machine. The base model's own scores are recorded as arm ``base``
(the no-fine-tuning reference).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from icmlrepro.core.device import torch_device
from icmlrepro.core.io import read_parquet, write_json, write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.core.tuning import accuracy_se, pick_with_ties
from icmlrepro.lm.data import tasks_from_table
from icmlrepro.lm.tasks import Task

log = logging.getLogger("icmlrepro.onpolicy_sft")


def score(model, tokenizer, tasks: list[Task], s: dict) -> pd.DataFrame:
    from icmlrepro.lm.evaluate import evaluate_model

    df, _ = evaluate_model(model, tokenizer, tasks, s["corpora"]["gen_batch"], s["corpora"]["max_new_tokens"])
    return df[["family", "difficulty", "correct"]]


def arm_grid(ft: dict, arm: str) -> list[float]:
    """An arm's learning rates: its default rate times the shared factors (every arm tries as many rates)."""
    return [float(ft["default_lr"][arm]) * float(f) for f in ft["lr_factors"]]


def pick(scored: list[tuple], default_lr: float, tolerance: float = 0.0) -> tuple:
    """The (val accuracy, lr, ...) entry with the best validation accuracy; rates within ``tolerance`` of the best
    (the selection's standard error) tie, and a tie goes to the default rate, else the tied rate nearest it (in
    log scale), then to the smaller rate (``core.tuning.pick_with_ties``)."""
    return scored[pick_with_ties([s[1] for s in scored], [s[0] for s in scored], default_lr,
                                 tolerance=tolerance).index]


def pick_tolerance(scored: list[tuple], n_val: int) -> float:
    """The selection's noise: the standard error of the best validation accuracy on ``n_val`` problems."""
    return accuracy_se(max(s[0] for s in scored), n_val)


def _split(target: pd.DataFrame, seed: int, split: str) -> list[Task]:
    return tasks_from_table(target[(target["seed"] == seed) & (target["split"] == split)])


def run(job) -> None:
    from icmlrepro.lm.model import load

    from .corpora import build
    from .arms import ARMS
    from .finetune import finetune, training_rows

    p = job.params
    seed = int(job.wildcards.seed)
    seed_everything(derive_seed(seed, "onpolicy_sft", "train"))
    base, tok = load(job.input.model, torch_device())
    target, ood_df = read_parquet(job.input.target), read_parquet(job.input.ood)
    ood = tasks_from_table(ood_df[ood_df["seed"] == seed])
    val, test = _split(target, seed, "val"), _split(target, seed, "test")
    train_df = target[(target["seed"] == seed) & (target["split"] == "train")]
    tasks = tasks_from_table(train_df)
    styled = tasks_from_table(train_df.assign(trace=train_df["styled_trace"]))

    corpus, pairs, gen_seconds = build(base, tok, tasks, styled, p["corpora"], derive_seed(seed, "gen"))
    log.info("seed %d corpora: %s; %d pairs; generation %s", seed, corpus["corpus"].value_counts().to_dict(),
             len(pairs), {k: round(v, 2) for k, v in gen_seconds.items()})

    preds, grid = [], []
    stage_cache: dict = {}  # preference arms' SFT-on-chosen stage, trained once per seed (shared by DPO and SimPO)

    def record(arm, lr, model):
        for split, ts in (("test", test), ("ood", ood)):
            preds.append(score(model, tok, ts, p).assign(arm=arm, lr=lr, split=split))

    record("base", float("nan"), base)
    for arm in p["arms"]:
        default_lr = p["finetune"]["default_lr"][arm]
        source = ARMS[arm][0]
        n = len(pairs) if source == "pairs" else len(training_rows(corpus, source))
        scored = []
        for lr in arm_grid(p["finetune"], arm):
            if n == 0:  # e.g. no correct sample at all: the arm has no data, its scores are NaN
                grid.append({"arm": arm, "lr": lr, "val_acc": float("nan"), "seconds": float("nan"), "n": 0,
                             "final_loss": float("nan"), "val_hits": [], "chosen": False})
                continue
            model, curve, secs = finetune(base, tok, arm, corpus, pairs, lr, derive_seed(seed, "ft", arm), p,
                                          stage_cache, derive_seed(seed, "ft", "pref_sft"), tasks)
            hits = score(model, tok, val, p)["correct"].astype(int).tolist()
            acc = float(np.mean(hits))
            grid.append({"arm": arm, "lr": lr, "val_acc": acc, "seconds": secs, "n": n,
                         "final_loss": float(np.mean(curve[-10:])), "val_hits": hits, "chosen": False})
            log.info("seed %d %s lr %g: val acc %.3f, %.1fs, %d examples", seed, arm, lr, acc, secs, n)
            scored.append((acc, lr, model))
        if scored:
            tol = pick_tolerance(scored, len(val))
            best = pick(scored, default_lr, tol)
            by_score = pick(scored, default_lr)  # exact ties only: the pick without the tie rule
            for row in grid:
                if row["arm"] == arm:
                    row["tolerance"] = tol
                    row["moved_by_tie"] = bool(best[1] != by_score[1])
                    if row["lr"] == best[1]:
                        row["chosen"] = True
            record(arm, best[1], best[2])
    for stage_model, _, stage_pairs, pair_source in stage_cache.values():  # the SFT-on-chosen stage alone
        stage_acc = float(score(stage_model, tok, val, p)["correct"].mean())
        stage_test = float(score(stage_model, tok, test, p)["correct"].mean())
        for row in grid:
            if ARMS[row["arm"]][0] == "pairs":
                row["sft_stage_val_acc"] = stage_acc
                row["sft_stage_test_acc"] = stage_test
                row["n_pref_pairs"] = len(stage_pairs)  # the preference stage's pairs (re-sampled: pair_source sft)
                row["pref_pairs_source"] = pair_source
    write_parquet(job.output.predictions, pd.concat(preds, ignore_index=True).assign(seed=seed))
    write_parquet(job.output.grid, pd.DataFrame(grid).assign(seed=seed))
    write_parquet(job.output.corpus, corpus.assign(seed=seed))
    write_json(job.output.costs, {"seed": seed, "generation_seconds": gen_seconds, "n_pairs": len(pairs)})
