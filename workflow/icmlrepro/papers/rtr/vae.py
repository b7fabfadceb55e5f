"""Train the block VAE of one seed, at the main downsampling factor and at each factor of the ablation.

One job per seed (each training is seconds), on that seed's own training demonstrations. The main
factor's VAE is the one the seed's latent policy and Reuse-then-Refine use; the others only enter the
ablation (reconstruction error and smoothness of the autoencoded expert chunks per factor). The
normalisers of policy features and relative chunks (fitted on the seed's training demonstrations) are
stored here, so every policy of the seed shares them.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from icmlrepro.core.seeding import derive_seed, seed_everything

from . import data as rtr_data
from .model import BlockVAE, vae_loss
from .policy import Normalizer, features, reference
from icmlrepro.core.io import write_torch


def new_vae(s: dict, downsample: int) -> BlockVAE:
    return BlockVAE(2, s["horizon"], s["block"], downsample, s["latent_channels"], decoder_hidden=s["vae_hidden"])


def train_vae(x: np.ndarray, s: dict, downsample: int, seed: int) -> tuple[BlockVAE, list[float]]:
    """L1 + beta KL on normalised training chunks x (N, H, A)."""
    rng = seed_everything(derive_seed(seed, "rtr", "vae", downsample))
    vae = new_vae(s, downsample)
    opt = torch.optim.AdamW(vae.parameters(), lr=s["vae_lr"], weight_decay=1e-5)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(s["vae_steps"], 1))
    xt, losses = torch.as_tensor(x, dtype=torch.float32), []
    for _ in range(s["vae_steps"]):
        b = xt[torch.as_tensor(rng.integers(0, len(xt), size=s["vae_batch"]))]
        recon, mu, logvar = vae(b)
        loss, l1, _ = vae_loss(recon, b, mu, logvar, s["beta"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(l1.detach()))
    return vae.eval(), losses


def run(job) -> None:
    s, seed = job.params, int(job.wildcards.seed)
    o, c = rtr_data.task_chunks(job.input.steps, job.input.episodes, "train", s["horizon"], margin=s["idle_margin"])
    rel = c - reference(o)[:, None]
    act_norm, obs_norm = Normalizer.fit(rel), Normalizer.fit(features(o))
    x = act_norm(rel).astype(np.float32)
    out = {"seed": seed, "act_norm": act_norm.state(), "obs_norm": obs_norm.state(), "factors": {}}
    for f in sorted(set(s["ablation_downsample"]) | {s["downsample"]}):
        t0 = time.perf_counter()
        vae, losses = train_vae(x, s, f, seed)
        out["factors"][f] = {"state": vae.state_dict(), "losses": losses, "train_seconds": time.perf_counter() - t0}
    write_torch(job.output.vae, out)
