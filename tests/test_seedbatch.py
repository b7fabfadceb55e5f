"""core.seedbatch: a seed trained inside the batch is the seed trained alone, to float tolerance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from icmlrepro.core.seedbatch import SeedBatch, clip_grad_norm_per_seed, init_seed, per_seed_batches
from icmlrepro.core.seeding import derive_seed

SEEDS = [0, 1, 2, 5]


def make_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))


def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 12, generator=g)
    y = (x[:, :3].argmax(1)).long()
    return x, y


def train_alone(seed: int, steps: int, clip: float | None = None) -> dict:
    x, y = data()
    torch.manual_seed(init_seed(seed, "mlp"))
    model = make_mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    gen = np.random.default_rng(derive_seed(seed, "batches"))
    for _ in range(steps):
        idx = torch.as_tensor(gen.choice(len(x), size=16, replace=False))
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
    return model.state_dict()


def train_batched(steps: int, clip: float | None = None) -> SeedBatch:
    x, y = data()
    batch = SeedBatch(make_mlp, SEEDS, "mlp")
    opt = torch.optim.AdamW(batch.parameters(), lr=3e-3, weight_decay=0.01)
    idx = per_seed_batches(len(x), 16, [np.random.default_rng(derive_seed(s, "batches")) for s in SEEDS], steps)
    for step in range(steps):
        logits = batch(x[idx[step]])                                   # [K, 16, 3]
        losses = torch.stack([F.cross_entropy(logits[k], y[idx[step, k]]) for k in range(batch.k)])
        opt.zero_grad()
        batch.loss(losses).backward()
        if clip is not None:
            clip_grad_norm_per_seed(batch, clip)
        opt.step()
    return batch


@pytest.mark.parametrize("clip", [None, 0.05])
def test_a_seed_in_the_batch_is_the_seed_alone(clip):
    """Same initialisation, data order, AdamW steps and (per-seed) clipping: weights agree to 1e-5 after 40 steps,
    while different seeds stay different (the batch did not tie them)."""
    batched = train_batched(40, clip).state_dicts()
    for seed in SEEDS:
        alone = train_alone(seed, 40, clip)
        for name, w in alone.items():
            torch.testing.assert_close(batched[seed][name], w, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(batched[0]["0.weight"], batched[1]["0.weight"])


def test_clipping_is_per_seed():
    """A seed with a huge gradient is clipped without shrinking the others' steps."""
    batch = SeedBatch(make_mlp, [0, 1], "mlp")
    for p in batch.stacked:
        p.grad = torch.ones_like(p)
        p.grad[0] *= 1000.0
    norms = clip_grad_norm_per_seed(batch, 1.0)
    assert norms[0] > 100 * norms[1]
    after = torch.sqrt(sum(p.grad.reshape(2, -1).pow(2).sum(1) for p in batch.stacked))
    assert after[0] == pytest.approx(1.0, rel=1e-4) and after[1] == pytest.approx(min(norms[1].item(), 1.0), rel=1e-4)


def test_dropout_is_drawn_per_seed_and_the_loss_needs_one_value_per_seed():
    batch = SeedBatch(lambda: nn.Sequential(nn.Dropout(0.5)), [0, 1], "drop")
    out = batch(torch.ones(2, 1, 64))
    assert not torch.equal(out[0], out[1])
    with pytest.raises(ValueError, match="one loss per seed"):
        batch.loss(torch.zeros(3))


def test_a_parameter_frozen_in_the_built_model_stays_frozen_in_the_batch():
    from torch import nn

    from icmlrepro.core.seedbatch import SeedBatch

    def make():
        model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
        model[0].requires_grad_(False)  # a frozen "backbone" under a trainable head
        return model

    batch = SeedBatch(make, [0, 1, 2])
    flags = {name: p.requires_grad for name, p in batch.named_stacked()}
    assert flags == {"0.weight": False, "0.bias": False, "1.weight": True, "1.bias": True}
    assert all(p.shape[0] == 3 for _, p in batch.named_stacked())
