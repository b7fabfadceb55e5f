"""Mini-batches of alignment pairs: both graphs of every pair as one disjoint union per side.

A batch holds the base graphs' and the corrupted graphs' edge indices, each shifted by the node
offsets of the pairs before it, ``perm`` (the corrupted index of every base node, local to its graph,
which is what the per-graph dense similarity blocks need) and the graph id of every node (``batch``;
a pair's two graphs have the same size, so one vector serves both sides).

``PairData`` is the same pair as a PyG ``Data`` whose ``__inc__`` shifts the two edge indices by their
own graph sizes, so PyG's ``DataLoader`` batches it; ``loader`` builds exactly the tensors that
``DataLoader`` makes of ``PairData`` (the same sampler and generator draws, hence the same batches and
order; tests/test_graph_alignment.py checks the equality) with a plain concatenation, which costs a
fraction of PyG's generic collation (it ran for every step of every model).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader
from torch_geometric.data import Data


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


@dataclass
class PairBatch:
    """The fields of a PyG batch of ``PairData`` that training and scoring read."""

    edge_index_b: torch.Tensor
    edge_index_c: torch.Tensor
    perm: torch.Tensor
    batch: torch.Tensor
    num_nodes: int
    num_graphs: int


def _pair_tensors(pair: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    return undirected(pair["base"]), undirected(pair["corrupted"]), pair["perm"], int(pair["n"])


def collate_pairs(items: list[tuple]) -> PairBatch:
    sizes = [n for *_, n in items]
    offsets = [0]
    for n in sizes[:-1]:
        offsets.append(offsets[-1] + n)
    return PairBatch(edge_index_b=torch.cat([b + o for (b, _, _, _), o in zip(items, offsets)], dim=1),
                     edge_index_c=torch.cat([c + o for (_, c, _, _), o in zip(items, offsets)], dim=1),
                     perm=torch.cat([p for _, _, p, _ in items]),
                     batch=torch.repeat_interleave(torch.arange(len(items)), torch.tensor(sizes)),
                     num_nodes=sum(sizes), num_graphs=len(items))


def loader(pairs: list[dict], batch_size: int, shuffle: bool, seed: int) -> DataLoader:
    """Batches of ``batch_size`` pairs (shuffled each epoch by a generator seeded with ``seed``), the
    same batches as ``torch_geometric.loader.DataLoader`` over ``to_data`` of the pairs."""
    g = torch.Generator().manual_seed(seed)
    return DataLoader([_pair_tensors(p) for p in pairs], batch_size=batch_size, shuffle=shuffle, generator=g,
                      collate_fn=collate_pairs)


def node_batches(batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Graph id of every base node and every corrupted node in a batch.

    ``num_nodes`` of a pair is its (shared) graph size, so PyG's ``batch`` vector serves both sides.
    """
    return batch.batch, batch.batch
