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

from .geometry import rotate_table_z


def z_rotations(angles: torch.Tensor) -> torch.Tensor:
    c, s = torch.cos(angles), torch.sin(angles)
    R = torch.zeros(len(angles), 3, 3)
    R[:, 0, 0], R[:, 0, 1], R[:, 1, 0], R[:, 1, 1], R[:, 2, 2] = c, -s, s, c, 1.0
    return R


def rotate_z(rel: torch.Tensor, centers: torch.Tensor, angles: torch.Tensor):
    R = z_rotations(angles)
    return torch.einsum("bgkj,bij->bgki", rel, R), torch.einsum("bgj,bij->bgi", centers, R)


class Classifier(nn.Module):
    """Backbone + adapter (hooks into the backbone's forward) + a linear head on [CLS] and max-pooled patches."""

    def __init__(self, backbone, adapter, n_classes: int):
        super().__init__()
        self.backbone, self.adapter = backbone, adapter
        self.head = nn.Linear(2 * backbone.d, n_classes)

    def forward(self, rel, centers, topo=None):
        """``topo``: the patches' precomputed simplex table (geometry.simplex_table), used by TopAdapter only."""
        tokens = self.adapter(self.backbone, rel, centers, topo) if topo is not None else self.adapter(self.backbone, rel, centers)
        return self.head(self.backbone.pooled(tokens, rel.shape[1]))


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


# --- many seeds as one vmapped model (icmlrepro.core.seedbatch) ------------------------------------------------


def freeze_like(batch, reference: nn.Module) -> None:
    """SeedBatch stacks every parameter as trainable; give each stacked tensor the trainability of the same
    parameter in ``reference`` (one copy as built), so the frozen backbone stays frozen in the batch."""
    flags = dict((name, p.requires_grad) for name, p in reference.named_parameters())
    for name, p in batch.named_stacked():
        p.requires_grad_(flags[name])


def _stacked_batch(datas, idx, rngs, augment: bool, topo: bool = False):
    """(rel, centres, labels[, simplex table]) stacked over seeds, each seed's rotation drawn from its generator."""
    rels, cens, ys, tabs = [], [], [], []
    for d, b, rng in zip(datas, idx, rngs):
        rel, cen = d["rel"][b], d["centers"][b]
        tab = d["topo"][b] if topo else None
        if augment:
            R = z_rotations(torch.as_tensor(rng.uniform(0, 2 * np.pi, len(b)), dtype=torch.float32))
            rel, cen = torch.einsum("bgkj,bij->bgki", rel, R), torch.einsum("bgj,bij->bgi", cen, R)
            tab = rotate_table_z(tab, R) if topo else None
        rels.append(rel)
        cens.append(cen)
        ys.append(d["labels"][b])
        tabs.append(tab)
    return torch.stack(rels), torch.stack(cens), torch.stack(ys), (torch.stack(tabs) if topo else None)


class BatchedRun:
    """``fit`` for a SeedBatch, resumable: seed k trains on ``datas[k]`` with its own generator ``rngs[k]`` (its
    batch order and rotations, drawn in the same order as ``fit`` draws them), AdamW on the trainable stacked
    tensors (an elementwise optimiser: each seed's own step), a cosine schedule over ``total_epochs``.
    ``train(e)`` runs the next ``e`` epochs; runs of e1 then e2 epochs are the same run as one of e1 + e2 (the
    optimiser, schedule and generators carry on), which is how the learning-rate sweep's runs are continued.
    ``topo``: feed each split's precomputed simplex table (``d["topo"]``, rotated with the clouds) to the model."""

    def __init__(self, model, datas: list[dict], total_epochs: int, batch: int, lr: float,
                 rngs: list[np.random.Generator], weight_decay: float = 0.05, topo: bool = False):
        self.model, self.datas, self.batch, self.rngs, self.topo = model, datas, batch, rngs, topo
        self.opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr,
                                     weight_decay=weight_decay)
        self.n = len(datas[0]["labels"])
        if any(len(d["labels"]) != self.n for d in datas):
            raise ValueError("every seed's training split must have the same size")
        self.steps = total_epochs * math.ceil(self.n / batch)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda t: 0.5 * (1 + math.cos(math.pi * min(t / self.steps, 1.0))))

    def train(self, epochs: int) -> np.ndarray:
        """The next ``epochs`` epochs; returns their losses (steps, K)."""
        model, losses = self.model, []
        model.train()
        for _ in range(epochs):
            orders = [rng.permutation(self.n) for rng in self.rngs]
            for i in range(0, self.n, self.batch):
                idx = [torch.as_tensor(o[i:i + self.batch]) for o in orders]
                rel, cen, y, tab = _stacked_batch(self.datas, idx, self.rngs, augment=True, topo=self.topo)
                logits = model(rel, cen) if tab is None else model(rel, cen, tab)  # (K, B, classes)
                per_seed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(len(self.rngs), -1).mean(1)
                self.opt.zero_grad()
                model.loss(per_seed).backward()
                self.opt.step()
                self.sched.step()
                losses.append(per_seed.detach().numpy().copy())
        return np.stack(losses) if losses else np.zeros((0, len(self.rngs)))


def fit_batched(model, datas: list[dict], epochs: int, batch: int, lr: float, rngs: list[np.random.Generator],
                weight_decay: float = 0.05, topo: bool = False) -> np.ndarray:
    """``fit`` for a SeedBatch (``BatchedRun`` for ``epochs`` epochs in one go). Returns losses (steps, K)."""
    return BatchedRun(model, datas, epochs, batch, lr, rngs, weight_decay, topo).train(epochs)


@torch.no_grad()
def accuracy_batched(model, datas: list[dict], chunk: int = 100, topo: bool = False) -> list[float]:
    """Each seed's accuracy on its own ``datas[k]`` (one vmapped forward per chunk)."""
    model.eval()
    n = len(datas[0]["labels"])
    correct = torch.zeros(len(datas))
    for i in range(0, n, chunk):
        idx = [torch.arange(i, min(i + chunk, n))] * len(datas)
        rel, cen, y, tab = _stacked_batch(datas, idx, [None] * len(datas), augment=False, topo=topo)
        correct += ((model(rel, cen) if tab is None else model(rel, cen, tab)).argmax(-1) == y).float().sum(1)
    return (correct / n).tolist()
