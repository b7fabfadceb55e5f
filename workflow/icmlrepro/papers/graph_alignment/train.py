"""Train every model of the zoo on every alignment dataset of one seed, with its tuned learning rate.

All models get the same budget (epochs, batch size, width, depth) and the same learning-rate grid,
tuned per model and input on a separate tuning stream (``tune.py``): the benchmark compares layer
types, not tuning effort. The headline input (config ``input``: degree embeddings at default) runs
over every (source, noise); each extra input (all-ones features) runs at the main noise level. Each
run is scored on the held-out pairs of its dataset: top-1/3/5 recall and LAP accuracy, averaged over
pairs. Beside the models, three references are scored on the same pairs: chance (a random score
matrix), ``degree_reference``, which matches nodes on raw degrees alone (no message passing), and
``wl_ceiling``, the most any model of the zoo can reach (every one is bounded by 1-WL colour
refinement; graphs.wl_topk_ceiling). The model trained on the transfer
dataset is saved for the transfer stage.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import read_parquet, read_torch, write_parquet, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything

from .alignment import alignment_loss, dense_similarity, pair_scores
from .batching import loader, node_batches
from .data import PAPER, dataset_key, runs
from .graphs import wl_topk_ceiling
from .models import REFERENCES, build, degree_histogram


def embed_pairs(model, batch):
    bb, bc = node_batches(batch)
    hb = model(batch.edge_index_b, batch.num_nodes, bb)
    hc = model(batch.edge_index_c, batch.num_nodes, bc)
    return dense_similarity(hb, bb, hc, bc)


def dense_target(batch, n_max: int) -> torch.Tensor:
    from torch_geometric.utils import to_dense_batch

    target, _ = to_dense_batch(batch.perm, batch.batch, fill_value=0, max_num_nodes=n_max)
    return target


def fit(model, pairs: list[dict], p, seed: int, lr: float) -> list[float]:
    """Adam on the siamese alignment loss with mini-batches of pairs; returns the mean loss per epoch.

    ``foreach=True``: Adam's multi-tensor update, the same arithmetic per element as the per-tensor loop
    (same bits; tests/test_graph_alignment.py), a little faster on the zoo's many small tensors."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    data = loader(pairs, p["batch_size"], shuffle=True, seed=seed)
    history = []
    model.train()
    for _ in range(p["epochs"]):
        losses = []
        for batch in data:
            sim, mb, mc = embed_pairs(model, batch)
            loss = alignment_loss(sim, mb, mc, dense_target(batch, sim.shape[1]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        history.append(float(np.mean(losses)))
    return history


@torch.no_grad()
def score(model, pairs: list[dict], batch_size: int) -> dict[str, float]:
    """Mean over held-out pairs of top-1/3/5 recall, LAP accuracy and the alignment loss (per pair), and
    the standard error of that mean loss over pairs (``loss_se``, the noise of a tuning pick made on it)."""
    model.eval()
    rows = []
    for batch in loader(pairs, batch_size, shuffle=False, seed=0):
        sim, mb, mc = embed_pairs(model, batch)
        target = dense_target(batch, sim.shape[1])
        for g in range(sim.shape[0]):
            n = int(mb[g].sum())
            loss = float(alignment_loss(sim[g:g + 1], mb[g:g + 1], mc[g:g + 1], target[g:g + 1]))
            rows.append({**pair_scores(sim[g, :n, :n].double().numpy(), target[g, :n].numpy()), "loss": loss})
    table = pd.DataFrame(rows)
    out = table.mean().to_dict()
    out["loss_se"] = float(table.loss.std(ddof=1) / np.sqrt(len(table))) if len(table) > 1 else float("inf")
    return out


def reference_scores(pairs: list[dict], ks=(1, 3, 5)) -> dict[str, dict[str, float]]:
    """Chance (expected scores of a random, tie-free score matrix: top-k = k/n, LAP = 1/n), the raw
    degree reference (S_ij = -|deg_i - deg_j|, ties counted against it as for every model) and the
    1-WL ceiling (top-k: graphs.wl_topk_ceiling of the base graph; LAP: 1, as a one-to-one matching
    can split tied nodes by luck)."""
    chance, degree, ceiling = [], [], []
    for pair in pairs:
        n = int(pair["n"])
        chance.append({**{f"top{k}": min(k, n) / n for k in ks}, "lap": 1.0 / n})
        db = np.bincount(pair["base"].numpy().reshape(-1), minlength=n)
        dc = np.bincount(pair["corrupted"].numpy().reshape(-1), minlength=n)
        degree.append(pair_scores(-np.abs(db[:, None] - dc[None, :]).astype(float), pair["perm"].numpy(), ks))
        ceiling.append({**{f"top{k}": wl_topk_ceiling(pair["base"].numpy(), n, k) for k in ks}, "lap": 1.0})
    return {"chance": pd.DataFrame(chance).mean().to_dict(), "degree_reference": pd.DataFrame(degree).mean().to_dict(),
            "wl_ceiling": pd.DataFrame(ceiling).mean().to_dict()}


def pna_histogram(pairs: list[dict], p) -> torch.Tensor:
    return degree_histogram([(q["base"], q["n"]) for q in pairs], p["max_degree"])


def train_one(kind: str, inputs: str, split: dict, p, lr: float, seed: int, *keys) -> tuple[object, dict]:
    """Train one model on a split's training pairs; its scores on the split's test pairs."""
    seed_everything(derive_seed(seed, PAPER, "train", *keys, kind, inputs))
    model = build(kind, p, inputs, pna_histogram(split["train"], p))
    t0 = time.perf_counter()
    history = fit(model, split["train"], p, derive_seed(seed, PAPER, "batches", *keys, kind, inputs), lr)
    seconds = time.perf_counter() - t0
    return model, {"final_train_loss": history[-1], "train_seconds": seconds, **score(model, split["test"], p["batch_size"])}


def train_seed(datasets: dict, seed: int, p, lrs: dict) -> tuple[pd.DataFrame, dict]:
    """Scores of every (input, source, noise, model) and the references, and the transfer encoder."""
    rows, encoder = [], None
    t = p["transfer"]
    for inputs, source, noise in runs(p):
        split = datasets[dataset_key(source, noise)]
        key = {"seed": seed, "input": inputs, "source": source, "noise": noise}
        for ref, scores in reference_scores(split["test"]).items():
            rows.append({**key, "model": ref, "lr": np.nan, "final_train_loss": np.nan, "train_seconds": 0.0,
                         "loss": np.nan, "loss_se": np.nan, **scores})
        for kind in p["models"]:
            lr = lrs[(inputs, kind)]
            model, scores = train_one(kind, inputs, split, p, lr, seed, source, noise)
            rows.append({**key, "model": kind, "lr": lr, **scores})
            if (inputs, source, noise, kind) == (p["input"], t["source"], float(p["main_noise"]), t["model"]):
                encoder = {"state": {k: v.clone() for k, v in model.state_dict().items()},
                           "deg_hist": pna_histogram(split["train"], p)}
    if encoder is None:
        raise ValueError(f"transfer encoder {t['model']} on {t['source']}@{p['main_noise']} is not in the grid "
                         "(transfer.model must be in models, transfer.source in sources, main_noise in noises)")
    return pd.DataFrame(rows), encoder


def tuned_lrs(paths) -> dict:
    """{(input, model): learning rate} from the tuning tables."""
    table = pd.concat([read_parquet(x) for x in paths], ignore_index=True)
    chosen = table[table.chosen]
    return {(r.input, r.model): float(r.lr) for r in chosen.itertuples()}


def run(job) -> None:
    seed = int(job.wildcards.seed)
    data = read_torch(job.input.datasets, weights_only=True)[seed]
    lrs = tuned_lrs([v for k, v in job.input.items() if k.startswith("tune_")])
    table, encoder = train_seed(data["alignment"], seed, job.params, lrs)
    write_parquet(job.output.scores, table)
    write_torch(job.output.encoder, encoder)
