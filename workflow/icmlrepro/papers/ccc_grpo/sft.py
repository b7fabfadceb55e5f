"""Token-level SFT, one job per arm looping over the seeds: cross-entropy on the answer tokens [tens, units,
<eos>] given the image; the learning rate is picked from the grid on the first seed's validation MAE (tuning.py).

Three arms from the same initial weights and the same steps, batch, grid, default rate and optimiser: ``sft`` on
the long-tailed training set (the paper's token-level SFT baseline and the start of every RL arm), ``sft_soft``
(the paper's soft-label SFT baseline) on the same set with Gaussian soft labels over the number, and
``sft_balanced`` on a training set of the same size with uniform targets (the control of the density cause:
without a dense region there is nothing to regress towards).

Soft-label SFT: the target of image i is the law w(v) ~ exp(-(v - y_i)^2 / (2 sigma^2)) over the numbers
v = 0..y_max (sigma fixed, ``sft.soft_sigma``); the loss is the expected token-level cross-entropy of the answer
[tens, units, <eos>] under v ~ w, computed exactly over the tens digits that carry weight (>= 1e-4): soft
cross-entropy of the tens token against w's tens marginal, of the units token against w given that tens digit
(teacher-forced), and of <eos>; with sigma -> 0 it is token-level SFT.
"""

from __future__ import annotations

import numpy as np
import torch

from icmlrepro.core.io import read_npz, read_torch, write_json, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything

from .data import seed_arrays
from .model import BOS, DIGIT0, EOS, build_model, encode_targets
from .tuning import tune_then_train, val_errors

ARMS = {"sft": ("train", False), "sft_soft": ("train", True), "sft_balanced": ("balanced", False)}
SOFT_MIN_WEIGHT = 1e-4   # tens digits with less of w's mass are left out of the soft loss


def sft_loss(model, images: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    tokens = encode_targets(targets)
    logits = model.token_logits(model.image_prefix(images), tokens[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def soft_labels(targets: torch.Tensor, sigma: float, y_max: int) -> torch.Tensor:
    """(n, y_max + 1) Gaussian soft labels over the numbers 0..y_max, each row summing to 1."""
    v = torch.arange(y_max + 1, dtype=torch.float32)
    w = torch.exp(-0.5 * ((v[None, :] - targets[:, None].float()) / sigma) ** 2)
    return w / w.sum(1, keepdim=True)


def soft_sft_loss(model, images: torch.Tensor, targets: torch.Tensor, sigma: float, y_max: int) -> torch.Tensor:
    """Expected answer cross-entropy (per token, as ``sft_loss``) under the soft label law of each target."""
    n, tens = len(targets), y_max // 10 + 1
    w = torch.zeros(n, tens * 10)
    w[:, :y_max + 1] = soft_labels(torch.as_tensor(targets), sigma, y_max)
    w = w.view(n, tens, 10)
    wt = w.sum(2)                                                     # (n, tens): the tens marginal
    idx, t = torch.nonzero(wt >= SOFT_MIN_WEIGHT, as_tuple=True)      # rows: (image, tens digit) with weight
    row_w = wt[idx, t]
    row_w = row_w / torch.zeros(n).index_add_(0, idx, row_w)[idx]     # renormalised over the kept tens digits
    units = w[idx, t] / wt[idx, t, None]                              # (rows, 10): units law given the tens
    tokens = torch.stack([torch.full_like(t, BOS), DIGIT0 + t, DIGIT0 + units.argmax(1)], 1)
    logp = torch.log_softmax(model.token_logits(model.image_prefix(images)[idx], tokens).float(), -1)
    tens_target = wt / wt.sum(1, keepdim=True)
    ce_tens = -(tens_target[idx] * logp[:, 0, DIGIT0:DIGIT0 + tens]).sum(1)
    ce_units = -(units * logp[:, 1, DIGIT0:DIGIT0 + 10]).sum(1)
    ce_eos = -logp[:, 2, EOS]
    return (row_w * (ce_tens + ce_units + ce_eos)).sum() / (3 * n)


def train_sft(x: np.ndarray, y: np.ndarray, s: dict, seed: int, arm: str, lr: float):
    """The SFT model of ``seed`` trained on (x, y) at peak rate ``lr`` and its loss curve (cosine-decayed
    AdamW); the rate does not enter any seed, so grid candidates differ in the rate only."""
    c = s["sft"]
    rng = seed_everything(derive_seed(seed, "ccc_grpo", "sft", ARMS[arm][0]))   # sft, sft_soft: same batches
    model = build_model(s, derive_seed(seed, "ccc_grpo", "init"))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1 + np.cos(np.pi * t / max(c["steps"], 1))))
    xt, yt, losses = torch.as_tensor(x), torch.as_tensor(y), []
    model.train()
    for _ in range(c["steps"]):
        b = torch.as_tensor(rng.choice(len(y), size=min(c["batch"], len(y)), replace=False))
        loss = (soft_sft_loss(model, xt[b], yt[b], c["soft_sigma"], s["y_max"]) if ARMS[arm][1]
                else sft_loss(model, xt[b], yt[b]))
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
    packed, split = read_npz(job.input.images), ARMS[arm][0]
    arrays = {seed: seed_arrays(packed, seed) for seed in s["seeds"]}

    def fit(seed, lr):
        a = arrays[seed]
        model, losses = train_sft(a[f"{split}_x"], a[f"{split}_y"], s, seed, arm, lr)
        return model, {"losses": losses}

    tuning = tune_then_train(list(s["seeds"]), s["sft"]["lr_grid"], fit, lambda seed, m: val_errors(m, arrays[seed]),
                             lambda seed, m, extra: save_model(seed_file(job, seed), m, arm=arm, seed=seed, **extra),
                             default=s["sft"]["lr_default"])
    write_json(job.output.tuning, {"arm": arm, "stage": "sft", **tuning})
