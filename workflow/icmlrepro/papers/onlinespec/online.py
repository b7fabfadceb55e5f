"""Stage ``onlinespec.online``: every arm through the stream, chunk by chunk (evaluate, then update).

Per chunk and arm: the online loss and greedy acceptance of the current draft on the chunk's feedback
(``feedback.evaluate_draft``, equal to real speculative decoding, tested), measured wall time of real
speculative decoding on the first ``n_timed`` prompts of the chunk next to target-only decoding of
the same prompts (same process, arms in rotated order), then the arm's update. The comparator for
dynamic regret is, per chunk, the offline draft fitted to that chunk in hindsight
(``comparator_steps`` steps of momentum SGD).

The stage named ``tune`` runs the same loop on the tuning stream without timings, for every
single-learning-rate arm and every rate of the grid, and keeps the best rate per arm by acceptance
length: the same tuning budget for every baseline and method (the ensemble uses the grid as its rates).
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import read_json, read_parquet, write_json, write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.lm.model import load

from .feedback import Feedback, evaluate_draft
from .learners import ARMS, Arm, sgd_steps
from .speculative import speculative_generate, target_generate
from .stream import feedback_of

SINGLE_LR = ("ogd", "osd", "optimistic")


def chunks(df: pd.DataFrame):
    for c, rows in df.groupby("chunk", sort=True):
        yield int(c), rows.family.iloc[0], feedback_of(rows)


def make_arm(name: str, draft, p: dict, lr: float, seed: int, pad_id: int) -> Arm:
    return Arm(name, draft, lr, p["lr_grid"], p["momentum"], p["temperature"], p["steps_per_chunk"],
               p["batch_size"], derive_seed(seed, "onlinespec", "arm", name), pad_id)


def comparator_loss(draft, fb: Feedback, p: dict, seed: int, pad_id: int, lr: float) -> float:
    """Loss on the chunk of the draft fitted to that chunk in hindsight."""
    best = copy.deepcopy(draft)
    opt = torch.optim.SGD(best.parameters(), lr=lr, momentum=p["momentum"])
    sgd_steps(best, opt, fb, p["comparator_steps"], p["batch_size"], np.random.default_rng(seed), pad_id)
    return evaluate_draft(best, fb, p["gamma"], pad_id)["loss"]


def timed_decode(target, draft, fb: Feedback, n: int, p: dict, eos: int) -> tuple[float, int]:
    secs, toks = 0.0, 0
    for i in range(min(n, len(fb.ids))):
        r = (speculative_generate(target, draft, fb.ids[i][: fb.start[i]], p["max_new_tokens"], p["gamma"], eos)
             if draft is not None else target_generate(target, fb.ids[i][: fb.start[i]], p["max_new_tokens"], eos))
        secs += r.seconds
        toks += len(r.tokens)
    return secs, toks


def run_stream(df: pd.DataFrame, target, draft, tok, p: dict, seed: int, lrs: dict, timed: bool) -> pd.DataFrame:
    pad, eos = tok.pad_token_id, tok.eos_token_id
    arms = {a: make_arm(a, draft, p, lrs.get(a, p["lr_grid"][0]), seed, pad) for a in lrs.get("_arms", ARMS)}
    names = list(arms)
    rows = []
    for c, family, fb in chunks(df):
        base = {"seed": seed, "chunk": c, "family": family}
        if timed:
            t_secs, t_toks = timed_decode(target, None, fb, p["n_timed"], p, eos)
            comp = comparator_loss(draft, fb, p, derive_seed(seed, "onlinespec", "comparator", c), pad,
                                   max(p["lr_grid"]))
        k = c % len(names)
        for name in names[k:] + names[:k]:
            ev = evaluate_draft(arms[name].draft, fb, p["gamma"], pad)
            row = {**base, "arm": name, "loss": ev["loss"], "acceptance_length": ev["acceptance_length"],
                   "accept_rate": ev["accept_rate"], "rounds": ev["rounds"], "tokens": ev["tokens"]}
            if timed:
                s_secs, s_toks = timed_decode(target, arms[name].draft, fb, p["n_timed"], p, eos)
                row.update({"spec_seconds": s_secs, "spec_tokens": s_toks, "target_seconds": t_secs,
                            "target_tokens": t_toks, "comparator_loss": comp})
            if name == "ensemble":
                row["ensemble_weights"] = list(map(float, arms[name].weights))
            rows.append(row)
        for name in names:
            arms[name].update(fb)
    return pd.DataFrame(rows)


@torch.no_grad()
def cost_ratio(target, draft, tok, reps: int = 30) -> dict:
    """Measured seconds of one single-token decode step of the draft and of the target."""
    out = {}
    for role, m in (("target", target), ("draft", draft)):
        ids = torch.tensor([tok("add 1 2 3 ?")["input_ids"]])
        res = target_generate(m, ids[0].tolist(), reps, -1)
        out[f"{role}_step_seconds"] = res.seconds / reps
    return out


def _models(job):
    """The job's settings, seed (seeded), target, tokenizer and offline draft."""
    seed = int(job.wildcards.seed)
    seed_everything(seed)
    target, tok = load(job.input.target)
    draft, _ = load(job.input.draft)
    return job.params, seed, target, tok, draft


def run(job) -> None:
    p, seed, target, tok, draft = _models(job)
    lrs = read_json(job.input.lrs)["best_lr"]
    stream = read_parquet(job.input.stream)
    warm = feedback_of(stream.iloc[:1])  # first-call costs (allocations, dispatch caches) stay out of timings
    timed_decode(target, draft, warm, 1, p, tok.eos_token_id)
    timed_decode(target, None, warm, 1, p, tok.eos_token_id)
    df = run_stream(stream, target, draft, tok, p, seed, lrs, timed=True)
    write_parquet(job.output.table, df)
    write_json(job.output.costs, {"seed": seed, **cost_ratio(target, draft, tok)})


def run_tune(job) -> None:
    p, seed, target, tok, draft = _models(job)
    df = read_parquet(job.input.stream)
    rows = []
    for arm in SINGLE_LR:
        for lr in p["lr_grid"]:
            res = run_stream(df, target, draft, tok, p, seed, {arm: lr, "_arms": [arm]}, timed=False)
            rows.append({"arm": arm, "lr": lr, "acceptance_length": float(res.tokens.sum() / res.rounds.sum())})
    table = pd.DataFrame(rows)
    best = {a: float(g.sort_values(["acceptance_length", "lr"], ascending=[False, True]).lr.iloc[0])
            for a, g in table.groupby("arm")}
    write_json(job.output.lrs, {"tuning_seed": seed, "grid": table.to_dict("records"), "best_lr": best})
