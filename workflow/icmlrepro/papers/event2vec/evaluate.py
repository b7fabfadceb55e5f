"""Stage ``event2vec.evaluate``: accuracy sweeps, parameters, throughput and latency; metrics.json.

Accuracy is measured on the test split (held-out background photographs) at the full event budget, over
the event-budget sweep and over the resolution sweep; every seed's models are tested on that seed's own test
set (data.py), and within a seed the event draws are shared by every arm.
Speed is end to end, raw stream to logits (subsampling and each arm's representation building included),
all arms in this one process, interleaved round-robin with a warm-up pass excluded, the median of
``timing_repeats`` rounds: throughput on batches of ``throughput_batch`` streams, latency at batch 1.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.device import torch_device
from icmlrepro.core.io import read_json, read_torch, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.seeding import derive_seed

from . import representations as R
from .models import build, inputs, n_params
from .simulator import CLASSES, TIME_DEFINED
from .train import load_streams, predict, prepare

EVENT2VEC, CONTROL = "event2vec", "event2vec_shuffled_t"
BASELINES = ("frame_cnn", "voxel_cnn", "point_set")
DENSE = ("frame_cnn", "voxel_cnn")
#: test-time ablations of the trained event2vec model: which part carries the event order
ABLATIONS = {"dt_permuted": "the time gaps permuted within each stream (events kept in order)",
             "order_reversed": "the events fed in reverse order (time gaps reversed with them)"}


def ablated_inputs(x: dict, mode: str, rng: np.random.Generator) -> dict:
    """event2vec's tokens with one order signal removed: ``dt_permuted`` scrambles which gap goes with which
    event (the time embedding's information, the recurrence still reads the events in order);
    ``order_reversed`` feeds each stream back to front (what a model blind to order would not notice)."""
    x = {k: v.clone() for k, v in x.items()}
    for i, n in enumerate(x["mask"].sum(1).tolist()):
        if mode == "dt_permuted":
            x["dt"][i, :n] = x["dt"][i, torch.as_tensor(rng.permutation(n))]
        else:
            for k in ("pyx", "dt", "intensity"):
                x[k][i, :n] = x[k][i, :n].flip(0)
    return x


def test_sets(samples: pd.DataFrame, streams, seeds) -> dict:
    """{seed: (test streams, labels)}: every seed's own test set (data.py draws one per seed)."""
    out = {}
    for seed in seeds:
        idx = np.flatnonzero((samples["split"].to_numpy() == "test") & (samples["seed"].to_numpy() == seed))
        if not len(idx):
            raise ValueError(f"event2vec: no test streams for seed {seed} (rerun event2vec_data)")
        out[seed] = ([streams[i] for i in idx], samples["label"].to_numpy()[idx])
    return out


def load_models(job, s: dict) -> dict:
    """{(arm, seed): model} for every arm and seed, in eval mode."""
    models = {}
    for arm in s["arms"]:
        ck = read_torch(job.input[arm])
        for seed in s["seeds"]:
            m = build(arm, len(CLASSES), s)
            m.load_state_dict(ck["seeds"][seed]["state"])
            models[(arm, seed)] = m.eval()
    return models


def accuracy_table(models: dict, tests: dict, s: dict) -> pd.DataFrame:
    """One row per (arm, seed, sweep, value): accuracy overall and on the time-defined classes; ``tests`` maps
    a seed to its own test set (streams, labels)."""
    settings = [("full", s["max_events"], 1)]
    settings += [("events", n, 1) for n in s["event_budgets"]]
    settings += [("resolution", s["max_events"], f) for f in s["res_factors"]]
    rows = []
    for (arm, seed), model in models.items():
        streams, labels = tests[seed]
        timed = np.isin(labels, [CLASSES.index(c) for c in TIME_DEFINED])
        extra = [(abl, s["max_events"], 1) for abl in ABLATIONS] if arm == EVENT2VEC else []
        done = {}  # the full budget at factor 1 is also the resolution sweep's first point: predicted once
        for sweep, budget, factor in settings + extra:
            ablate = sweep if sweep in ABLATIONS else None
            if (budget, factor, ablate) not in done:
                done[(budget, factor, ablate)] = predict(model, arm, streams, s, budget, factor, "test", ablate=ablate) == labels
            hit = done[(budget, factor, ablate)]
            rows.append({"arm": arm, "seed": seed, "sweep": sweep, "budget": budget, "factor": factor,
                         "resolution": s["sensor"] // factor, "acc": float(hit.mean()),
                         "acc_time_defined": float(hit[timed].mean())})
    return pd.DataFrame(rows)


def kmeans_table(models: dict, tests: dict, s: dict) -> pd.DataFrame:
    """event2vec at the smallest budgets fed k-means centroids (with intensities) instead of a random
    subsample of the same size: the paper's optional compression, no retraining (each seed's own test set)."""
    rows = []
    for k in s["kmeans_budgets"]:
        for seed in s["seeds"]:
            streams, labels = tests[seed]
            comp = [R.kmeans_compress(ev, k, s["sensor"], seed=derive_seed(i, "event2vec", "kmeans")) for i, ev in
                    enumerate(streams)]
            x = R.event_tokens([c[0] for c in comp], s["sensor"], [c[1] for c in comp])
            with torch.inference_mode():
                pred = models[(EVENT2VEC, seed)](**x).argmax(1).numpy()
            rows.append({"arm": EVENT2VEC, "seed": seed, "budget": k, "acc": float((pred == labels).mean())})
    return pd.DataFrame(rows)


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def speed_table(models: dict, tests: dict, s: dict, device) -> pd.DataFrame:
    """Median end-to-end throughput (streams/s) and latency (ms per stream at batch 1) per arm and seed (on the
    first streams of that seed's test set)."""
    arms, rows = list(s["arms"]), []
    for seed in s["seeds"]:
        batch = tests[seed][0][: s["throughput_batch"]]
        single = tests[seed][0][: s["latency_samples"]]
        def run_arm(arm, group):
            model = models[(arm, seed)].to(device)
            rng = np.random.default_rng(0)
            x = inputs(arm, [prepare(ev, arm, s["max_events"], 1, s["sensor"], rng) for ev in group], s)
            with torch.inference_mode():
                model(**{k: v.to(device) for k, v in x.items()}).argmax(1).cpu()

        for arm in arms:  # warm-up, not timed
            run_arm(arm, batch)
        tput, lat = {a: [] for a in arms}, {a: [] for a in arms}
        for r in range(s["timing_repeats"]):
            for arm in arms[r % len(arms):] + arms[: r % len(arms)]:  # rotate the order each round
                tput[arm].append(len(batch) / _seconds(lambda: run_arm(arm, batch)))
                lat[arm].append(1000 * np.mean([_seconds(lambda: run_arm(arm, [ev])) for ev in single]))
        rows += [{"arm": a, "seed": seed, "throughput": float(np.median(tput[a])), "latency_ms": float(np.median(lat[a]))}
                 for a in arms]
        for arm in arms:
            models[(arm, seed)].cpu()
    return pd.DataFrame(rows)


def build_metrics(acc: pd.DataFrame, km: pd.DataFrame, speed: pd.DataFrame, params: dict, tuning: dict,
                  s: dict, device: str) -> MetricsFile:
    seeds = list(s["seeds"])
    mf = MetricsFile("event2vec", s["scale"], replicate="seed", replicates=seeds)
    a = acc.set_index(["arm", "sweep", "budget", "factor", "seed"]).sort_index()
    full = ("full", s["max_events"], 1)

    def vals(arm, setting=full, col="acc"):
        return np.array([float(a.loc[(arm, *setting, sd), col]) for sd in seeds])

    chance = 1.0 / len(CLASSES)
    mf.add("chance", [chance] * len(seeds), unit="accuracy", direction="none",
           description=f"chance accuracy of the {len(CLASSES)}-class task (the trivial reference)")
    for arm in s["arms"]:
        mf.add(f"acc.{arm}", vals(arm), unit="accuracy", direction="higher",
               description=f"{arm}: test accuracy at the full budget ({s['max_events']} events, {s['sensor']} px)")
        mf.add(f"acc_time_defined.{arm}", vals(arm, col="acc_time_defined"), unit="accuracy", direction="higher",
               description=f"{arm}: test accuracy on the loop classes that only the event order tells apart")
        for n in s["event_budgets"]:
            mf.add(f"acc.{arm}@events{n}", vals(arm, ("events", n, 1)), unit="accuracy", direction="higher",
                   description=f"{arm}: test accuracy with {n} events per stream")
        for f in s["res_factors"]:
            mf.add(f"acc.{arm}@res{s['sensor'] // f}", vals(arm, ("resolution", s["max_events"], f)),
                   unit="accuracy", direction="higher",
                   description=f"{arm}: test accuracy at {s['sensor'] // f}x{s['sensor'] // f} pixels")
        mf.add(f"params.{arm}", [float(params[arm])] * len(seeds), unit="parameters", direction="lower",
               description=f"{arm}: trainable parameters")
        mf.add(f"lr.{arm}", [float(tuning[arm]["chosen_lr"])] * len(seeds), unit="learning rate", direction="none",
               description=f"{arm}: learning rate chosen on the first seed's validation accuracy")
        mf.add(f"tuned_interior.{arm}", [float(not tuning[arm]["at_grid_edge"])] * len(seeds), unit="flag",
               direction="higher", description=f"{arm}: 1 if the chosen learning rate is interior to the grid "
                                               f"(one pick on the first seed, shared by every seed)")
        mf.add(f"tuning_tie.{arm}", [float(tuning[arm].get("tie_to_default", False))] * len(seeds), unit="flag",
               direction="none", description=f"{arm}: 1 if the default rate won by the tie rule (within one "
                                             f"validation standard error of the best)")
        mf.add(f"tuning_se.{arm}", [float(tuning[arm].get("selection_se", float("nan")))] * len(seeds),
               unit="accuracy", direction="none",
               description=f"{arm}: standard error of the validation accuracy the rate was picked on")
        sp = speed[speed["arm"] == arm].set_index("seed")
        mf.add(f"throughput.{arm}", [float(sp.loc[sd, "throughput"]) for sd in seeds], unit="streams/s",
               direction="higher", timing=True,
               description=f"{arm}: raw streams to logits per second, batch {s['throughput_batch']}, on {device}")
        mf.add(f"latency_ms.{arm}", [float(sp.loc[sd, "latency_ms"]) for sd in seeds], unit="ms", direction="lower",
               timing=True, description=f"{arm}: ms from one raw stream to its logits (batch 1) on {device}")
    baselines = [b for b in BASELINES if b in s["arms"]]
    e2v = vals(EVENT2VEC)
    best = np.max([vals(b) for b in baselines], axis=0)
    mf.add("acc_event2vec_minus_best_baseline", e2v - best, unit="accuracy", direction="higher",
           description="event2vec accuracy minus the best of the three baselines (per seed), full budget")
    sp = speed.set_index(["arm", "seed"])
    for b in baselines:
        eff = ((e2v - chance) / params[EVENT2VEC]) / np.maximum((vals(b) - chance) / params[b], 1e-12)
        mf.add(f"acc_per_param_ratio_event2vec_vs_{b}", eff, unit="ratio", direction="higher",
               description=f"(accuracy above chance per parameter) of event2vec divided by that of {b}")
        mf.add(f"throughput_ratio_event2vec_vs_{b}",
               [sp.loc[(EVENT2VEC, sd), "throughput"] / sp.loc[(b, sd), "throughput"] for sd in seeds],
               unit="ratio", direction="higher", timing=True, description=f"throughput of event2vec / {b}")
        mf.add(f"latency_ratio_event2vec_vs_{b}",
               [sp.loc[(EVENT2VEC, sd), "latency_ms"] / sp.loc[(b, sd), "latency_ms"] for sd in seeds],
               unit="ratio", direction="lower", timing=True, description=f"latency of event2vec / {b}")
    lo_n, lo_f = min(s["event_budgets"]), max(s["res_factors"])
    lo_events, lo_res = ("events", lo_n, 1), ("resolution", s["max_events"], lo_f)
    mf.add("acc_event2vec_minus_best_baseline@min_events",
           vals(EVENT2VEC, lo_events) - np.max([vals(b, lo_events) for b in baselines], axis=0), unit="accuracy",
           direction="higher", description=f"event2vec minus the best of the three baselines (per seed) with "
                                           f"{lo_n} events per stream")
    mf.add("acc_event2vec_minus_best_baseline@min_resolution",
           vals(EVENT2VEC, lo_res) - np.max([vals(b, lo_res) for b in baselines], axis=0), unit="accuracy",
           direction="higher", description=f"event2vec minus the best of the three baselines (per seed) at "
                                           f"{s['sensor'] // lo_f}x{s['sensor'] // lo_f} pixels")
    if EVENT2VEC in s["arms"]:
        for abl in ABLATIONS:
            mf.add(f"acc_time_defined.event2vec@{abl}", vals(EVENT2VEC, (abl, s["max_events"], 1), "acc_time_defined"),
                   unit="accuracy", direction="higher",
                   description=f"event2vec on the loop classes, {ABLATIONS[abl]} at test (no retraining)")
            mf.add(f"acc.event2vec@{abl}", vals(EVENT2VEC, (abl, s["max_events"], 1)), unit="accuracy",
                   direction="higher", description=f"event2vec test accuracy, {ABLATIONS[abl]} at test")
    for b in baselines:
        mf.add(f"acc_event2vec_minus_{b}@min_events",
               vals(EVENT2VEC, ("events", lo_n, 1)) - vals(b, ("events", lo_n, 1)), unit="accuracy",
               direction="higher", description=f"event2vec minus {b} accuracy with {lo_n} events per stream")
        mf.add(f"acc_event2vec_minus_{b}@min_resolution",
               vals(EVENT2VEC, ("resolution", s["max_events"], lo_f)) - vals(b, ("resolution", s["max_events"], lo_f)),
               unit="accuracy", direction="higher",
               description=f"event2vec minus {b} accuracy at {s['sensor'] // lo_f}x{s['sensor'] // lo_f} pixels")
    if len(km):
        k = km.set_index(["budget", "seed"])
        for n in s["kmeans_budgets"]:
            mf.add(f"acc.event2vec_kmeans@events{n}", [float(k.loc[(n, sd), "acc"]) for sd in seeds],
                   unit="accuracy", direction="higher",
                   description=f"event2vec fed {n} k-means centroids with intensities (no retraining)")
    return mf


def run(job) -> None:
    torch.set_flush_denormal(True)  # as in training (train.run): subnormal floats flushed to zero, cost only
    s = job.params
    samples, streams = load_streams(job.input.events, job.input.samples)
    tests = test_sets(samples, streams, s["seeds"])
    models = load_models(job, s)
    device = torch_device()
    acc = accuracy_table(models, tests, s)
    km = kmeans_table(models, tests, s) if EVENT2VEC in s["arms"] else pd.DataFrame()
    speed = speed_table(models, tests, s, device)
    params = {arm: n_params(models[(arm, s["seeds"][0])]) for arm in s["arms"]}
    tuning = {arm: read_json(job.input[f"{arm}_tuning"]) for arm in s["arms"]}
    write_parquet(job.output.accuracy, acc)
    write_parquet(job.output.speed, speed.assign(device=str(device)))
    build_metrics(acc, km, speed, params, tuning, s, str(device)).write(job.output.metrics)
