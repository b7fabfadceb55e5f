"""Token losses (SFT, DFT, IDFT) and preference losses (DPO, SimPO), written against their formulas.

All token losses average over the target tokens of the batch (labels != -100), with the causal shift.

- SFT: -log p_t.
- DFT (dynamic fine-tuning): -sg(p_t) log p_t.
- IDFT, as in the paper and the published trainer (``fsdp_polylog_trainer.py`` at eb0f3e7, "update IDFT"):
  phi_t = log p_t + H(p_t), gamma_t = clamp(exp(-phi_t / beta), gamma_min, gamma_max), ramped from 1 (0 for
  the first ``warmup`` share of training, linear over ``transition``), loss -sg(p_t^gamma_t) log p_t: the
  whole weight is detached, as DFT's. (The initial commit e33b89c detached only gamma; differentiating
  p^gamma flips the gradient's sign for a token with p < exp(-1/gamma), pushing unlikely target tokens
  down; this miniature used that version until the upstream fix was found.) A token far out of the
  model's distribution (phi << 0) gets a large gamma, hence a small weight p^gamma.
- DPO: -log sigmoid(beta [(log pi(y_w) - log ref(y_w)) - (log pi(y_l) - log ref(y_l))]), summed
  sequence log-probabilities (TRL ``DPOTrainer``, loss_type "sigmoid").
- SimPO: -log sigmoid(beta (avg log pi(y_w) - avg log pi(y_l)) - gamma), length-averaged, no reference
  (TRL ``CPOTrainer`` with loss_type "simpo" and cpo_alpha 0: logits = avg_w - avg_l - gamma/beta,
  loss = -log sigmoid(beta logits)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor):
    """(log p of each label, log-softmax, valid mask) with the causal shift; shapes [b, n-1]."""
    logp_all = F.log_softmax(logits[:, :-1].float(), dim=-1)
    lab = labels[:, 1:]
    mask = lab != -100
    logp = logp_all.gather(-1, lab.clamp(min=0)[..., None])[..., 0]
    return logp, logp_all, mask


def _mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1)


def sft_loss(logits, labels):
    logp, _, mask = token_logprobs(logits, labels)
    return _mean(-logp, mask)


def dft_loss(logits, labels):
    logp, _, mask = token_logprobs(logits, labels)
    return _mean(-logp.detach().exp() * logp, mask)


def idft_gamma(logp: torch.Tensor, logp_all: torch.Tensor, beta: float, gamma_min: float, gamma_max: float,
               ramp: float = 1.0) -> torch.Tensor:
    """gamma_t (detached): clamp(exp(-phi_t / beta)), moved from 1 towards it by ``ramp`` in [0, 1]."""
    with torch.no_grad():
        phi = logp + -(logp_all.exp() * logp_all).sum(-1)
        raw = torch.exp(-phi / beta).clamp(gamma_min, gamma_max)
        return 1.0 + ramp * (raw - 1.0)


def idft_ramp(step: int, total: int, warmup: float, transition: float) -> float:
    """The published schedule of gamma's weight: 0 during warm-up, linear over the transition, then 1."""
    progress = step / max(1, total)
    if progress < warmup:
        return 0.0
    if transition > 0 and progress < warmup + transition:
        return (progress - warmup) / transition
    return 1.0


def idft_loss(logits, labels, beta: float = 1.0, gamma_min: float = 0.1, gamma_max: float = 2.0, ramp: float = 1.0):
    logp, logp_all, mask = token_logprobs(logits, labels)
    gamma = idft_gamma(logp, logp_all, beta, gamma_min, gamma_max, ramp)
    p = logp.exp().clamp(1e-10, 1.0)
    return _mean(-(p ** gamma).detach() * torch.log(p), mask)


def sequence_logprob(logits, labels, average: bool = False) -> torch.Tensor:
    """Sum (or mean) of log p over each sequence's target tokens: [b]."""
    logp, _, mask = token_logprobs(logits, labels)
    total = (logp * mask).sum(-1)
    return total / mask.sum(-1).clamp(min=1) if average else total


def dpo_loss(pi_w, pi_l, ref_w, ref_l, beta: float = 0.1) -> torch.Tensor:
    return -F.logsigmoid(beta * ((pi_w - ref_w) - (pi_l - ref_l))).mean()


def simpo_loss(avg_w, avg_l, beta: float = 2.0, gamma: float = 1.0) -> torch.Tensor:
    return -F.logsigmoid(beta * ((avg_w - avg_l) - gamma / beta)).mean()


TOKEN_LOSSES = {"sft": sft_loss, "dft": dft_loss, "idft": idft_loss}
