"""The rewards of the RL arms: the paper's batch-level CCC reward, its control without the cross-sample terms
(``ccc_solo``), the point-wise regression reward, and the format reward that every arm adds.

CCC reward (the brief, from the authors' README): for input i with K sampled answers q_ik and their mean
mu_i = mean_k q_ik, the reward of q_ik is CCC(x, y) with x = [q_ik, {mu_j}_{j != i}], y = [y_i, {y_j}_{j != i}]
over the batch, CCC = 2 cov(x, y) / (var x + var y + (mean x - mean y)^2) with population (1/n) moments, and 0
where it is undefined (a zero denominator). So one answer is scored by how well the whole batch's predicted
distribution agrees with the targets' once that answer stands in for its input: a relational, not point-wise,
signal. Assumptions where the brief is silent: an answer that does not parse gets CCC reward 0; mu_j is the
mean of input j's answers that parse, and an input with none is left out of every other input's context.

Control ``ccc_solo`` (CCC without the cross-sample terms): the same formula over the same batch, but the other
inputs' entries of x are their *targets*, x = [q_ik, {y_j}_{j != i}]: the other answers no longer enter, so the
reward of q_ik depends on q_ik, y_i and the batch's targets only. Since x and y then differ in one entry by
d = q_ik - y_i, CCC = 1 - (d^2 / n) / (var x + var y + (d / n)^2): a point-wise, squared-error-like reward with the
batch's scale (a credible competitor: it rewards the exact answer most), without the relational signal that pays
an answer for widening a shrunk batch of predictions.
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


def ccc_rewards(q: np.ndarray, y: np.ndarray, solo: bool = False) -> np.ndarray:
    """(B, K) CCC rewards of answers ``q`` (NaN where an answer does not parse) to inputs with targets ``y``.

    ``solo`` (the control without cross-sample terms): the context entries of x are the other inputs' targets
    instead of their mean answers (every other input stays in the context: its target is always defined)."""
    q, y = np.asarray(q, float), np.asarray(y, float)
    B, K = q.shape
    ok = np.isfinite(q)
    mu = y.copy() if solo else np.array([q[j, ok[j]].mean() if ok[j].any() else np.nan for j in range(B)])
    out = np.zeros((B, K))
    for i in range(B):
        others = np.array([j for j in range(B) if j != i and np.isfinite(mu[j])], dtype=int)
        for k in range(K):
            if ok[i, k]:
                out[i, k] = ccc(np.r_[q[i, k], mu[others]], np.r_[y[i], y[others]])
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


def total_rewards(kind: str, q: np.ndarray, y: np.ndarray, y_range: float) -> np.ndarray:
    """Accuracy reward of arm ``kind`` plus the format reward, (B, K)."""
    if kind == "pointwise":
        acc = pointwise_rewards(q, y, y_range)
    elif kind == "ccc":
        acc = ccc_rewards(q, y)
    elif kind == "ccc_solo":
        acc = ccc_rewards(q, y, solo=True)
    else:
        raise ValueError(f"unknown reward {kind!r}")
    return acc + format_rewards(q)
