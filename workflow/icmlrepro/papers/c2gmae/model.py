"""GraphMAE and the C2-GMAE ladder as one module with switches, built from torch_geometric GATConv.

GraphMAE: corrupt masked nodes -> GAT encoder -> linear encoder-to-decoder map (no bias) ->
re-mask (masked rows set to 0) -> one-layer GAT decoder to the input dimension -> scaled cosine
error on the masked nodes. C2-GMAE adds, switch by switch:

* ``pe``: Laplacian-eigenvector distances ||u_i - u_j|| per edge, expanded in a Gaussian basis,
  enter every encoder attention logit (GATConv's ``edge_attr``). A second stream encodes the
  *clean* features with *noisy* PE (uniform noise on masked nodes' eigenvectors) and must
  reconstruct the clean PE distances on edges of masked nodes (smooth-L1): the observable
  structural reference.
* ``density``: density-partitioned masking instead of uniform masking (masking.py).
* ``hetero``: heterophilic-edge amplification of PE distances, attention, PE noise and PE loss.

Training runs through batched.py (the same module written out for many runs at once; tests check losses and
gradients against this one); probes and diagnostics use this module with each run's trained weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_geometric.nn import GATConv

from .heterophily import amplify
from .masking import corrupt


@dataclass(frozen=True)
class Rung:
    pe: bool
    density: bool
    hetero: bool


LADDER = {
    "graphmae": Rung(pe=False, density=False, hetero=False),
    "pe": Rung(pe=True, density=False, hetero=False),
    "pe_density": Rung(pe=True, density=True, hetero=False),
    "c2gmae": Rung(pe=True, density=True, hetero=True),
}


def sce_loss(pred: torch.Tensor, target: torch.Tensor, gamma: float) -> torch.Tensor:
    """GraphMAE's scaled cosine error: mean over rows of (1 - cos(pred, target)) ** gamma."""
    cos = (F.normalize(pred, p=2, dim=-1) * F.normalize(target, p=2, dim=-1)).sum(-1)
    return (1.0 - cos).pow(gamma).mean()


def gaussian_basis(d: torch.Tensor, n_basis: int, d_max: float) -> torch.Tensor:
    """exp(-((d - c_k) / width)^2) for ``n_basis`` centres evenly spaced on [0, d_max]."""
    centres = torch.linspace(0.0, d_max, n_basis)
    width = d_max / max(n_basis - 1, 1)
    return torch.exp(-(((d[:, None] - centres[None, :]) / width) ** 2))


@dataclass
class GraphTensors:
    """Everything a model reads from one graph (fixed during training)."""

    x: torch.Tensor
    edge_index: torch.Tensor
    u: torch.Tensor            # Laplacian PE, (N, k)
    dist: torch.Tensor         # clean PE distance per edge
    hetero: torch.Tensor       # M per edge (0/1)
    het_ratio: torch.Tensor    # degH / deg per node
    bins: torch.Tensor         # density bin per node


def pe_distance(u: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(u[edge_index[0]] - u[edge_index[1]], dim=-1)


class GATEncoder(nn.Module):
    def __init__(self, in_dim: int, hidden: int, heads: int, layers: int, edge_dim: int | None,
                 in_drop: float, attn_drop: float):
        super().__init__()
        self.in_drop = in_drop
        self.convs = nn.ModuleList(
            GATConv(in_dim if i == 0 else hidden, hidden // heads, heads=heads, edge_dim=edge_dim, dropout=attn_drop)
            for i in range(layers))
        self.acts = nn.ModuleList(nn.PReLU() for _ in range(layers))

    def forward(self, x, edge_index, edge_attr=None, return_attention: bool = False):
        attention = None
        for i, (conv, act) in enumerate(zip(self.convs, self.acts)):
            x = F.dropout(x, self.in_drop, self.training)
            if return_attention and i == len(self.convs) - 1:
                x, attention = conv(x, edge_index, edge_attr, return_attention_weights=True)
            else:
                x = conv(x, edge_index, edge_attr)
            x = act(x)
        return x, attention


class MaskedGraphAutoEncoder(nn.Module):
    def __init__(self, in_dim: int, rung: Rung, s: dict):
        super().__init__()
        self.rung, self.s = rung, s
        m = s["model"]
        edge_dim = (m["n_basis"] + int(rung.hetero)) if rung.pe else None
        self.encoder = GATEncoder(in_dim, m["hidden"], m["heads"], m["layers"], edge_dim, m["in_drop"], m["attn_drop"])
        self.enc_to_dec = nn.Linear(m["hidden"], m["hidden"], bias=False)
        self.decoder = GATConv(m["hidden"], in_dim, heads=1, dropout=m["attn_drop"])
        self.mask_token = nn.Parameter(torch.zeros(1, in_dim))
        if rung.pe:
            self.pe_head = nn.Sequential(nn.Linear(m["hidden"], m["hidden"]), nn.PReLU(), nn.Linear(m["hidden"], 1))

    def edge_attr(self, dist: torch.Tensor, g: GraphTensors) -> torch.Tensor | None:
        """PE edge features (amplified + attention-bias channel gamma * M when ``hetero``)."""
        if not self.rung.pe:
            return None
        c = self.s["c2gmae"]
        if self.rung.hetero:
            dist = amplify(dist, g.hetero, c["beta"])
        feats = gaussian_basis(dist, self.s["model"]["n_basis"], c["dist_max"])
        if self.rung.hetero:
            feats = torch.cat([feats, c["gamma"] * g.hetero[:, None]], dim=1)
        return feats

    def reconstruct(self, g: GraphTensors, masked: torch.Tensor, gen: torch.Generator, return_attention=False):
        """Stream 1: masked features (clean PE) -> encoder -> re-mask -> decoder."""
        x_in, _, _ = corrupt(g.x, masked, self.s["train"]["replace_rate"], self.mask_token, gen)
        h, attention = self.encoder(x_in, g.edge_index, self.edge_attr(g.dist, g), return_attention)
        z = self.enc_to_dec(h).index_fill(0, masked, 0.0)
        return self.decoder(z, g.edge_index), attention

    def pe_loss(self, g: GraphTensors, masked: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Stream 2: clean features, noisy PE on masked nodes; reconstruct clean PE distances on
        edges leaving masked nodes (smooth-L1, heterophilic edges weighted 1 + lambda_h)."""
        c = self.s["c2gmae"]
        noise = (torch.rand(masked.numel(), g.u.shape[1], generator=gen) * 2 - 1) * c["pe_noise"]
        if self.rung.hetero:
            noise = noise * (1.0 + c["kappa"] * g.het_ratio[masked])[:, None]
        u_noisy = g.u.index_add(0, masked, noise)
        h, _ = self.encoder(g.x, g.edge_index, self.edge_attr(pe_distance(u_noisy, g.edge_index), g))
        src, dst = g.edge_index
        on = torch.isin(src, masked)
        pred = self.pe_head((h[src[on]] - h[dst[on]]).abs()).squeeze(-1)
        target = amplify(g.dist, g.hetero, c["beta"]) if self.rung.hetero else g.dist
        per_edge = F.smooth_l1_loss(pred, target[on], reduction="none", beta=1.0)
        if self.rung.hetero:
            per_edge = per_edge * (1.0 + c["lambda_h"] * g.hetero[on])
        return per_edge.mean()

    def loss(self, g: GraphTensors, masked: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        rec, _ = self.reconstruct(g, masked, gen)
        loss = sce_loss(rec[masked], g.x[masked], self.s["train"]["sce_gamma"])
        if self.rung.pe:
            loss = loss + self.s["c2gmae"]["w_pe"] * self.pe_loss(g, masked, gen)
        return loss

    @torch.no_grad()
    def embed(self, g: GraphTensors) -> torch.Tensor:
        self.eval()
        h, _ = self.encoder(g.x, g.edge_index, self.edge_attr(g.dist, g))
        return h
