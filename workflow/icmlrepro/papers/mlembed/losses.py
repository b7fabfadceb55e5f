"""The training objective: InfoNCE (1 positive + hard negatives + in-batch) at temperature tau, summed
over Matryoshka output dims with the published weights and averaged over MLL exits; MEL's rank sampler.

Written here rather than taken from sentence-transformers: its MatryoshkaLoss weights dims uniformly by
default and its wrappers need a SentenceTransformer module; the published weighting
1 / (n * sqrt(d / dim)) (n = rank of dim in descending order) is a few lines.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


def mrl_dims(d: int, smallest: int) -> list[int]:
    """{smallest, 2*smallest, ...} < d, plus d (ascending)."""
    out, k = [], smallest
    while k < d:
        out.append(k)
        k *= 2
    return out + [d]


def mrl_weights(dims, d: int) -> dict[int, float]:
    """Weight 1 / (n * sqrt(d / dim)), n = 1 for the largest dim, 2 for the next, ..."""
    return {dim: 1.0 / (n * math.sqrt(d / dim)) for n, dim in enumerate(sorted(set(dims), reverse=True), start=1)}


def info_nce(q, pos, neg, tau: float, concept=None) -> torch.Tensor:
    """Cross-entropy of each query over [all positives of the batch, its own hard negatives] (cosine / tau).
    ``concept`` (batch ids) masks in-batch positives of the same concept as another query (not negatives)."""
    q, pos, neg = F.normalize(q, dim=-1), F.normalize(pos, dim=-1), F.normalize(neg, dim=-1)
    inbatch = q @ pos.T
    if concept is not None:
        same = (concept[:, None] == concept[None, :]) & ~torch.eye(len(q), dtype=torch.bool)
        inbatch = inbatch.masked_fill(same, float("-inf"))
    hard = torch.einsum("bd,bkd->bk", q, neg)
    logits = torch.cat([inbatch, hard], dim=1) / tau
    return F.cross_entropy(logits, torch.arange(len(q)))


def matryoshka_loss(qs, ps, ns, dims, tau: float, concept=None) -> torch.Tensor:
    """Mean over exits of sum over dims of w(dim) * InfoNCE on the first dim coordinates.
    ``qs``/``ps``: lists over exits of (batch x d); ``ns``: lists of (batch x k x d)."""
    d = qs[0].shape[-1]
    w = mrl_weights(dims, d)
    per_exit = [sum(w[m] * info_nce(q[:, :m], p[:, :m], n[..., :m], tau, concept) for m in dims)
                for q, p, n in zip(qs, ps, ns)]
    return torch.stack(per_exit).mean()


def sample_rank(ranks, rng: np.random.Generator) -> int:
    """MEL: one rank per step from ``ranks`` (which include the full rank) with probability proportional to it."""
    r = np.asarray(sorted(ranks), dtype=float)
    return int(rng.choice(r, p=r / r.sum()))
