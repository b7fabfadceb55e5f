"""The rewards of the RL arms: the paper's batch-level CCC reward, its shuffled-pairing control, the point-wise
regression reward, and the format reward that every arm adds.

CCC reward (the brief, from the authors' README): for input i with K sampled answers q_ik and their mean
mu_i = mean_k q_ik, the reward of q_ik is CCC(x, y) with x = [q_ik, {mu_j}_{j != i}], y = [y_i, {y_j}_{j != i}]
over the batch, CCC = 2 cov(x, y) / (var x + var y + (mean x - mean y)^2) with population (1/n) moments, and 0
where it is undefined (a zero denominator). So one answer is scored by how well the whole batch's predicted
distribution agrees with the targets' once that answer stands in for its input: a relational, not point-wise,
signal. Assumptions where the brief is silent: an answer that does not parse gets CCC reward 0; mu_j is the
mean of input j's answers that parse, and an input with none is left out of every other input's context.
"""

from __future__ import annotations

import numpy as np


def ccc(x: np.ndarray, y: np.ndarray) -> float:
    """Concordance correlation coefficient with population moments; 0 where undefined (zero denominator or
    fewer than two points)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2:
        return 0.0
    mx, my = x.mean(), y.mean()
    cov = ((x - mx) * (y - my)).mean()
    den = x.var() + y.var() + (mx - my) ** 2
    return float(2.0 * cov / den) if den > 0 else 0.0


def ccc_rewards(q: np.ndarray, y: np.ndarray, context_perm: np.ndarray | None = None) -> np.ndarray:
    """(B, K) CCC rewards of answers ``q`` (NaN where an answer does not parse) to inputs with targets ``y``.

    ``context_perm`` (the shuffled-pairing control): a permutation of the batch applied to the context
    targets, so that input j's mean answer mu_j is paired with y_{perm[j]}: the same reward formula with the
    cross-sample relation destroyed (each answer is still paired with its own target)."""
    q, y = np.asarray(q, float), np.asarray(y, float)
    B, K = q.shape
    ok = np.isfinite(q)
    mu = np.array([q[j, ok[j]].mean() if ok[j].any() else np.nan for j in range(B)])
    y_ctx = y if context_perm is None else y[np.asarray(context_perm)]
    out = np.zeros((B, K))
    for i in range(B):
        others = np.array([j for j in range(B) if j != i and np.isfinite(mu[j])], dtype=int)
        for k in range(K):
            if ok[i, k]:
                out[i, k] = ccc(np.r_[q[i, k], mu[others]], np.r_[y[i], y_ctx[others]])
    return out


def pointwise_rewards(q: np.ndarray, y: np.ndarray, y_range: float) -> np.ndarray:
    """Point-wise regression reward -|q - y| / y_range (the scale keeps it beside the format reward of 1; the
    group z-scoring removes it whenever a group's answers all parse); -1 for an answer that does not parse."""
    q = np.asarray(q, float)
    err = np.abs(q - np.asarray(y, float)[:, None]) / y_range
    return np.where(np.isfinite(q), -err, -1.0)


def format_rewards(q: np.ndarray) -> np.ndarray:
    """1 where the answer parses as a number of the required form, else 0."""
    return np.isfinite(np.asarray(q, float)).astype(float)


def shuffled_context(batch: int, rng: np.random.Generator) -> np.ndarray:
    """A permutation without fixed points (a cyclic shift of a random order): no context target stays with
    its own input's mean answer."""
    order = rng.permutation(batch)
    perm = np.empty(batch, dtype=int)
    perm[order] = np.roll(order, 1)
    return perm


def total_rewards(kind: str, q: np.ndarray, y: np.ndarray, y_range: float, rng: np.random.Generator) -> np.ndarray:
    """Accuracy reward of arm ``kind`` plus the format reward, (B, K)."""
    if kind == "pointwise":
        acc = pointwise_rewards(q, y, y_range)
    elif kind == "ccc":
        acc = ccc_rewards(q, y)
    elif kind == "ccc_shuffled":
        acc = ccc_rewards(q, y, shuffled_context(len(y), rng))
    else:
        raise ValueError(f"unknown reward {kind!r}")
    return acc + format_rewards(q)
