"""Stage ``event2vec.train``: one job per arm, the same budget for every arm.

Each arm tunes its learning rate over the same grid on the first seed (its training set, validation accuracy at
the full event budget), then trains every seed on that seed's own training set (data.py) at the chosen rate with
equal steps and batch. Rates whose validation accuracy
is within one standard error of the best (``accuracy_se`` on the validation items) are a tie, and a tie goes
to the arm's default rate (``lr_default``, the same for every arm; ``core.tuning.pick_with_ties``). Training draws, per
stream, an event budget from the evaluation's budgets (``event_budgets`` and ``max_events``) and a resolution factor
from ``res_factors``, uniformly: one model per arm covers every evaluated setting, in distribution, and every
arm sees the same kind of stream (an assumption; the paper trains one model per setting). A log-uniform
budget was tried first: event2vec's time-gap embedding then met mostly short streams in training and lost
accuracy on the full-budget test (the gaps shrink as events are added).

The draw was once one budget and one factor per batch: the BatchNorm of the dense baselines then normalised
batches of one setting at a time (8 events in one batch, 256 in the next) while testing on running averages
over all of them, and the frame CNN's accuracy swung with the training seed (seed-0 data, 5 initialisations:
test 0.42 +- 0.07 sd at lr 0.01; per-stream draws: 0.61 +- 0.03 at lr 0.03), which left the baseline_band gate
undecided at 8 seeds. Per-stream draws make every batch a sample of the same mixture. The token models
(event2vec, point set) pad a batch to its longest stream; their per-stream outputs do not depend on the rest of the
batch, so a batch is run in length groups (``LENGTH_GROUPS``) and the logits put back in order: the same loss and
gradient as the padded batch (a test checks it), with less padding. The ``event2vec_shuffled_t`` control trains and tests on streams whose timestamps were shuffled.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from icmlrepro.core.io import read_json, read_parquet, write_json, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.core.tuning import accuracy_se, at_grid_edge, pick_with_ties

from . import representations as R
from .models import ARMS, build, inputs
from .simulator import CLASSES, EVENT_DTYPE
from .workflow_inputs import LR_FROM


def load_streams(events_path, samples_path) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """The sample table and one structured event array per sample (events are stored sample-major)."""
    samples, events = read_parquet(samples_path), read_parquet(events_path, columns=list(EVENT_DTYPE.names))
    ev = np.zeros(len(events), EVENT_DTYPE)
    for f in EVENT_DTYPE.names:
        ev[f] = events[f].to_numpy()
    bounds = np.cumsum(samples["n_events"].to_numpy())[:-1]
    return samples, np.split(ev, bounds)


def prepare(ev: np.ndarray, arm: str, budget: int, factor: int, sensor: int, rng: np.random.Generator):
    """What the arm's model sees of one stream: subsample, (shuffle timestamps for the control,) coarsen.

    The subsample comes first, so the control keeps exactly the events the other arms get."""
    ev = R.subsample(ev, budget, rng)
    if ARMS[arm][1]:
        ev = R.shuffle_time(ev, rng)
    return R.reduce_resolution(ev, factor, sensor)


def predict(model, arm: str, streams, s: dict, budget: int, factor: int, key: str, chunk: int = 64,
            ablate: str | None = None) -> np.ndarray:
    """Predicted classes; the event draw depends on (sample index, budget, factor, key) only, so every arm
    and every seed sees exactly the same events. ``ablate`` names a test-time ablation of event2vec's tokens
    (``evaluate.ablated_inputs``)."""
    model.eval()
    preds = []
    with torch.inference_mode():
        for i in range(0, len(streams), chunk):
            batch = [prepare(ev, arm, budget, factor, s["sensor"],
                             np.random.default_rng(derive_seed(i + j, "event2vec", key, budget, factor)))
                     for j, ev in enumerate(streams[i:i + chunk])]
            x = inputs(arm, batch, s)
            if ablate is not None:
                from .evaluate import ablated_inputs

                x = ablated_inputs(x, ablate, np.random.default_rng(derive_seed(i, "event2vec", "ablate", ablate)))
            preds.append(model(**x).argmax(1).numpy())
    return np.concatenate(preds) if preds else np.zeros(0, int)


#: streams of a token model's batch are run in groups padded to at most these lengths (then the rest): cost only
LENGTH_GROUPS = (32, 128)


def batch_logits(model, arm: str, batch: list, s: dict) -> torch.Tensor:
    """The model's logits for a list of prepared streams, in order. Token models (no coupling between the streams of
    a batch: padding-invariant, no batch statistics) run in length groups so that short streams are not padded to
    the longest one; the dense CNNs (BatchNorm couples the batch) run on the whole batch at once."""
    if ARMS[arm][0] not in ("event2vec", "point"):
        return model(**inputs(arm, batch, s))
    group = np.searchsorted(np.asarray(LENGTH_GROUPS), [len(ev) for ev in batch])
    order, parts = [], []
    for g in np.unique(group):
        idx = np.flatnonzero(group == g)
        order += idx.tolist()
        parts.append(model(**inputs(arm, [batch[i] for i in idx], s)))
    return torch.cat(parts)[torch.as_tensor(np.argsort(order))]


def train_model(arm: str, streams, labels: np.ndarray, s: dict, seed: int, lr: float):
    """One model of ``arm`` trained for ``s['steps']`` steps; returns it and its loss curve."""
    rng = seed_everything(derive_seed(seed, "event2vec", "train", arm))
    torch.manual_seed(derive_seed(seed, "event2vec", "init", arm))
    model = build(arm, len(CLASSES), s)
    # foreach: the same AdamW update as the per-tensor loop, bit for bit (checked on event2vec and the point set),
    # in a few fused calls (cost only)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, foreach=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(s["steps"], 1), pct_start=0.1)
    y_all = torch.as_tensor(labels)
    budgets = sorted({*s["event_budgets"], s["max_events"]})
    losses = []
    for _ in range(s["steps"]):
        model.train()
        b = rng.choice(len(streams), size=min(s["batch"], len(streams)), replace=False)
        budget = rng.choice(budgets, size=len(b))  # per stream: every batch mixes the evaluated settings
        factor = rng.choice(s["res_factors"], size=len(b))
        batch = [prepare(streams[i], arm, int(n), int(f), s["sensor"], rng) for i, n, f in zip(b, budget, factor)]
        loss = F.cross_entropy(batch_logits(model, arm, batch, s), y_all[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return model, losses


def run(job) -> None:
    # subnormal floats (tiny decays of the gated recurrence, below 1.2e-38) are flushed to zero: they are slow on
    # x86 CPUs and carry nothing at float32 precision (cost only)
    torch.set_flush_denormal(True)
    s, arm = job.params, job.wildcards.arm
    samples, streams = load_streams(job.input.events, job.input.samples)
    split, of_seed = samples["split"].to_numpy(), samples["seed"].to_numpy()
    labels = samples["label"].to_numpy()
    seeds = list(s["seeds"])

    def train_set(seed):  # every seed trains on its own training set (data.py)
        idx = np.flatnonzero((split == "train") & (of_seed == seed))
        if not len(idx):
            raise ValueError(f"event2vec: no training streams for seed {seed} (rerun event2vec_data)")
        return [streams[i] for i in idx], labels[idx]

    va = np.flatnonzero(split == "val")  # drawn with the first seed's sets: the pick is made there
    va_streams = [streams[i] for i in va]
    tuning, models = [], {}
    tr_streams, tr_labels = train_set(seeds[0])
    if "tuned" in job.input:  # the control: the method's tuned rate, nothing else changed (LR_FROM)
        src = read_json(job.input.tuned)
        out = {}
        for seed in seeds:
            t0 = time.perf_counter()
            model, losses = train_model(arm, *train_set(seed), s, seed, src["chosen_lr"])
            out[seed] = {"state": model.state_dict(), "losses": losses, "train_seconds": time.perf_counter() - t0}
        write_torch(job.output.models, {"arm": arm, "lr": src["chosen_lr"], "seeds": out})
        write_json(job.output.tuning, {"arm": arm, "grid": [], "chosen_lr": src["chosen_lr"], "lr_from": LR_FROM[arm],
                                       **{k: src[k] for k in ("best_lr_by_score", "tied", "selection_se", "val_items",
                                                              "default_lr", "tie_to_default", "at_grid_edge")}})
        return
    for lr in s["lr_grid"]:
        t0 = time.perf_counter()
        model, losses = train_model(arm, tr_streams, tr_labels, s, seeds[0], lr)
        acc = float((predict(model, arm, va_streams, s, s["max_events"], 1, "val") == labels[va]).mean())
        tuning.append({"lr": lr, "val_acc": acc, "final_loss": float(np.mean(losses[-10:])) if losses else None,
                       "train_seconds": time.perf_counter() - t0})
        models[(seeds[0], lr)] = (model, losses, tuning[-1]["train_seconds"])
    scores = [r["val_acc"] for r in tuning]
    se = accuracy_se(max(scores), len(va))
    pick = pick_with_ties(s["lr_grid"], scores, s["lr_default"], higher_is_better=True, tolerance=se)
    best = pick.value
    out = {}
    for seed in seeds:
        if (seed, best) in models:
            model, losses, secs = models[(seed, best)]
        else:
            t0 = time.perf_counter()
            model, losses = train_model(arm, *train_set(seed), s, seed, best)
            secs = time.perf_counter() - t0
        out[seed] = {"state": model.state_dict(), "losses": losses, "train_seconds": secs}
    write_torch(job.output.models, {"arm": arm, "lr": best, "seeds": out})
    write_json(job.output.tuning, {"arm": arm, "grid": tuning, "chosen_lr": best, "best_lr_by_score": pick.best,
                                   "tied": pick.tied, "selection_se": se, "val_items": int(len(va)),
                                   "default_lr": s["lr_default"], "tie_to_default": bool(pick.moved_by_tie),
                                   "at_grid_edge": at_grid_edge(best, s["lr_grid"])})
