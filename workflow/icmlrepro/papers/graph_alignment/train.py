"""Train every model of the zoo on every alignment dataset (source x noise) of one seed.

All models get the same budget (epochs, batch size, learning rate, width, depth): the benchmark
compares layer types, not tuning effort. Each (source, noise, model) run is scored on the held-out
pairs of its dataset: top-1/3/5 recall and LAP accuracy, averaged over pairs. The model trained on
the transfer dataset (claims: pre-training) is saved for the transfer stage.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import atomic_path, write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything

from .alignment import alignment_loss, dense_similarity, pair_scores
from .batching import loader, node_batches
from .data import PAPER, dataset_key
from .models import build


def embed_pairs(model, batch):
    bb, bc = node_batches(batch)
    hb = model(batch.edge_index_b, batch.num_nodes)
    hc = model(batch.edge_index_c, batch.num_nodes)
    return dense_similarity(hb, bb, hc, bc)


def dense_target(batch, n_max: int) -> torch.Tensor:
    from torch_geometric.utils import to_dense_batch

    target, _ = to_dense_batch(batch.perm, batch.batch, fill_value=0, max_num_nodes=n_max)
    return target


def fit(model, pairs: list[dict], p, seed: int) -> list[float]:
    """Adam on the siamese alignment loss with PyG mini-batches; returns the mean loss per epoch."""
    opt = torch.optim.Adam(model.parameters(), lr=p["lr"])
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
    """Mean over held-out pairs of top-1/3/5 recall and LAP accuracy."""
    model.eval()
    rows = []
    for batch in loader(pairs, batch_size, shuffle=False, seed=0):
        sim, mb, _ = embed_pairs(model, batch)
        target = dense_target(batch, sim.shape[1])
        for g in range(sim.shape[0]):
            n = int(mb[g].sum())
            rows.append(pair_scores(sim[g, :n, :n].double().numpy(), target[g, :n].numpy()))
    return pd.DataFrame(rows).mean().to_dict()


def train_seed(datasets: dict, seed: int, p) -> tuple[pd.DataFrame, dict]:
    rows, encoder = [], None
    t = p["transfer"]
    for source in p["sources"]:
        for noise in p["noises"]:
            split = datasets[dataset_key(source, noise)]
            for kind in p["models"]:
                seed_everything(derive_seed(seed, PAPER, "train", source, noise, kind))
                model = build(kind, p)
                t0 = time.perf_counter()
                history = fit(model, split["train"], p, derive_seed(seed, PAPER, "batches", source, noise, kind))
                seconds = time.perf_counter() - t0
                rows.append({"seed": seed, "source": source, "noise": float(noise), "model": kind,
                             "final_train_loss": history[-1], "train_seconds": seconds,
                             **score(model, split["test"], p["batch_size"])})
                if (source, float(noise), kind) == (t["source"], float(t["noise"]), t["model"]):
                    encoder = {k: v.clone() for k, v in model.state_dict().items()}
    if encoder is None:
        raise ValueError(f"transfer encoder {t['model']} on {t['source']}@{t['noise']} is not in the grid "
                         "(transfer.model must be in models, transfer.source in sources, transfer.noise in noises)")
    return pd.DataFrame(rows), encoder


def run(job) -> None:
    seed = int(job.wildcards.seed)
    data = torch.load(job.input.datasets, weights_only=True)[seed]
    table, encoder = train_seed(data["alignment"], seed, job.params)
    write_parquet(job.output.scores, table)
    with atomic_path(job.output.encoder) as tmp:
        torch.save(encoder, tmp)
