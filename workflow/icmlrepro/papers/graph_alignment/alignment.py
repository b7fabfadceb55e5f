"""The alignment task's loss and metrics, shared by training, evaluation and the tests.

For a pair (base graph, corrupted copy) the siamese GNN gives node embeddings E_b and E_c; the
similarity S = E_b E_c^T scores every base node against every corrupted node. Training minimises
the mean over base nodes of -log softmax(S)_{i, perm(i)}. Top-k recall counts a base node as found
when fewer than k other corrupted nodes score at least as high as its true partner (ties, up to float32
rounding, count against the model, so constant embeddings score 0, not 1). LAP accuracy is the share of
nodes a one-to-one Hungarian matching on softmax(S) maps to their true partner.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from scipy.stats import kendalltau


def dense_similarity(hb: torch.Tensor, batch_b: torch.Tensor, hc: torch.Tensor, batch_c: torch.Tensor):
    """Per-graph similarity blocks S (B, n, n) with node masks of the base and corrupted graphs."""
    from torch_geometric.utils import to_dense_batch

    db, mb = to_dense_batch(hb, batch_b)
    dc, mc = to_dense_batch(hc, batch_c, max_num_nodes=db.shape[1])
    if dc.shape[1] != db.shape[1]:
        raise ValueError("base and corrupted graphs of a pair must have the same number of nodes")
    return db @ dc.transpose(1, 2), mb, mc


def alignment_loss(sim: torch.Tensor, mask_b: torch.Tensor, mask_c: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over valid base nodes of -log softmax over valid corrupted nodes at the true partner.

    ``target`` (B, n): the corrupted-graph index of each base node (any value where mask_b is False).
    """
    logits = sim.masked_fill(~mask_c[:, None, :], float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked[mask_b]).mean()


TIE_TOLERANCE = 1e-5


def topk_hits(sim: np.ndarray, perm: np.ndarray, ks=(1, 3, 5)) -> dict[int, np.ndarray]:
    """Per base node, whether its true partner is in the top k (pessimistic on ties).

    Scores within ``TIE_TOLERANCE`` times the largest |score| of the partner's count as ties: a model
    whose embeddings are identical up to float32 rounding (which depends on the summation order, hence
    on the degree) must not be credited for the rounding.
    """
    true = sim[np.arange(sim.shape[0]), perm]
    tol = TIE_TOLERANCE * max(float(np.abs(sim).max()), 1e-12)
    at_least = (sim >= true[:, None] - tol).sum(axis=1) - 1  # other nodes scoring >= the partner
    return {k: at_least < k for k in ks}


def lap_matching(sim: np.ndarray) -> np.ndarray:
    """Hungarian one-to-one matching on the row-softmax of S; returns the matched column per row."""
    z = sim - sim.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    rows, cols = linear_sum_assignment(p, maximize=True)
    out = np.empty(sim.shape[0], dtype=np.int64)
    out[rows] = cols
    return out


def pair_scores(sim: np.ndarray, perm: np.ndarray, ks=(1, 3, 5)) -> dict[str, float]:
    """top-k recalls and LAP accuracy of one pair (sim restricted to its valid n x n block)."""
    hits = topk_hits(sim, perm, ks)
    out = {f"top{k}": float(h.mean()) for k, h in hits.items()}
    tol = TIE_TOLERANCE * max(float(np.abs(sim).max()), 1e-12)  # rounding noise must not steer the matching
    out["lap"] = float((lap_matching(np.round(sim / tol) * tol) == perm).mean())
    return out


def kendall(a, b) -> float:
    """Kendall tau-b of two score vectors; 0 when either has no spread (no ranking information)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(kendalltau(a, b).statistic)


def leave_one_out_rank_stability(scores: np.ndarray) -> np.ndarray:
    """scores (seeds, models): per seed, Kendall tau between its model ranking and the ranking by the
    mean score of the other seeds. High = a seed's ranking is reproduced by independent seeds."""
    scores = np.asarray(scores, float)
    s = scores.shape[0]
    if s < 2:
        raise ValueError("rank stability needs at least two seeds")
    return np.array([kendall(scores[i], np.delete(scores, i, axis=0).mean(axis=0)) for i in range(s)])
