"""A small GCN classifying vertices of a random geometric graph by their distance from the centre, per encoding.

One job per encoding trains, per seed, one GCN per value of the weight-decay grid (the same grid, split,
architecture, optimiser, epochs and model selection for every encoding: the only difference is the input
features). The grid's models are independent but trained at once as one batched model (``GCNGrid``:
stacked weights, the same arithmetic as ``torch_geometric``'s GCNConv with a linear head, and Adam's L2
weight decay written into the loss per model, which leaves Adam's per-parameter updates independent).
Each model keeps its best-validation checkpoint (checked every ``eval_every`` epochs); the weight decay
is then chosen by validation accuracy, ties within one standard error going to the default.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.core.tuning import accuracy_se, at_grid_edge, pick_with_ties

from .data import Graphs
from .encodings import node_features


def normalised_adjacency(edges: np.ndarray, n: int) -> torch.Tensor:
    """D~^-1/2 (A + I) D~^-1/2, dense (GCNConv's propagation matrix)."""
    a = torch.zeros(n, n, dtype=torch.float32)
    if edges.size:
        a[edges[0], edges[1]] = 1.0
        a[edges[1], edges[0]] = 1.0
    a += torch.eye(n)
    d = a.sum(1).rsqrt()
    return d[:, None] * a * d[None, :]


class GCNGrid(torch.nn.Module):
    """``k`` independent GCNs (``layers`` GCN layers with ReLU, then a linear head), weights stacked on dim 0."""

    def __init__(self, k: int, d_in: int, hidden: int, n_classes: int, layers: int) -> None:
        super().__init__()
        dims = [d_in] + [hidden] * layers
        self.weights = torch.nn.ParameterList()
        self.biases = torch.nn.ParameterList()
        for a, b in zip(dims[:-1], dims[1:]):  # glorot weights, zero biases (GCNConv)
            bound = math.sqrt(6.0 / (a + b))
            self.weights.append(torch.nn.Parameter(torch.empty(k, a, b).uniform_(-bound, bound)))
            self.biases.append(torch.nn.Parameter(torch.zeros(k, 1, b)))
        bound = 1.0 / math.sqrt(hidden)  # torch.nn.Linear's default initialisation
        self.head_w = torch.nn.Parameter(torch.empty(k, hidden, n_classes).uniform_(-bound, bound))
        self.head_b = torch.nn.Parameter(torch.empty(k, 1, n_classes).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = x.expand(self.head_w.shape[0], *x.shape)
        for w, b in zip(self.weights, self.biases):
            h = torch.relu(adj @ (h @ w) + b)
        return h @ self.head_w + self.head_b  # (k, n, classes)

    def squared_norms(self) -> torch.Tensor:
        """Per model: the sum of its squared parameters."""
        return sum(p.pow(2).flatten(1).sum(1) for p in self.parameters())


def split(n: int, seed: int, fractions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random train/val/test split of the vertices (the same for every encoding of a seed)."""
    perm = np.random.default_rng(derive_seed(seed, "collapsed_ops", "node_split")).permutation(n)
    a, b = int(round(fractions[0] * n)), int(round((fractions[0] + fractions[1]) * n))
    return perm[:a], perm[a:b], perm[b:]


def train_grid(x: np.ndarray, graph, labels: np.ndarray, seed: int, q) -> tuple[list[dict], list[dict]]:
    """One GCN per weight decay of ``q['weight_decay_grid']``; each model's best-validation checkpoint."""
    grid = [float(w) for w in q["weight_decay_grid"]]
    seed_everything(derive_seed(seed, "collapsed_ops", "gcn"))
    gen = torch.Generator().manual_seed(derive_seed(seed, "collapsed_ops", "sign_flips"))
    edges = np.array(list(graph.edges), dtype=np.int64).reshape(-1, 2).T
    adj = normalised_adjacency(edges, len(labels))
    xt = torch.as_tensor(x, dtype=torch.float32)
    y = torch.as_tensor(np.array(labels))
    tr, va, te = (torch.as_tensor(i) for i in split(len(labels), seed, q["split"]))
    model = GCNGrid(len(grid), x.shape[1], int(q["hidden"]), int(labels.max() + 1), int(q["layers"]))
    decay = torch.as_tensor(grid, dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=float(q["lr"]))
    best = [{"val_acc": -1.0} for _ in grid]
    curve = []
    for epoch in range(1, int(q["epochs"]) + 1):
        model.train()
        opt.zero_grad()
        xin = xt
        if x.shape[1] > 1 and q["sign_flips"]:
            flips = torch.ones(1, x.shape[1])
            flips[0, 1:] = torch.randint(0, 2, (x.shape[1] - 1,), generator=gen) * 2.0 - 1.0
            xin = xt * flips
        out = model(xin, adj)[:, tr]  # (k, n_train, classes)
        ce = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y[tr].repeat(len(grid)),
                                               reduction="none").view(len(grid), -1).mean(1)
        (ce.sum() + 0.5 * (decay * model.squared_norms()).sum()).backward()  # = Adam(weight_decay) per model
        opt.step()
        if epoch % int(q["eval_every"]) == 0:
            model.eval()
            with torch.no_grad():
                pred = model(xt, adj).argmax(dim=2)
            for i, wd in enumerate(grid):
                acc = {name: float((pred[i, idx] == y[idx]).float().mean()) for name, idx in
                       (("train_acc", tr), ("val_acc", va), ("test_acc", te))}
                curve.append({"epoch": epoch, "weight_decay": wd, "loss": float(ce[i].detach()), **acc})
                if acc["val_acc"] > best[i]["val_acc"]:
                    best[i] = {"epoch": epoch, **acc}
    return [{"weight_decay": wd, **b} for wd, b in zip(grid, best)], curve


def choose(per_value: list[dict], q, n_val: int) -> dict:
    """The weight decay with the best validation accuracy; within one standard error the default wins."""
    grid = [r["weight_decay"] for r in per_value]
    scores = [r["val_acc"] for r in per_value]
    default = float(q["weight_decay"])
    pick = pick_with_ties(grid, scores, default, higher_is_better=True,
                          tolerance=accuracy_se(max(scores), n_val))
    chosen = per_value[pick.index]
    untuned = per_value[grid.index(default)]
    return {**chosen, "untuned_test_acc": untuned["test_acc"], "interior": float(not at_grid_edge(pick.value, grid)),
            "tie": float(pick.moved_by_tie and pick.value == default), "best_weight_decay": pick.best}


def run(job) -> None:
    p = job.params
    q = p["encodings"]
    encoding = job.wildcards.encoding
    graphs = Graphs(job.input.graphs, job.input.edges, job.input.nodes)
    if float(q["weight_decay"]) not in [float(w) for w in q["weight_decay_grid"]]:
        raise ValueError("encodings.weight_decay (the default) must be in encodings.weight_decay_grid")
    results, curves = [], []
    for seed in (int(s) for s in q["seeds"]):
        gid = f"encodings/s{seed}"
        graph = graphs.graph(gid)
        labels = graphs.nodes(gid)["label"].to_numpy()
        t0 = time.perf_counter()
        x = node_features(encoding, graph, int(graphs.meta.loc[gid, "max_rank"]), p)
        per_value, curve = train_grid(x, graph, labels, seed, q)
        n_val = len(split(len(labels), seed, q["split"])[1])
        results.append({"seed": seed, "encoding": encoding, "n_features": x.shape[1],
                        "seconds": time.perf_counter() - t0, **choose(per_value, q, n_val)})
        curves += [{"seed": seed, "encoding": encoding, **c} for c in curve]
    write_parquet(job.output.results, pd.DataFrame(results))
    write_parquet(job.output.curves, pd.DataFrame(curves))
