"""The action-conditioned guard: a small CNN vision encoder whose per-cell features are attended by the action
(its all-MiniLM-L6-v2 sentence embedding, projected), fused, and read by three heads that give the guard's
JSON fields: potential_risk (safe/unsafe), risk_type (none + 7 categories) and hazard (none + 14 elements).

The observation-only classifier is the same network with the action replaced by one learned query vector:
it sees the scene exactly as the guard does but cannot know what the agent is about to do.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .taxonomy import HAZARD_CLASSES, TYPE_CLASSES


class Guard(nn.Module):
    def __init__(self, action_dim: int, grid: int, width: int = 32, hidden: int = 64, use_action: bool = True):
        super().__init__()
        self.use_action, self.grid = use_action, grid
        self.vision = nn.Sequential(  # patchify like a ViT stem: 4x4 patches, then 4x4 groups of them
            nn.Conv2d(3, width, 4, stride=4), nn.ReLU(),
            nn.Conv2d(width, width, 4, stride=4), nn.ReLU(),
            nn.AdaptiveAvgPool2d(grid),  # one feature vector per scene cell
        )
        self.cell_mlp = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.pos = nn.Parameter(torch.zeros(grid * grid, width))
        self.key = nn.Linear(width, hidden)
        self.value = nn.Linear(width, hidden)
        if use_action:
            self.query = nn.Sequential(nn.Linear(action_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        else:
            self.const_query = nn.Parameter(torch.randn(hidden) * 0.1)
        self.fuse = nn.Sequential(nn.Linear(4 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.risk = nn.Linear(hidden, 2)
        # type and hazard read the attended cells only: the hazard is named from what is seen where the action
        # points, not from the words of the action (which would memorise item -> element pairings)
        self.grounded = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())
        self.type_head = nn.Linear(hidden, len(TYPE_CLASSES))
        self.hazard = nn.Linear(hidden, len(HAZARD_CLASSES))

    def forward(self, images: torch.Tensor, actions: torch.Tensor) -> dict[str, torch.Tensor]:
        """images: float [B, 3, H, W] in [0, 1]; actions: [B, action_dim] (ignored without the action)."""
        # per-image, per-channel standardisation: the pale background would otherwise push every unit into the
        # same regime and the small state marks are not learned (seen: 0 of 3 runs learn them without it)
        images = (images - images.mean((2, 3), keepdim=True)) / (images.std((2, 3), keepdim=True) + 1e-3)
        cells = self.cell_mlp(self.vision(images).flatten(2).transpose(1, 2)) + self.pos  # [B, cells, width]
        k, v = self.key(cells), self.value(cells)
        q = self.query(actions) if self.use_action else self.const_query.expand(len(images), -1)
        att = torch.softmax((k @ q.unsqueeze(-1)).squeeze(-1) / k.shape[-1] ** 0.5, dim=-1)  # [B, cells]
        attended = (att.unsqueeze(-1) * v).sum(1)
        pooled = v.mean(1)
        h = self.fuse(torch.cat([attended, pooled, q, attended * q], dim=-1))
        g = self.grounded(attended)
        return {"risk": self.risk(h), "type": self.type_head(g), "hazard": self.hazard(g), "attention": att}


def guard_loss(out: dict, risk: torch.Tensor, rtype: torch.Tensor, hazard: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of potential_risk on every pair, plus those of risk_type and hazard on the unsafe pairs only.

    Type and hazard say *which* risk, given that there is one (``decode`` reads them only when the risk head says
    unsafe). Training them to say ``none`` on safe pairs would ask the grounded heads, which see only the attended
    cells, to answer ``none`` and ``stove`` for the very same attended stove (a causal pair and its safe twin).
    """
    loss = F.cross_entropy(out["risk"], risk)
    unsafe = risk == 1
    if unsafe.any():
        loss = loss + F.cross_entropy(out["type"][unsafe], rtype[unsafe]) + F.cross_entropy(out["hazard"][unsafe], hazard[unsafe])
    return loss


def decode(out: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(unsafe, risk_type index, hazard index): type and hazard are argmax over the non-``none`` classes when
    the guard says unsafe, and ``none`` (0) when it says safe, so the three fields never contradict."""
    unsafe = out["risk"].argmax(-1) == 1
    rtype = torch.where(unsafe, out["type"][:, 1:].argmax(-1) + 1, torch.zeros_like(unsafe, dtype=torch.long))
    hazard = torch.where(unsafe, out["hazard"][:, 1:].argmax(-1) + 1, torch.zeros_like(unsafe, dtype=torch.long))
    return unsafe, rtype, hazard
