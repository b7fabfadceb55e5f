"""The online arms: how a draft is updated after each chunk from that chunk's verification feedback.

Every arm spends the same compute per chunk, ``steps`` minibatch gradient steps on the draft (the
ensembles split them over their base drafts), with the same loss, the soft cross-entropy to the
target's distributions, except OSD's, which only counts positions where the draft was rejected.
Every arm is set by one effective step ``step = lr / (1 - momentum)`` (tuned on one grid for all
arms, ``online.run_tune``); the ensembles' base rates are that step times ``ensemble_factors``.

Published-code forms:

- ``offline``: the draft is never updated.
- ``ogd``: online gradient descent (SGD, one learning rate); no state carried between chunks.
- ``osd``: Online Speculative Decoding (Liu et al.): distillation on rejected positions only.
- ``optimistic``: optimistic online learning with historical gradients as the hint, i.e. SGD with
  momentum whose buffer persists across chunks (the published code's form).
- ``ensemble``: online ensemble: the draft used is the weight-space average of base drafts with
  weights softmax(-loss / T); each chunk every base restarts from that average and trains at its own
  learning rate; its mean *training* loss on the chunk sets the next weights.

Textbook forms, beside them:

- ``optimistic_ogd``: optimistic OGD (Rakhlin & Sridharan; Chiang et al.) with the last gradient as
  the hint: a secondary iterate w^ takes the plain OGD steps, the played draft is w^ - lr * hint, and
  the hint is removed at the next step (:class:`OptimisticSGD`); its state persists across chunks.
- ``hedge``: Hedge (exponential weights) over learning rates: independent OGD experts, one per base
  rate plus a zero-step expert (learning rate 0: the offline draft, never updated, so Hedge can fall
  back to it when updates hurt); no expert restarts from the others. Before training on a chunk each
  expert's loss on it (a loss on data it has not seen: the next-chunk loss) is added to its cumulative
  loss L_i; the played draft is the *mixture* of the experts' next-token distributions,
  q = sum_i w_i q_i with w = softmax(-L / T) (:func:`hedge_weights`, :class:`MixtureDraft`), not a
  weight-space average. The zero-step expert trains nothing: the trained experts keep
  ``steps // len(base rates)`` steps each, the same split and total as the ensemble's. Drafting with
  the mixture costs one forward pass per expert per drafted token (acceptance length does not see it;
  the measured wall-clock speedup does).
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import torch
from transformers import DynamicCache

from .feedback import Feedback, draft_logits, soft_ce

from .arms import ARMS, MOMENTUM_ARMS, PUBLISHED, TEXTBOOK, TUNED  # noqa: F401  (re-exported)


def learning_rate(arm: str, step: float, momentum: float) -> float:
    """The SGD learning rate of ``arm`` at effective step ``step`` = lr / (1 - momentum)."""
    return step * (1 - momentum) if arm in MOMENTUM_ARMS else step


class OptimisticSGD(torch.optim.Optimizer):
    """Optimistic online gradient descent with the last gradient as the hint.

    State per parameter: the secondary iterate w^ and the hint h (the last gradient). A step with the
    gradient g observed at the played point w: w^ <- w^ - lr g, then h <- g and w <- w^ - lr h. So the
    previous hint is removed (w restarts from w^) and the new one applied. On f(w) = w^2 / 2 from
    w = 1, lr = 0.1: w = 0.8, then 0.74 (plain SGD: 0.9, 0.81).
    """

    def __init__(self, params, lr: float):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "anchor" not in state:  # no hint yet: w^ = w
                    state["anchor"] = p.detach().clone()
                g = p.grad.detach().clone()
                state["anchor"].add_(g, alpha=-group["lr"])
                state["hint"] = g
                p.copy_(state["anchor"] - group["lr"] * g)


def hedge_weights(cumulative_losses, temperature: float) -> np.ndarray:
    """Hedge's weights: softmax(-L / T) of the experts' cumulative losses L (uniform when all equal)."""
    z = -np.asarray(cumulative_losses, dtype=float) / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


def chunk_loss(draft, fb: Feedback, idx: list[int], pad_id: int, rejected_only: bool = False) -> torch.Tensor:
    logits = draft_logits(draft, fb, idx, pad_id)
    lg = torch.cat(logits)
    probs = torch.cat([fb.target_probs[i] for i in idx]).to(lg.device)
    mask = None
    if rejected_only:  # where the draft's greedy proposal differs from the token the target emitted
        out = torch.cat([torch.tensor(fb.ids[i][fb.start[i]:]) for i in idx]).to(lg.device)
        mask = (lg.argmax(-1) != out).float()
    return soft_ce(lg, probs, mask)


@torch.no_grad()
def online_loss(draft, fb: Feedback, pad_id: int, batch_size: int = 32) -> float:
    """The draft's soft cross-entropy on the whole chunk (every sequence), without training on it."""
    total, n = 0.0, 0
    for s in range(0, len(fb.ids), batch_size):
        idx = list(range(s, min(s + batch_size, len(fb.ids))))
        k = sum(len(fb.ids[i]) - fb.start[i] for i in idx)
        total += float(chunk_loss(draft, fb, idx, pad_id)) * k
        n += k
    return total / max(n, 1)


def sgd_steps(draft, opt, fb: Feedback, steps: int, batch_size: int, rng: np.random.Generator, pad_id: int,
              rejected_only: bool = False) -> float:
    """``steps`` minibatch steps on the chunk; returns the mean training loss."""
    draft.train()
    losses = []
    for _ in range(steps):
        idx = sorted(rng.choice(len(fb.ids), size=min(batch_size, len(fb.ids)), replace=False).tolist())
        loss = chunk_loss(draft, fb, idx, pad_id, rejected_only)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    draft.eval()
    return float(np.mean(losses)) if losses else float("nan")


def average_into(target, models, weights) -> None:
    """``target``'s parameters <- the weight-space average of ``models``' with ``weights``."""
    with torch.no_grad():
        params = [dict(m.named_parameters()) for m in models]
        for name, p in target.named_parameters():
            p.copy_(sum(float(w) * ps[name] for w, ps in zip(weights, params)))


class MixtureCache:
    """One KV cache per expert of a :class:`MixtureDraft`, cropped together."""

    def __init__(self, caches):
        self.caches = caches

    def crop(self, n: int) -> None:
        for c in self.caches:
            c.crop(n)


class MixtureDraft(torch.nn.Module):
    """A draft whose next-token distribution is the mixture q = sum_i w_i softmax(logits_i) of its
    experts'. ``forward`` returns log q as ``.logits``: softmax of them is q exactly, so speculative
    decoding (sampling, verification, acceptance) and the feedback losses all see the mixture. Each
    call runs every expert (K forward passes). KV caches: :meth:`new_cache` (one per expert)."""

    def __init__(self, experts, weights):
        super().__init__()
        self.experts = torch.nn.ModuleList(experts)
        self.weights = np.asarray(weights, dtype=float)

    def new_cache(self) -> MixtureCache:
        return MixtureCache([DynamicCache(config=e.config) for e in self.experts])

    def forward(self, input_ids, past_key_values=None, **kw):
        caches = past_key_values.caches if past_key_values is not None else [None] * len(self.experts)
        logq = torch.stack([torch.log_softmax(e(input_ids=input_ids, past_key_values=c, **kw).logits.float(), -1)
                            for e, c in zip(self.experts, caches)])
        logw = torch.log(torch.as_tensor(self.weights, dtype=logq.dtype, device=logq.device))
        return SimpleNamespace(logits=torch.logsumexp(logq + logw.view(-1, *[1] * (logq.dim() - 1)), 0))


class Arm:
    """One online learner; ``draft`` is what decodes the next chunk. ``step`` is the effective step."""

    def __init__(self, name: str, draft, step: float, factors: list[float], momentum: float, temperature: float,
                 steps: int, batch_size: int, seed: int, pad_id: int):
        if name not in ARMS:
            raise ValueError(f"unknown arm {name!r} (known: {', '.join(ARMS)})")
        self.name, self.steps, self.batch_size, self.pad_id = name, steps, batch_size, pad_id
        self.rng = np.random.default_rng(seed)
        self.draft = copy.deepcopy(draft).eval()
        self.step, self.temperature = step, temperature
        self.lr = learning_rate(name, step, momentum)
        self.lrs = [step * f for f in factors]  # base rates of the ensembles (no momentum)
        self.weights = np.full(len(self.lrs), 1 / len(self.lrs))
        if name == "optimistic":
            self.opt = torch.optim.SGD(self.draft.parameters(), lr=self.lr, momentum=momentum)
        elif name == "optimistic_ogd":
            self.opt = OptimisticSGD(self.draft.parameters(), lr=self.lr)
        elif name == "hedge":  # expert 0: the zero-step expert (the offline draft); then one per base rate
            self.experts = [copy.deepcopy(self.draft) for _ in range(len(self.lrs) + 1)]
            self.expert_opts = [None] + [torch.optim.SGD(e.parameters(), lr=lr)
                                         for e, lr in zip(self.experts[1:], self.lrs)]
            self.cumulative = np.zeros(len(self.experts))
            self.weights = np.full(len(self.experts), 1 / len(self.experts))
            self.draft = MixtureDraft(self.experts, self.weights)

    def update(self, fb: Feedback) -> None:
        if self.name == "offline":
            return
        if self.name in ("ogd", "osd"):
            opt = torch.optim.SGD(self.draft.parameters(), lr=self.lr)
            sgd_steps(self.draft, opt, fb, self.steps, self.batch_size, self.rng, self.pad_id, self.name == "osd")
        elif self.name in ("optimistic", "optimistic_ogd"):
            sgd_steps(self.draft, self.opt, fb, self.steps, self.batch_size, self.rng, self.pad_id)
        elif self.name == "ensemble":
            self._ensemble_update(fb)
        else:
            self._hedge_update(fb)

    def _ensemble_update(self, fb: Feedback) -> None:
        bases, losses = [], []
        per_base = max(1, self.steps // len(self.lrs))
        for lr in self.lrs:
            base = copy.deepcopy(self.draft)
            opt = torch.optim.SGD(base.parameters(), lr=lr)
            losses.append(sgd_steps(base, opt, fb, per_base, self.batch_size, self.rng, self.pad_id))
            bases.append(base)
        self.weights = hedge_weights(losses, self.temperature)
        average_into(self.draft, bases, self.weights)

    def _hedge_update(self, fb: Feedback) -> None:
        # next-chunk losses first: each expert is scored on the chunk before it trains on it
        self.cumulative = self.cumulative + np.array([online_loss(e, fb, self.pad_id) for e in self.experts])
        per_expert = max(1, self.steps // len(self.lrs))  # the zero-step expert takes no share
        for expert, opt in zip(self.experts, self.expert_opts):
            if opt is not None:
                sgd_steps(expert, opt, fb, per_expert, self.batch_size, self.rng, self.pad_id)
        self.weights = hedge_weights(self.cumulative, self.temperature)
        self.draft.weights = self.weights  # the played draft: the mixture of the experts' distributions
