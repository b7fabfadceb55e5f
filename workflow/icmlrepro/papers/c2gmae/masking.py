"""Which nodes are masked and how: GraphMAE's uniform masking and C2-GMAE's density partition.

GraphMAE masks ``int(rate * N)`` uniformly random nodes; of these, a share ``1 - replace_rate``
gets its features zeroed plus a learnable mask token and ``replace_rate`` gets the features of
random other nodes. C2-GMAE sorts nodes by feature density (mean cosine to their 1- and 2-hop
neighbours), cuts them into equal bins and draws an equal quota from every bin, so that sparse
and dense regions are masked (trained on) alike. Coverage = share of nodes masked at least once
within a window of consecutive epochs, per density bin.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch


def node_density(x: np.ndarray, edge_index: np.ndarray) -> np.ndarray:
    """Mean feature cosine of each node to its 1- and 2-hop neighbours (itself excluded); 0 if isolated."""
    n = x.shape[0]
    a = sp.csr_matrix((np.ones(edge_index.shape[1]), (edge_index[0], edge_index[1])), shape=(n, n))
    reach = ((a + a @ a) > 0).astype(np.float64).tolil()
    reach.setdiag(0)
    reach = reach.tocsr()
    xn = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    sims = np.asarray((reach.multiply(xn @ xn.T)).sum(1)).ravel()
    count = np.asarray(reach.sum(1)).ravel()
    return np.where(count > 0, sims / np.maximum(count, 1), 0.0)


def density_bins(density: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin id per node: nodes sorted by density (descending), cut into ``n_bins`` equal parts
    (the last takes the remainder), bin 0 = densest."""
    order = np.argsort(-density, kind="stable")
    size = len(density) // n_bins
    bins = np.empty(len(density), dtype=np.int64)
    for b in range(n_bins):
        end = (b + 1) * size if b < n_bins - 1 else len(density)
        bins[order[b * size:end]] = b
    return bins


def uniform_mask(n: int, rate: float, gen: torch.Generator) -> torch.Tensor:
    """GraphMAE: ``int(rate * n)`` nodes drawn uniformly without replacement."""
    return torch.randperm(n, generator=gen)[: int(rate * n)]


def density_partitioned_mask(bins: torch.Tensor, rate: float, gen: torch.Generator) -> torch.Tensor:
    """C2-GMAE: an equal quota ``int(rate * n) // n_bins`` from every density bin (at most the bin's size).

    The public code drops the remainder ``int(rate * n) % n_bins``, which masks fewer nodes than
    uniform masking at the same rate; here one extra node is drawn from that many randomly chosen
    bins, so both strategies mask exactly ``int(rate * n)`` nodes and differ only in how evenly.
    """
    n_bins = int(bins.max()) + 1
    total = int(rate * bins.numel())
    quota = torch.full((n_bins,), total // n_bins, dtype=torch.long)
    quota[torch.randperm(n_bins, generator=gen)[: total % n_bins]] += 1
    picks = []
    for b in range(n_bins):
        members = torch.nonzero(bins == b).flatten()
        picks.append(members[torch.randperm(members.numel(), generator=gen)[: int(quota[b])]])
    return torch.cat(picks)


def corrupt(x: torch.Tensor, masked: torch.Tensor, replace_rate: float, token: torch.Tensor,
            gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GraphMAE's corruption of the masked nodes' features.

    Returns the corrupted features, the token nodes (zeroed + mask token) and the replaced nodes
    (features of uniformly drawn other nodes); their union is ``masked``.
    """
    m = masked.numel()
    n_replace = int(replace_rate * m)
    perm = masked[torch.randperm(m, generator=gen)]
    token_nodes, replaced = perm[: m - n_replace], perm[m - n_replace:]
    out = x.clone()
    out[token_nodes] = 0.0
    out[token_nodes] = out[token_nodes] + token
    if n_replace:
        out[replaced] = x[torch.randperm(x.shape[0], generator=gen)[:n_replace]]
    return out, token_nodes, replaced


def coverage_per_bin(mask_history: list[np.ndarray], bins: np.ndarray, window: int) -> np.ndarray:
    """Mean over non-overlapping windows of ``window`` epochs of the share of each bin's nodes
    masked at least once in the window; one value per density bin."""
    n_bins = int(bins.max()) + 1
    n_windows = len(mask_history) // window
    if n_windows == 0:
        raise ValueError(f"coverage window {window} is longer than the {len(mask_history)} epochs")
    per_window = []
    for w in range(n_windows):
        seen = np.zeros(len(bins), dtype=bool)
        for masked in mask_history[w * window:(w + 1) * window]:
            seen[masked] = True
        per_window.append(np.bincount(bins, weights=seen, minlength=n_bins) / np.bincount(bins, minlength=n_bins))
    return np.mean(per_window, axis=0)
