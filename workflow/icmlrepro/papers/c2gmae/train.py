"""Train the whole ladder on one graph for every seed (one job per graph, the graph redrawn per seed),
then probe and diagnose each rung.

Every rung gets the same budget: the same epochs and the same learning-rate grid, the rate
picked by linear-probe accuracy on the validation nodes (test accuracy is read at that rate
only). Rates whose validation accuracy lies within one standard error of the best (the selection's
noise on the validation nodes) are a tie, and ties go to the configured default rate
(``core.tuning.pick_with_ties``). With ``train.tune_seeds`` = k, the first k seeds train the whole grid and
their mean validation accuracy (ties within one SE of the k seeds' pooled validation nodes) fixes each rung's rate
for every seed; the other seeds train that rate only, so the grid is paid k times instead of once per seed and
the seeds go further (the per-seed pick on 60 validation nodes was mostly the tie rule's anyway). ``null``: every
seed picks its own rate from its own grid. The probe is scikit-learn's LogisticRegression on standardised frozen embeddings, one
random train/val/test node split per seed, shared by all rungs.

Training runs are batched: every (seed, rate, init) one rung needs (first the tuning seeds' grids, then the other
seeds at the chosen rate and every seed's retrain null) trains as one batched model of up to ``train.seed_batch``
runs (``batched.train_batch``); each run keeps its own graph, initialisation, masks and dropout, so its result is
the run trained alone (to float tolerance). Probes and diagnostics then read each run's own PyG model.

Beside the ladder, on the same split: the trivial references (the same probe on the raw features,
and an MLP on the raw features with its width chosen on validation), and the retrain null: each
rung of ``eval.null_rungs`` trained once more at its chosen rate from another initialisation and
other masks (``init`` 1), so that differences between rungs can be set against the differences
one rung shows with itself.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from icmlrepro.core.io import read_npz, write_parquet
from icmlrepro.core.seeding import derive_seed
from icmlrepro.core.tuning import accuracy_se, at_grid_edge, pick_with_ties

from .batched import train_batch
from .data import graph_of_seed

from .diagnostics import diagnose
from .heterophily import heterophilic_degree_ratio, heterophilic_edges
from .masking import coverage_per_bin, density_partitioned_mask, uniform_mask
from .model import LADDER, GraphTensors, MaskedGraphAutoEncoder, pe_distance


def load_graph(z: dict, s: dict) -> tuple[GraphTensors, np.ndarray]:
    """The tensors of one draw (the arrays of one seed, ``data.graph_of_seed``)."""
    x = torch.as_tensor(z["x"])
    ei = torch.as_tensor(z["edge_index"])
    u = torch.as_tensor(z["pe"])
    u = u / pe_distance(u, ei).max().clamp(min=1e-12)  # edge PE distances on [0, 1] on every graph
    m = heterophilic_edges(x, ei, s["c2gmae"]["hetero_quantile"])
    g = GraphTensors(x=x, edge_index=ei, u=u, dist=pe_distance(u, ei), hetero=m,
                     het_ratio=heterophilic_degree_ratio(m, ei, x.shape[0]), bins=torch.as_tensor(z["bins"]))
    return g, z["y"]


def node_split(n: int, seed: int, train_fraction: float, val_fraction: float):
    perm = np.random.default_rng(derive_seed(seed, "c2gmae", "probe_split")).permutation(n)
    a, b = int(train_fraction * n), int((train_fraction + val_fraction) * n)
    return perm[:a], perm[a:b], perm[b:]


def linear_probe(emb: np.ndarray, y: np.ndarray, split, c: float) -> tuple[float, float]:
    tr, va, te = split
    scaler = StandardScaler().fit(emb[tr])
    clf = LogisticRegression(C=c, max_iter=2000).fit(scaler.transform(emb[tr]), y[tr])
    return (float(clf.score(scaler.transform(emb[va]), y[va])), float(clf.score(scaler.transform(emb[te]), y[te])))


def references(x: np.ndarray, y: np.ndarray, split, s: dict, seed: int) -> list[dict]:
    """Raw-feature references on the rungs' split: the linear probe itself, and an MLP whose hidden
    width is chosen on the validation nodes (the encoder's width and twice it)."""
    e = s["eval"]
    val, test = linear_probe(x, y, split, e["probe_c"])
    rows = [{"reference": "raw_features", "val_acc": val, "test_acc": test}]
    tr, va, te = split
    scaler = StandardScaler().fit(x[tr])
    best = None
    for width in (s["model"]["hidden"], 2 * s["model"]["hidden"]):
        clf = MLPClassifier((width,), alpha=1e-3, max_iter=1000, random_state=derive_seed(seed, "c2gmae", "mlp"))
        clf.fit(scaler.transform(x[tr]), y[tr])
        v = float(clf.score(scaler.transform(x[va]), y[va]))
        if best is None or v > best[0]:
            best = (v, float(clf.score(scaler.transform(x[te]), y[te])))
    rows.append({"reference": "mlp", "val_acc": best[0], "test_acc": best[1]})
    chance = float(np.mean(y[te] == np.bincount(y[tr]).argmax()))
    rows.append({"reference": "majority_class", "val_acc": float("nan"), "test_acc": chance})
    return rows


def mask_count_sd(history: list[np.ndarray], bins: np.ndarray) -> float:
    """Standard deviation over epochs of the number of masked nodes in a density bin, mean over bins:
    how far one epoch's share of each region strays from its expectation (0 for fixed quotas)."""
    counts = np.stack([np.bincount(bins[m], minlength=int(bins.max()) + 1) for m in history])
    return float(counts.std(axis=0).mean())


def train_rung(g: GraphTensors, rung_name: str, lr: float, s: dict, seed: int, init: int = 0):
    """Returns the trained model, the masked node ids of every epoch, the loss curve. ``init`` > 0
    draws another initialisation and other masks (the retrain null). One training alone is a batch of one
    (``batched.train_batch``). A run's draws (init, masks, dropout) do not depend on which runs share its batch; its
    numbers do only through float rounding of kernels whose sizes follow the batch's padding (the PE rungs: about
    1e-7 per step, which training amplifies to about 1e-4 in a loss curve after 30 epochs)."""
    out = train_batch([g], rung_name, [(seed, lr, init)], s)[0]
    return out["model"], out["history"], out["losses"]


def train_runs(draws: dict, rung_name: str, runs: list[tuple[int, float, int]], s: dict) -> dict:
    """Every ``(seed, lr, init)`` of ``runs`` for one rung, batched ``train.seed_batch`` runs at a time (each
    on its seed's graph). Returns (seed, rung, lr, init) -> the trained run (model, masks, losses, seconds)."""
    size = int(s["train"].get("seed_batch") or len(runs)) or 1
    out = {}
    for i in range(0, len(runs), size):
        chunk = runs[i:i + size]
        for (seed, lr, init), res in zip(chunk, train_batch([draws[sd][0] for sd, _, _ in chunk], rung_name, chunk, s)):
            out[(seed, rung_name, lr, init)] = res
    return out


def choose_rate(lrs: list[float], val_accs: list[float], default: float, n_val: int) -> tuple[int, dict]:
    """The learning rate by validation accuracy; rates within one standard error of the best (the
    selection's noise on ``n_val`` nodes) tie, and ties go to ``default``. Returns the index and the
    per-replicate record (the rate the score alone would pick, the SE, interior and tie flags)."""
    se = accuracy_se(max(val_accs), n_val)
    p = pick_with_ties(lrs, val_accs, default, higher_is_better=True, tolerance=se)
    return p.index, {"lr_best_by_score": p.best, "selection_se": se,
                     "tuned_interior": float(not at_grid_edge(p.value, lrs)),
                     "tuning_tie": float(p.moved_by_tie and p.value == default), "n_tied": len(p.tied)}


def seed_split(n: int, seed: int, s: dict):
    e = s["eval"]
    return node_split(n, seed, e["probe_train_fraction"], e["probe_val_fraction"])


def fit_rung(g: GraphTensors, y: np.ndarray, split, rung_name: str, lr: float, s: dict, seed: int, init: int = 0,
             trained: dict | None = None) -> dict:
    """One rung trained at one rate and probed: validation and test accuracy, model, masks, losses, seconds.
    ``trained``: runs already trained in a batch ((seed, rung, lr, init) -> run); else it trains alone."""
    key = (seed, rung_name, lr, init)
    if trained is not None and key in trained:
        run_ = trained.pop(key)
    else:
        start = time.perf_counter()
        model, history, losses = train_rung(g, rung_name, lr, s, seed, init)
        run_ = {"model": model, "history": history, "losses": losses, "seconds": time.perf_counter() - start}
    val, test = linear_probe(run_["model"].embed(g).numpy(), y, split, s["eval"]["probe_c"])
    return {"val_acc": val, "test_acc": test, "lr": lr, **run_}


def grid_runs(g: GraphTensors, y: np.ndarray, s: dict, seed: int, trained: dict | None = None) -> dict[str, list[dict]]:
    """Every rung at every rate of the grid on one seed (a tuning seed's candidates)."""
    split = seed_split(g.x.shape[0], seed, s)
    return {rung: [fit_rung(g, y, split, rung, lr, s, seed, trained=trained) for lr in s["train"]["lrs"]]
            for rung in s["rungs"]}


def pooled_choice(candidates: dict[int, dict[str, list[dict]]], s: dict, n_val: int) -> dict[str, tuple[float, dict]]:
    """One rate per rung from the tuning seeds: mean validation accuracy over those seeds, ties within one SE of
    the pooled validation nodes (``n_val`` per seed) go to the default. Returns rung -> (rate, pick record)."""
    t, out = s["train"], {}
    for rung in s["rungs"]:
        means = [float(np.mean([candidates[sd][rung][i]["val_acc"] for sd in candidates])) for i in range(len(t["lrs"]))]
        index, pick = choose_rate(t["lrs"], means, t["default_lr"], n_val * len(candidates))
        out[rung] = (t["lrs"][index], {**pick, "tuned_on_seeds": len(candidates)})
    return out


def train_ladder(g: GraphTensors, y: np.ndarray, s: dict, seed: int, chosen: dict | None = None,
                 candidates: dict[str, list[dict]] | None = None, trained: dict | None = None):
    """The ladder on one seed. ``chosen`` (rung -> (rate, pick record)): the rate fixed by the tuning seeds, so
    this seed trains that rate only, or reuses it from ``candidates`` when it is a tuning seed itself (its grid
    already trained). Without ``chosen`` the seed picks its own rate from its own grid (``tune_seeds`` null).
    ``trained``: runs already trained in batches (``train_runs``); a run not there trains alone."""
    t, e = s["train"], s["eval"]
    n = g.x.shape[0]
    split = seed_split(n, seed, s)
    mgen = torch.Generator().manual_seed(derive_seed(seed, "c2gmae", "consistency_masks"))
    common = [uniform_mask(n, t["mask_rate"], mgen) for _ in range(e["n_consistency_masks"])]
    bins = g.bins.numpy()
    rows, bin_rows, curves = [], [], []

    def record(rung_name, init, best, total_seconds, pick=None):
        diag = diagnose(best["model"], g, common, derive_seed(seed, "c2gmae", "diagnose"), t["sce_gamma"])
        per_bin = np.array(diag["recon_bins"])
        row = {"rung": rung_name, "init": init, "lr": best["lr"], "val_acc": best["val_acc"],
               "test_acc": best["test_acc"], "recon_loss": diag["recon_loss"],
               "recon_bin_rel_spread": float((per_bin.max() - per_bin.min()) / max(per_bin.mean(), 1e-12)),
               "recon_worst_bin": float(per_bin.max()),
               "consistency": diag["consistency"], "final_train_loss": best["losses"][-1],
               "bin_mask_count_sd": mask_count_sd(best["history"], bins), "train_seconds": total_seconds}
        if pick is not None:
            row.update(pick)
        rows.append(row)
        return per_bin

    for rung_name in s["rungs"]:
        runs = candidates[rung_name] if candidates else None
        if chosen is None:
            runs = runs or [fit_rung(g, y, split, rung_name, lr, s, seed, trained=trained) for lr in t["lrs"]]
            index, pick = choose_rate(t["lrs"], [r["val_acc"] for r in runs], t["default_lr"], len(split[1]))
            best, total_seconds = runs[index], sum(r["seconds"] for r in runs)
        else:
            lr, pick = chosen[rung_name]
            if runs:  # a tuning seed: its model at the chosen rate is already trained
                best, total_seconds = runs[t["lrs"].index(lr)], sum(r["seconds"] for r in runs)
            else:
                best = fit_rung(g, y, split, rung_name, lr, s, seed, trained=trained)
                total_seconds = best["seconds"]
        per_bin = record(rung_name, 0, best, total_seconds, pick)
        cov = coverage_per_bin(best["history"], bins, e["coverage_window"])
        bin_rows += [{"rung": rung_name, "bin": b, "coverage": float(c), "recon_error": float(r)}
                     for b, (c, r) in enumerate(zip(cov, per_bin))]
        curves += [{"rung": rung_name, "epoch": i, "loss": v} for i, v in enumerate(best["losses"])]
        if rung_name in e["null_rungs"]:  # the retrain null: same rung, same rate, another init
            null = fit_rung(g, y, split, rung_name, best["lr"], s, seed, init=1, trained=trained)
            record(rung_name, 1, null, null["seconds"])
    refs = pd.DataFrame(references(g.x.numpy(), y, split, s, seed))
    return pd.DataFrame(rows), pd.DataFrame(bin_rows), pd.DataFrame(curves), refs


def run(job) -> None:
    s = job.params
    arrays = read_npz(job.input.graph)
    names = ("rungs", "bins", "curves", "refs")
    tables = {name: [] for name in names}
    seeds = [int(seed) for seed in s["seeds"]]
    draws = {seed: load_graph(graph_of_seed(arrays, seed), s) for seed in seeds}
    t, e = s["train"], s["eval"]
    k = t.get("tune_seeds")
    candidates, chosen, trained = {}, None, {}
    tune = seeds[:k] if k is not None else seeds  # these seeds train the whole grid
    for rung in s["rungs"]:
        trained.update(train_runs(draws, rung, [(sd, lr, 0) for sd in tune for lr in t["lrs"]], s))
    if k is not None:  # the first k seeds' mean validation accuracy fixes each rung's rate for every seed
        candidates = {seed: grid_runs(*draws[seed], s, seed, trained) for seed in tune}
        n = draws[seeds[0]][0].x.shape[0]
        chosen = pooled_choice(candidates, s, len(seed_split(n, seeds[0], s)[1]))
        for rung in s["rungs"]:  # the other seeds at the chosen rate, and every seed's retrain null, batched
            lr = chosen[rung][0]
            runs = [(sd, lr, 0) for sd in seeds[k:]] + ([(sd, lr, 1) for sd in seeds] if rung in e["null_rungs"] else [])
            trained.update(train_runs(draws, rung, runs, s))
    for seed in seeds:
        g, y = draws[seed]
        for name, df in zip(names, train_ladder(g, y, s, seed, chosen, candidates.pop(seed, None), trained)):
            df.insert(0, "seed", seed)
            df.insert(0, "graph", job.wildcards.graph)
            tables[name].append(df)
    for name in names:
        write_parquet(job.output[name], pd.concat(tables[name], ignore_index=True))
