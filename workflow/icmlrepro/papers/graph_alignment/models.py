"""The siamese GNN zoo: isotropic and anisotropic message passing from torch_geometric.

Isotropic layers weigh every neighbour the same (up to a degree normalisation): GCN, GIN, SGC,
TAGCN. Anisotropic layers weigh neighbours by a learned function of both endpoints: GAT, GATv2,
gated GCN (ResGatedGraphConv) and the graph transformer convolution. Every model has the same
width, depth, input encoding and head, so only the layer type differs.

Input features are structural only: an embedding of the (clipped) node degree. The paper feeds
all-ones features; with those, attention layers whose weights sum to one (GAT, GATv2, Transformer
conv) average identical vectors and can never tell nodes apart, so the degree is the smallest
structure-only input on which the comparison is meaningful (claims file, assumptions).
"""

from __future__ import annotations

import torch
from torch import nn

ISOTROPIC = ("gcn", "gin", "sgc", "tagcn")
ANISOTROPIC = ("gat", "gatv2", "gatedgcn", "transformer")
MODELS = ISOTROPIC + ANISOTROPIC


def _conv(kind: str, h: int, heads: int, layers: int):
    import torch_geometric.nn as gnn

    if kind == "gcn":
        return gnn.GCNConv(h, h)
    if kind == "gin":
        return gnn.GINConv(nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h)))
    if kind == "sgc":
        return gnn.SGConv(h, h, K=layers)
    if kind == "tagcn":
        return gnn.TAGConv(h, h, K=2)
    if kind == "gat":
        return gnn.GATConv(h, h // heads, heads=heads)
    if kind == "gatv2":
        return gnn.GATv2Conv(h, h // heads, heads=heads)
    if kind == "gatedgcn":
        return gnn.ResGatedGraphConv(h, h)
    if kind == "transformer":
        return gnn.TransformerConv(h, h // heads, heads=heads)
    raise ValueError(f"unknown model {kind!r} (known: {', '.join(MODELS)})")


class AlignmentGNN(nn.Module):
    """Degree embedding -> ``layers`` residual convolutions with ReLU -> linear head.

    SGC is by definition one linear propagation of ``layers`` hops, so it gets a single convolution.
    """

    def __init__(self, kind: str, hidden: int, layers: int, heads: int, max_degree: int):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        self.kind, self.max_degree = kind, max_degree
        self.embed = nn.Embedding(max_degree + 1, hidden)
        n_convs = 1 if kind == "sgc" else layers
        self.convs = nn.ModuleList(_conv(kind, hidden, heads, layers) for _ in range(n_convs))
        self.head = nn.Linear(hidden, hidden)

    def forward(self, edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
        from torch_geometric.utils import degree

        deg = degree(edge_index[0], num_nodes, dtype=torch.long).clamp(max=self.max_degree)
        x = self.embed(deg)
        for conv in self.convs:
            x = x + torch.relu(conv(x, edge_index))
        return self.head(x)


def build(kind: str, p) -> AlignmentGNN:
    return AlignmentGNN(kind, p["hidden"], p["layers"], p["heads"], p["max_degree"])
