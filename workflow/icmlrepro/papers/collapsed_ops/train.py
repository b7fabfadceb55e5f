"""A small GCN (torch_geometric) classifying node roles of BA-house graphs, per positional encoding.

One job per encoding trains one model per seed on that seed's graph, with the same split,
architecture, optimiser, epochs and model selection (best validation accuracy, checked every
``eval_every`` epochs) for every encoding: the only difference is the input features.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
from torch_geometric.nn import GCNConv

from icmlrepro.core.io import write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything

from .data import Graphs
from .encodings import node_features


class GCN(torch.nn.Module):
    def __init__(self, d_in: int, hidden: int, n_classes: int, layers: int) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList(GCNConv(d_in if i == 0 else hidden, hidden) for i in range(layers))
        self.head = torch.nn.Linear(hidden, n_classes)

    def forward(self, x, edge_index):
        for conv in self.convs:
            x = torch.relu(conv(x, edge_index))
        return self.head(x)


def split(n: int, seed: int, fractions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random train/val/test split of the vertices (the same for every encoding of a seed)."""
    perm = np.random.default_rng(derive_seed(seed, "collapsed_ops", "node_split")).permutation(n)
    a, b = int(round(fractions[0] * n)), int(round((fractions[0] + fractions[1]) * n))
    return perm[:a], perm[a:b], perm[b:]


def train_one(x: np.ndarray, graph, labels: np.ndarray, seed: int, q) -> tuple[dict, list[dict]]:
    seed_everything(derive_seed(seed, "collapsed_ops", "gcn"))
    gen = torch.Generator().manual_seed(derive_seed(seed, "collapsed_ops", "sign_flips"))
    edges = np.array(list(graph.edges), dtype=np.int64).reshape(-1, 2).T
    edge_index = torch.as_tensor(np.hstack([edges, edges[::-1]]))
    xt = torch.as_tensor(x, dtype=torch.float32)
    y = torch.as_tensor(np.array(labels))
    tr, va, te = (torch.as_tensor(i) for i in split(len(labels), seed, q["split"]))
    model = GCN(x.shape[1], int(q["hidden"]), int(labels.max() + 1), int(q["layers"]))
    opt = torch.optim.Adam(model.parameters(), lr=float(q["lr"]), weight_decay=float(q["weight_decay"]))
    best, curve = {"val_acc": -1.0}, []
    for epoch in range(1, int(q["epochs"]) + 1):
        model.train()
        opt.zero_grad()
        flips = torch.ones(1, x.shape[1])
        if x.shape[1] > 1:
            flips[0, 1:] = torch.randint(0, 2, (x.shape[1] - 1,), generator=gen) * 2.0 - 1.0
        loss = torch.nn.functional.cross_entropy(model(xt * flips, edge_index)[tr], y[tr])
        loss.backward()
        opt.step()
        if epoch % int(q["eval_every"]) == 0:
            model.eval()
            with torch.no_grad():
                pred = model(xt, edge_index).argmax(dim=1)
            acc = {name: float((pred[idx] == y[idx]).float().mean()) for name, idx in
                   (("train_acc", tr), ("val_acc", va), ("test_acc", te))}
            curve.append({"epoch": epoch, "loss": float(loss.detach()), **acc})
            if acc["val_acc"] > best["val_acc"]:
                best = {"epoch": epoch, **acc}
    return best, curve


def run(job) -> None:
    p = job.params
    q = p["encodings"]
    encoding = job.wildcards.encoding
    graphs = Graphs(job.input.graphs, job.input.edges, job.input.nodes)
    results, curves = [], []
    for seed in (int(s) for s in p["seeds"]):
        gid = f"encodings/s{seed}"
        graph = graphs.graph(gid)
        labels = graphs.nodes(gid)["label"].to_numpy()
        x = node_features(encoding, graph, int(graphs.meta.loc[gid, "max_rank"]), p)
        t0 = time.perf_counter()
        best, curve = train_one(x, graph, labels, seed, q)
        results.append({"seed": seed, "encoding": encoding, "n_features": x.shape[1],
                        "seconds": time.perf_counter() - t0, **best})
        curves += [{"seed": seed, "encoding": encoding, **c} for c in curve]
    write_parquet(job.output.results, pd.DataFrame(results))
    write_parquet(job.output.curves, pd.DataFrame(curves))
