"""Token-level SFT, one job per arm looping over the seeds: cross-entropy on the answer tokens [tens, units,
<eos>] given the image; the learning rate is picked from the grid on the first seed's validation MAE (tuning.py).

Two arms from the same initial weights and the same steps, batch, grid and optimiser: ``sft`` on the long-tailed
training set (the paper's SFT baseline and the start of every RL arm) and ``sft_balanced`` on a training set
of the same size with uniform targets (the control of the density cause: without a dense region there is
nothing to regress towards).
"""

from __future__ import annotations

import numpy as np
import torch

from icmlrepro.core.io import read_npz, read_torch, write_json, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything

from .model import build_model, encode_targets
from .tuning import tune_then_train, val_mae

ARMS = {"sft": "train", "sft_balanced": "balanced"}


def sft_loss(model, images: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    tokens = encode_targets(targets)
    logits = model.token_logits(model.image_prefix(images), tokens[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def train_sft(x: np.ndarray, y: np.ndarray, s: dict, seed: int, arm: str, lr: float):
    """The SFT model of ``seed`` trained on (x, y) at peak rate ``lr`` and its loss curve (cosine-decayed
    AdamW); the rate does not enter any seed, so grid candidates differ in the rate only."""
    c = s["sft"]
    rng = seed_everything(derive_seed(seed, "ccc_grpo", "sft", arm))
    model = build_model(s, derive_seed(seed, "ccc_grpo", "init"))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1 + np.cos(np.pi * t / max(c["steps"], 1))))
    xt, yt, losses = torch.as_tensor(x), torch.as_tensor(y), []
    model.train()
    for _ in range(c["steps"]):
        b = torch.as_tensor(rng.choice(len(y), size=min(c["batch"], len(y)), replace=False))
        loss = sft_loss(model, xt[b], yt[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return model, losses


def save_model(path, model, **extra) -> None:
    write_torch(path, {"state": model.state_dict(), **extra})


def load_model(path, s: dict):
    ck = read_torch(path)
    model = build_model(s, 0)
    model.load_state_dict(ck["state"])
    return model, ck


def seed_file(job, seed: int) -> str:
    """This job's output file of ``seed``; a clear error if the rule does not declare it (the rule's seed list
    comes from the run's scale, the stage's from the job's)."""
    if f"seed{seed}" not in job.output:
        raise ValueError(f"seed {seed} is no output of this job ({list(job.output)}): run with --config scale=...")
    return job.output[f"seed{seed}"]


def run(job) -> None:
    s, arm = job.params, job.wildcards.variant
    arrays, split = read_npz(job.input.images), ARMS[arm]

    def fit(seed, lr):
        model, losses = train_sft(arrays[f"{split}_x"], arrays[f"{split}_y"], s, seed, arm, lr)
        return model, {"losses": losses}

    tuning = tune_then_train(list(s["seeds"]), s["sft"]["lr_grid"], fit, lambda m: val_mae(m, arrays),
                             lambda seed, m, extra: save_model(seed_file(job, seed), m, arm=arm, seed=seed, **extra))
    write_json(job.output.tuning, {"arm": arm, "stage": "sft", **tuning})
