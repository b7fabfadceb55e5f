"""The grounded-VQA policy as a Causal Grounding Graph: (image, question) -> evidence E -> answer A,
with the direct image -> answer path that a shortcut uses left open on purpose.

Evidence Generation: a score per cell from the cell's features and the question (a 1x1-conv MLP, so the
score of a cell does not depend on where it is), plus a "no evidence" option whose choice is a format
failure. Answer Reasoning: an MLP of the question, the evidence crop (the chosen cell's features; zeros
when there is no evidence) and the whole image's mean feature (the global context: the shortcut path).
The counterfactual intervention masks cells of the image (features set to 0) with question and evidence
location fixed; the crop is read from the masked image, so masking the predicted cell removes it.
"""

from __future__ import annotations

import torch
from torch import nn


def mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                         nn.Linear(hidden, d_out))


class GVRPolicy(nn.Module):
    def __init__(self, feat: int, qdim: int, n_answers: int, hidden: int):
        super().__init__()
        self.cell_score = mlp(feat + qdim, hidden, 1)
        self.no_evidence = nn.Linear(qdim, 1)
        self.answer = mlp(2 * feat + qdim, hidden, n_answers)

    def evidence_logits(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """(batch, n_cells + 1): one logit per cell, the last one for "no evidence"."""
        qx = q[:, None, :].expand(-1, x.shape[1], -1)
        cells = self.cell_score(torch.cat([x, qx], -1)).squeeze(-1)
        return torch.cat([cells, self.no_evidence(q)], -1)

    def answer_logits(self, x: torch.Tensor, q: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """(batch, n_answers) given evidence indices ``e`` (== n_cells means no evidence)."""
        n_cells = x.shape[1]
        valid = e < n_cells
        crop = x[torch.arange(len(x)), e.clamp_max(n_cells - 1)] * valid[:, None].to(x.dtype)
        return self.answer(torch.cat([crop, x.mean(1), q], -1))


def mask_cells(x: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    """The counterfactual image: ``cells`` (one index per scene; n_cells = none) masked to 0."""
    out = x.clone()
    rows = torch.arange(len(x))
    ok = cells < x.shape[1]
    out[rows[ok], cells[ok]] = 0.0
    return out


@torch.no_grad()
def greedy_act(policy: GVRPolicy, x: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(evidence, answer) chosen greedily: how every policy is scored (validation and test alike)."""
    e = policy.evidence_logits(x, q).argmax(-1)
    return e, policy.answer_logits(x, q, e).argmax(-1)


def log_probs(policy: GVRPolicy, x, q, e, a) -> torch.Tensor:
    """Per-token log-probabilities (batch, 2) of the rollout tokens (evidence, answer)."""
    le = torch.log_softmax(policy.evidence_logits(x, q), -1).gather(1, e[:, None])
    la = torch.log_softmax(policy.answer_logits(x, q, e), -1).gather(1, a[:, None])
    return torch.cat([le, la], 1)
