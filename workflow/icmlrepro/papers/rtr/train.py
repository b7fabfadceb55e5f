"""Train one diffusion policy (``action60``, ``action15`` or ``latent``) for one seed.

All three get the same training chunks (every tick of every successful training demonstration of the
seed, until ``idle_margin`` ticks after the puck reached the goal), the same
denoiser size, schedule, optimiser, batch and number of updates; no arm is tuned. The latent policy
diffuses in the seed's own block VAE latent space (main downsampling factor), standardised per dimension.
"""

from __future__ import annotations

import time

import numpy as np

from icmlrepro.core.io import read_torch, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything

from . import data as rtr_data
from .policy import Codec, Normalizer, features, reference, train_denoiser
from .vae import new_vae


def load_vae(path, s: dict, seed: int, downsample: int | None = None):
    """(vae, act_norm, obs_norm) of a seed from its vae.pt (vae/seed<k>/vae.pt)."""
    ck = read_torch(path)
    f = downsample or s["downsample"]
    if ck.get("seed") != seed or f not in ck.get("factors", {}):
        raise ValueError(f"{path}: holds seed {ck.get('seed')} with factors {sorted(ck.get('factors', {}))}, "
                         f"not seed {seed} at factor {f}; rebuild it (snakemake --forcerun rtr_vae)")
    vae = new_vae(s, f)
    vae.load_state_dict(ck["factors"][f]["state"])
    return vae.eval(), Normalizer.from_state(ck["act_norm"]), Normalizer.from_state(ck["obs_norm"])


def codec_for(kind: str, vae, act_norm: Normalizer, z_norm: Normalizer | None = None) -> Codec:
    return Codec(kind, act_norm, vae if kind == "latent" else None, z_norm)


def run(job) -> None:
    s, kind, seed = job.params, job.wildcards.policy, int(job.wildcards.seed)
    o, c = rtr_data.task_chunks(job.input.steps, job.input.episodes, "train", s["horizon"], margin=s["idle_margin"])
    vae, act_norm, obs_norm = load_vae(job.input.vae, s, seed)
    codec = codec_for(kind, vae, act_norm)
    z_norm = None
    if kind == "latent":
        codec.z_norm = Normalizer(np.zeros(vae.latent_dim), np.ones(vae.latent_dim))
        z_norm = Normalizer.fit(codec.encode(c, reference(o)))
        codec.z_norm = z_norm
    samples = codec.encode(c, reference(o))
    rng = seed_everything(derive_seed(seed, "rtr", "policy", kind))
    t0 = time.perf_counter()
    model, losses = train_denoiser(samples, obs_norm(features(o)).astype(np.float32), s, rng)
    write_torch(job.output.policy, {"kind": kind, "seed": seed, "dim": samples.shape[1], "state": model.state_dict(),
                                    "z_norm": z_norm.state() if z_norm else None, "losses": losses,
                                    "train_seconds": time.perf_counter() - t0})
