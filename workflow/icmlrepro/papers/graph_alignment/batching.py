"""Pairs of graphs as PyG ``Data`` so that the standard ``DataLoader`` batches them.

Each pair carries both graphs' edge indices; ``__inc__`` shifts the base and corrupted indices by
their own graph sizes when pairs are concatenated, and ``perm`` (the corrupted index of every base
node) stays local to its graph, which is what the per-graph dense similarity blocks need.
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader


class PairData(Data):
    def __inc__(self, key, value, *args, **kwargs):
        if key == "edge_index_b":
            return self.num_nodes_b
        if key == "edge_index_c":
            return self.num_nodes_c
        return super().__inc__(key, value, *args, **kwargs)


def undirected(edges: torch.Tensor) -> torch.Tensor:
    """(2, m) with u < v -> both directions, as PyG layers expect."""
    return torch.cat([edges, edges.flip(0)], dim=1)


def to_data(pair: dict) -> PairData:
    n = int(pair["n"])
    return PairData(edge_index_b=undirected(pair["base"]), edge_index_c=undirected(pair["corrupted"]),
                    num_nodes_b=n, num_nodes_c=n, perm=pair["perm"].clone(), num_nodes=n)


def loader(pairs: list[dict], batch_size: int, shuffle: bool, seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    return DataLoader([to_data(p) for p in pairs], batch_size=batch_size, shuffle=shuffle, generator=g)


def node_batches(batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Graph id of every base node and every corrupted node in a batch.

    ``num_nodes`` of a pair is its (shared) graph size, so PyG's ``batch`` vector serves both sides.
    """
    return batch.batch, batch.batch
