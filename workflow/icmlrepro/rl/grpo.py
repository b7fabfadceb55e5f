"""GRPO (Group Relative Policy Optimisation, DeepSeekMath 2024) as a small, tested loop, plus Q-PAS.

Shared by the papers that fine-tune with GRPO (CofactGVR; its API is the one ccc_grpo's own copy uses, so
that copy can import this instead). Why not TRL's ``GRPOTrainer``: it drives a language model through
``generate`` on text prompts; the miniature policies here are small torch modules (CofactGVR: a two-step
evidence-cell-then-answer policy over a cell map), so the trainer does not apply. Nothing in this module
knows a paper: a caller supplies per-token log-probabilities (``n x T`` with a mask), rewards laid out group
by group, and a function that recomputes the current policy's log-probabilities for a set of rollouts.

The objective, per rollout i of a group of G and per token t (token-level, as in DeepSeekMath and TRL):
    A_i      = (r_i - mean(r_group)) / (std(r_group) + eps)          (std with Bessel's correction, as TRL)
    rho_it   = exp(logp_theta - logp_old)
    L_it     = min(rho_it A_i, clip(rho_it, 1 - eps_clip, 1 + eps_clip) A_i) - beta * KL_it
    KL_it    = exp(logp_ref - logp_theta) - (logp_ref - logp_theta) - 1   (the k3 estimator, >= 0)
    loss     = - mean_i [ sum_t mask_it L_it / sum_t mask_it ]
Q-PAS (CofactGVR): keep rollouts whose |A| reaches the q-quantile of |A| in their group (and |A| > 0),
then draw update samples from the kept ones with probability proportional to |A|.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4) -> torch.Tensor:
    """Group z-scored advantages of rewards laid out group by group (``n_groups * group_size``).
    A group whose rewards are all equal gets advantage 0 (no signal), not NaN."""
    r = rewards.reshape(-1, group_size).to(torch.float64)
    mean = r.mean(1, keepdim=True)
    std = r.std(1, keepdim=True, correction=1) if group_size > 1 else torch.zeros_like(mean)
    return ((r - mean) / (std + eps)).reshape(-1).to(rewards.dtype)


def kl_k3(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi_theta || pi_ref) from the sampled token: exp(d) - d - 1, d = ref - theta."""
    d = logp_ref - logp
    return torch.exp(d) - d - 1.0


def clipped_surrogate(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor,
                      clip_eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-token PPO-clip surrogate, per-token "clipped" indicator). ``adv`` is per rollout (n,)."""
    ratio = torch.exp(logp - logp_old)
    a = adv[:, None]
    unclipped, clipped = ratio * a, torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * a
    return torch.minimum(unclipped, clipped), (clipped < unclipped)


def grpo_loss(logp: torch.Tensor, logp_old: torch.Tensor, logp_ref: torch.Tensor, adv: torch.Tensor,
              mask: torch.Tensor, clip_eps: float, beta: float) -> tuple[torch.Tensor, dict]:
    """The GRPO loss (to minimise) and its diagnostics (clip fraction, mean KL)."""
    surr, was_clipped = clipped_surrogate(logp, logp_old, adv, clip_eps)
    kl = kl_k3(logp, logp_ref)
    m = mask.to(logp.dtype)
    per_token = surr - beta * kl
    per_seq = (per_token * m).sum(1) / m.sum(1).clamp_min(1.0)
    n_tok = m.sum().clamp_min(1.0)
    stats = {"clip_fraction": float((was_clipped.to(m.dtype) * m).sum() / n_tok),
             "kl": float((kl.detach() * m).sum() / n_tok)}
    return -per_seq.mean(), stats


def qpas_keep(adv: torch.Tensor, group_size: int, quantile: float) -> torch.Tensor:
    """Q-PAS filter: True where |A| >= the ``quantile`` of |A| within the rollout's group and |A| > 0."""
    a = adv.abs().reshape(-1, group_size)
    thr = torch.quantile(a.to(torch.float64), quantile, dim=1, keepdim=True).to(a.dtype)
    return ((a >= thr) & (a > 0)).reshape(-1)


def qpas_draw(adv: torch.Tensor, keep: torch.Tensor, n_draw: int, rng: np.random.Generator) -> np.ndarray:
    """Q-PAS sampling: ``n_draw`` rollout indices from the kept ones, with replacement, probability
    proportional to |A|. Empty when nothing is kept (no update from a batch without signal)."""
    w = (adv.abs() * keep.to(adv.dtype)).to(torch.float64).numpy()
    if w.sum() <= 0:
        return np.zeros(0, dtype=np.int64)
    return rng.choice(len(w), size=n_draw, replace=True, p=w / w.sum())


def uniform_minibatches(n: int, n_minibatches: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Plain GRPO's schedule: one shuffled pass over the rollouts, split into ``n_minibatches``."""
    return [b for b in np.array_split(rng.permutation(n), n_minibatches) if len(b)]


@dataclass(frozen=True)
class GRPOConfig:
    clip_eps: float = 0.2
    beta: float = 0.04          # KL weight (DeepSeekMath's value)
    epochs: int = 2             # optimisation passes over one batch of rollouts (mu)
    minibatches: int = 4        # gradient steps per pass
    qpas: bool = False          # Q-PAS (needs ``group_size`` in ``update``)
    qpas_quantile: float = 0.5


def update(recompute_logp: Callable[[np.ndarray], torch.Tensor], logp_old: torch.Tensor, logp_ref: torch.Tensor,
           adv: torch.Tensor, mask: torch.Tensor, opt: torch.optim.Optimizer, cfg: GRPOConfig,
           rng: np.random.Generator, group_size: int | None = None) -> dict:
    """One GRPO update on a batch of rollouts: ``cfg.epochs * cfg.minibatches`` gradient steps (equal compute
    with and without Q-PAS); with Q-PAS each step's samples are drawn from the kept rollouts by priority |A|
    (as many per step as a uniform minibatch holds). ``recompute_logp(idx)`` returns the current policy's
    per-token log-probabilities of rollouts ``idx`` (with gradient); ``logp_old`` are those of the policy
    that sampled them (the ratio's base)."""
    n = len(adv)
    if cfg.qpas and not group_size:
        raise ValueError("Q-PAS filters within groups: pass group_size")
    keep = qpas_keep(adv, group_size, cfg.qpas_quantile) if cfg.qpas else torch.ones(n, dtype=torch.bool)
    per_step = int(np.ceil(n / cfg.minibatches))
    stats = {"kept_fraction": float(keep.float().mean()), "steps": 0, "clip_fraction": 0.0, "kl": 0.0}
    for _ in range(cfg.epochs):
        if cfg.qpas:
            draws = qpas_draw(adv, keep, per_step * cfg.minibatches, rng)
            batches = [draws[i:i + per_step] for i in range(0, len(draws), per_step)]
        else:
            batches = uniform_minibatches(n, cfg.minibatches, rng)
        for idx in batches:
            loss, st = grpo_loss(recompute_logp(idx), logp_old[idx], logp_ref[idx], adv[idx], mask[idx],
                                 cfg.clip_eps, cfg.beta)
            opt.zero_grad()
            loss.backward()
            opt.step()
            stats["steps"] += 1
            stats["clip_fraction"] += st["clip_fraction"]
            stats["kl"] += st["kl"]
    if stats["steps"]:
        stats["clip_fraction"] /= stats["steps"]
        stats["kl"] /= stats["steps"]
    return stats
