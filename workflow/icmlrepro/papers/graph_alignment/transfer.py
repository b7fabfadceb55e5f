"""Alignment pre-training transferred: node embeddings as positional encodings, and graph reconstruction.

Positional encodings: a small transformer encoder (no adjacency; nodes are tokens with a degree
embedding) predicts each graph's average clustering coefficient. Four variants with the same
architecture, budget and seed differ only in the positional encoding added to the tokens: none,
Laplacian eigenvectors (random sign flips in training, the usual LapPE recipe), the frozen
alignment-pretrained GNN's node embeddings, and -- the control without the claimed cause -- the same
GNN with random initial weights (a random message-passing network already gives structural features;
pre-training must beat it). Reported: test MAE, and the MAE of predicting the training mean (trivial
reference).

Reconstruction: from the frozen embeddings of held-out graphs, an MLP on node-pair features
[h_u * h_v, |h_u - h_v|] classifies every node pair as edge / non-edge. Reported: accuracy over all
pairs and balanced accuracy (edges are a small minority, so plain accuracy flatters). The same
probe on a randomly initialised encoder of the same architecture is the no-pre-training reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.data import DataLoader
from torch_geometric.data import Data

from icmlrepro.core.io import read_torch, write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything

from .batching import undirected
from .data import PAPER
from .models import build

PE_VARIANTS = ("none", "laplacian", "alignment", "random_init")


@torch.no_grad()
def node_embeddings(encoder, edges: torch.Tensor, n: int) -> torch.Tensor:
    encoder.eval()
    return encoder(undirected(edges), n)


def laplacian_pe(edges: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """The k eigenvectors of the symmetric normalised Laplacian after the first (zero-padded if n <= k)."""
    a = np.zeros((n, n))
    e = edges.numpy()
    a[e[0], e[1]] = a[e[1], e[0]] = 1.0
    d = a.sum(1)
    inv = np.where(d > 0, 1.0 / np.sqrt(np.maximum(d, 1e-12)), 0.0)
    lap = np.eye(n) - inv[:, None] * a * inv[None, :]
    _, vecs = np.linalg.eigh(lap)
    pe = np.zeros((n, k))
    take = vecs[:, 1:k + 1]
    pe[:, :take.shape[1]] = take
    return torch.as_tensor(pe, dtype=torch.float32)


class SetTransformerRegressor(nn.Module):
    """Nodes as tokens: degree embedding + projected PE -> transformer encoder -> mean pool -> scalar."""

    def __init__(self, pe_dim: int, d_model: int, heads: int, layers: int, max_degree: int):
        super().__init__()
        self.max_degree = max_degree
        self.degree = nn.Embedding(max_degree + 1, d_model)
        self.pe = nn.Linear(pe_dim, d_model) if pe_dim else None
        layer = nn.TransformerEncoderLayer(d_model, heads, 2 * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(d_model, 1)

    def forward(self, batch) -> torch.Tensor:
        from torch_geometric.utils import to_dense_batch

        x = self.degree(batch.deg.clamp(max=self.max_degree))
        if self.pe is not None:
            x = x + self.pe(batch.pe)
        dense, mask = to_dense_batch(x, batch.batch)
        h = self.encoder(dense, src_key_padding_mask=~mask)
        h = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return self.out(h).squeeze(-1)


@dataclass
class GraphBatch:
    """The fields of a PyG batch of regression graphs (``Data(deg, pe, y)``) that the regressor reads."""

    deg: torch.Tensor
    pe: torch.Tensor
    y: torch.Tensor
    batch: torch.Tensor
    num_graphs: int


def collate_graphs(items: list[Data]) -> GraphBatch:
    """What ``torch_geometric.loader.DataLoader`` makes of these graphs (tests check the equality), by a
    plain concatenation: PyG's generic collation was most of the data time of 4 x 30 epochs per seed."""
    return GraphBatch(deg=torch.cat([d.deg for d in items]), pe=torch.cat([d.pe for d in items]),
                      y=torch.cat([d.y for d in items]),
                      batch=torch.repeat_interleave(torch.arange(len(items)), torch.tensor([d.num_nodes for d in items])),
                      num_graphs=len(items))


def graph_loader(graphs: list[Data], batch_size: int, shuffle: bool = False, generator=None) -> DataLoader:
    return DataLoader(graphs, batch_size=batch_size, shuffle=shuffle, generator=generator, collate_fn=collate_graphs)


def regression_data(graphs: list[dict], variant: str, encoders: dict, k: int) -> list[Data]:
    from torch_geometric.utils import degree

    out = []
    for g in graphs:
        n, edges = int(g["n"]), g["edges"]
        ei = undirected(edges)
        if variant == "laplacian":
            pe = laplacian_pe(edges, n, k)
        elif variant in encoders:  # alignment-pretrained or random-init GNN embeddings
            pe = node_embeddings(encoders[variant], edges, n)
        else:
            pe = torch.zeros(n, 0)
        out.append(Data(deg=degree(ei[0], n, dtype=torch.long), pe=pe, y=torch.tensor([float(g["y"])]),
                        num_nodes=n))
    return out


def regression_mae(sets: dict, variant: str, encoders: dict, seed: int, p) -> float:
    """Train the transformer with one PE variant; test MAE of the average clustering coefficient."""
    t = p["transfer"]
    train = regression_data(sets["train"], variant, encoders, t["lap_k"])
    test = regression_data(sets["test"], variant, encoders, t["lap_k"])
    y = torch.cat([d.y for d in train])
    mu, sd = y.mean(), y.std().clamp(min=1e-6)
    seed_everything(derive_seed(seed, PAPER, "regression", variant))
    model = SetTransformerRegressor(train[0].pe.shape[1], t["d_model"], t["pe_heads"], t["pe_layers"], p["max_degree"])
    opt = torch.optim.Adam(model.parameters(), lr=t["pe_lr"], foreach=True)  # = the per-tensor loop, faster
    g = torch.Generator().manual_seed(derive_seed(seed, PAPER, "regression_batches", variant))
    flips = torch.Generator().manual_seed(derive_seed(seed, PAPER, "sign_flips"))
    model.train()
    for _ in range(t["pe_epochs"]):
        for batch in graph_loader(train, p["batch_size"], shuffle=True, generator=g):
            if variant == "laplacian":  # eigenvector signs are arbitrary: train invariant to them
                signs = torch.randint(0, 2, (int(batch.num_graphs), batch.pe.shape[1]), generator=flips) * 2 - 1
                batch.pe = batch.pe * signs[batch.batch].float()
            loss = nn.functional.l1_loss(model(batch), (batch.y - mu) / sd)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        err = [(model(b) * sd + mu - b.y).abs() for b in graph_loader(test, p["batch_size"])]
    return float(torch.cat(err).mean())


def pair_features(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    iu = torch.triu_indices(h.shape[0], h.shape[0], 1)
    return torch.cat([h[iu[0]] * h[iu[1]], (h[iu[0]] - h[iu[1]]).abs()], dim=1), iu


def pair_set(graphs: list[dict], encoder) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = [], []
    for g in graphs:
        n = int(g["n"])
        h = node_embeddings(encoder, g["base"], n)
        x, iu = pair_features(h)
        adj = torch.zeros(n, n, dtype=torch.bool)
        adj[g["base"][0], g["base"][1]] = True
        adj = adj | adj.T
        xs.append(x)
        ys.append(adj[iu[0], iu[1]].float())
    return torch.cat(xs), torch.cat(ys)


def reconstruction(sets: dict, encoder, seed: int, p) -> dict[str, float]:
    """Edge / non-edge probe on frozen embeddings; accuracy and balanced accuracy on held-out graphs."""
    t = p["transfer"]
    x, y = pair_set(sets["train"], encoder)
    mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
    seed_everything(derive_seed(seed, PAPER, "reconstruction_probe"))
    probe = nn.Sequential(nn.Linear(x.shape[1], 2 * p["hidden"]), nn.ReLU(), nn.Linear(2 * p["hidden"], 1))
    opt = torch.optim.Adam(probe.parameters(), lr=t["probe_lr"], foreach=True)
    pos_weight = (y.numel() - y.sum()) / y.sum().clamp(min=1)
    z = (x - mean) / std  # the standardised features, once (they do not change between steps)
    for _ in range(t["probe_steps"]):
        loss = nn.functional.binary_cross_entropy_with_logits(probe(z).squeeze(-1), y, pos_weight=pos_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
    xt, yt = pair_set(sets["test"], encoder)
    with torch.no_grad():
        pred = (probe((xt - mean) / std).squeeze(-1) > 0).float()
    tpr = float(((pred == 1) & (yt == 1)).sum() / (yt == 1).sum().clamp(min=1))
    tnr = float(((pred == 0) & (yt == 0)).sum() / (yt == 0).sum().clamp(min=1))
    return {"accuracy": float((pred == yt).float().mean()), "balanced_accuracy": (tpr + tnr) / 2}


def mean_predictor_mae(sets: dict) -> float:
    """Test MAE of predicting the training mean for every graph: the trivial reference."""
    mu = np.mean([g["y"] for g in sets["train"]])
    return float(np.mean([abs(g["y"] - mu) for g in sets["test"]]))


def transfer_seed(data: dict, saved: dict, seed: int, p) -> pd.DataFrame:
    """Regression MAE per PE variant and reconstruction scores of the pretrained and random encoders,
    both built for the headline input (all-ones features)."""
    t = p["transfer"]
    pretrained = build(t["model"], p, p["input"], saved["deg_hist"])
    pretrained.load_state_dict(saved["state"])
    seed_everything(derive_seed(seed, PAPER, "random_encoder"))
    random_init = build(t["model"], p, p["input"], saved["deg_hist"])
    encoders = {"alignment": pretrained, "random_init": random_init}
    rows = [{"task": "regression", "variant": "mean", "metric": "mae", "value": mean_predictor_mae(data["regression"])}]
    for variant in PE_VARIANTS:
        rows.append({"task": "regression", "variant": variant, "metric": "mae",
                     "value": regression_mae(data["regression"], variant, encoders, seed, p)})
    for variant, enc in (("pretrained", pretrained), ("random_init", random_init)):
        for metric, value in reconstruction(data["reconstruction"], enc, seed, p).items():
            rows.append({"task": "reconstruction", "variant": variant, "metric": metric, "value": value})
    df = pd.DataFrame(rows)
    df.insert(0, "seed", seed)
    return df


def run(job) -> None:
    p = job.params
    data = read_torch(job.input.datasets, weights_only=True)
    frames = [transfer_seed(data[int(s)]["transfer"], read_torch(job.input[f"encoder_seed{s}"], weights_only=True),
                            int(s), p) for s in p["seeds"]]
    write_parquet(job.output.transfer, pd.concat(frames, ignore_index=True))
