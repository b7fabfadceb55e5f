"""The one training loop and accuracy check every arm and the pretraining use (equal epochs, batch, optimiser).

Augmentation: a random rotation about the vertical axis per cloud, applied to patch offsets and centres
together (the FPS + kNN grouping is invariant to it, so it is precomputed once in the data stage).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def rotate_z(rel: torch.Tensor, centers: torch.Tensor, angles: torch.Tensor):
    c, s = torch.cos(angles), torch.sin(angles)
    R = torch.zeros(len(angles), 3, 3)
    R[:, 0, 0], R[:, 0, 1], R[:, 1, 0], R[:, 1, 1], R[:, 2, 2] = c, -s, s, c, 1.0
    return torch.einsum("bgkj,bij->bgki", rel, R), torch.einsum("bgj,bij->bgi", centers, R)


class Classifier(nn.Module):
    """Backbone + adapter (hooks into the backbone's forward) + a linear head on [CLS] and max-pooled patches."""

    def __init__(self, backbone, adapter, n_classes: int):
        super().__init__()
        self.backbone, self.adapter = backbone, adapter
        self.head = nn.Linear(2 * backbone.d, n_classes)

    def forward(self, rel, centers):
        return self.head(self.backbone.pooled(self.adapter(self.backbone, rel, centers), rel.shape[1]))


def fit(model: nn.Module, data: dict, epochs: int, batch: int, lr: float, rng: np.random.Generator,
        weight_decay: float = 0.05) -> list[float]:
    """AdamW on the parameters that require grad, cosine decay to 0, rotation augmentation. Returns losses."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    n = len(data["labels"])
    steps = epochs * math.ceil(n / batch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1 + math.cos(math.pi * min(t / steps, 1.0))))
    losses = []
    model.train()
    for _ in range(epochs):
        order = rng.permutation(n)
        for i in range(0, n, batch):
            b = torch.as_tensor(order[i:i + batch])
            rel, cen = rotate_z(data["rel"][b], data["centers"][b], torch.as_tensor(rng.uniform(0, 2 * np.pi, len(b)), dtype=torch.float32))
            loss = F.cross_entropy(model(rel, cen), data["labels"][b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def accuracy(model: nn.Module, data: dict, chunk: int = 256) -> float:
    model.eval()
    pred = torch.cat([model(data["rel"][i:i + chunk], data["centers"][i:i + chunk]).argmax(1)
                      for i in range(0, len(data["labels"]), chunk)])
    return float((pred == data["labels"]).float().mean())


def count_params(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameters of the whole classifier (backbone, adapter, head)."""
    ps = list(model.parameters())
    return sum(p.numel() for p in ps if p.requires_grad), sum(p.numel() for p in ps)
