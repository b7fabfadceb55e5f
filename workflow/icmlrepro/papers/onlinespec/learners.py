"""The online arms: how a draft is updated after each chunk from that chunk's verification feedback.

Every arm spends the same compute per chunk, ``steps`` minibatch gradient steps on the draft (the
ensemble splits them over its base drafts), with the same loss, the soft cross-entropy to the
target's distributions, except OSD's, which only counts positions where the draft was rejected.

- ``offline``: the draft is never updated.
- ``ogd``: online gradient descent (SGD, one learning rate); no state carried between chunks.
- ``osd``: Online Speculative Decoding (Liu et al.): distillation on rejected positions only.
- ``optimistic``: optimistic online learning with historical gradients as the hint, i.e. SGD with
  momentum whose buffer persists across chunks (the published code's form).
- ``ensemble``: online ensemble (Hedge): the draft used is the weight-space average of base drafts
  with weights softmax(-loss / T); each chunk every base restarts from that average and trains at its
  own learning rate; its mean training loss on the chunk sets the next weights.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from .feedback import Feedback, draft_logits, soft_ce

ARMS = ("offline", "ogd", "osd", "optimistic", "ensemble")


def chunk_loss(draft, fb: Feedback, idx: list[int], pad_id: int, rejected_only: bool = False) -> torch.Tensor:
    logits = draft_logits(draft, fb, idx, pad_id)
    lg = torch.cat(logits)
    probs = torch.cat([fb.target_probs[i] for i in idx])
    mask = None
    if rejected_only:  # where the draft's greedy proposal differs from the token the target emitted
        out = torch.cat([torch.tensor(fb.ids[i][fb.start[i]:]) for i in idx])
        mask = (lg.argmax(-1) != out).float()
    return soft_ce(lg, probs, mask)


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


class Arm:
    """One online learner; ``draft`` is what decodes the next chunk."""

    def __init__(self, name: str, draft, lr: float, lrs: list[float], momentum: float, temperature: float,
                 steps: int, batch_size: int, seed: int, pad_id: int):
        if name not in ARMS:
            raise ValueError(f"unknown arm {name!r} (known: {', '.join(ARMS)})")
        self.name, self.steps, self.batch_size, self.pad_id = name, steps, batch_size, pad_id
        self.rng = np.random.default_rng(seed)
        self.draft = copy.deepcopy(draft).eval()
        self.lr, self.lrs, self.temperature = lr, list(lrs), temperature
        self.weights = np.full(len(self.lrs), 1 / len(self.lrs))
        if name == "optimistic":
            self.opt = torch.optim.SGD(self.draft.parameters(), lr=lr, momentum=momentum)

    def update(self, fb: Feedback) -> None:
        if self.name == "offline":
            return
        if self.name in ("ogd", "osd"):
            opt = torch.optim.SGD(self.draft.parameters(), lr=self.lr)
            sgd_steps(self.draft, opt, fb, self.steps, self.batch_size, self.rng, self.pad_id, self.name == "osd")
        elif self.name == "optimistic":
            sgd_steps(self.draft, self.opt, fb, self.steps, self.batch_size, self.rng, self.pad_id)
        else:
            self._ensemble_update(fb)

    def _ensemble_update(self, fb: Feedback) -> None:
        bases, losses = [], []
        per_base = max(1, self.steps // len(self.lrs))
        for lr in self.lrs:
            base = copy.deepcopy(self.draft)
            opt = torch.optim.SGD(base.parameters(), lr=lr)
            losses.append(sgd_steps(base, opt, fb, per_base, self.batch_size, self.rng, self.pad_id))
            bases.append(base)
        z = -np.asarray(losses) / self.temperature
        self.weights = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        with torch.no_grad():
            for name, p in self.draft.named_parameters():
                p.copy_(sum(w * dict(b.named_parameters())[name] for w, b in zip(self.weights, bases)))
