"""Diffusion policies over three chunk representations, with diffusers' DDPM (training) / DDIM (sampling).

A policy maps an observation to a chunk of ``H`` = 48 actions at 60 Hz. What the diffusion model
generates is the policy's *representation* of the chunk (``Codec``):

- ``action60``: all 48 normalised actions (the 60 Hz action-space baseline);
- ``action15``: every 4th action, 12 knots at 15 Hz (executed by zero-order hold or 15->60 Hz interpolation);
- ``latent``: the block VAE's posterior mean of the chunk, standardised per dimension (the paper's method),
  decoded by the VAE.

Chunks are expressed relative to the command in force at the observation tick (``reference``, the last
commanded fingertip target, part of the observation), the usual delta-action parameterisation; the VAE is
trained on such relative chunks too. Policies see the observation plus two relative features (puck minus
fingertip, goal minus puck): ``features``.

Every policy uses the same denoiser size, noise schedule (100 training steps, squared-cosine betas),
prediction target (``prediction``: ``sample``, the clean chunk, x0-prediction, or ``epsilon``, the noise), DDIM
with ``inference_steps`` steps, optimiser and number of updates. With epsilon prediction and 8 DDIM steps the
96-D 60 Hz action policy kept most of its sampling noise (held-out deviation 0.026 m, jerk ~180x the expert's,
success 0.15 of the expert's); x0-prediction, common for low-dimensional action diffusion, is the default.
``sample(..., known=...)`` inpaints known entries (the RTC-like baseline): after every DDIM step the known
entries are replaced by their forward-noised values at the next noise level, and by the values themselves
at the end (hard inpainting, RePaint-style, instead of RTC's soft guidance).
"""

from __future__ import annotations

import numpy as np
import torch

from .chunks import to_low_rate
from .model import BlockVAE, Denoiser

RATIO = 4  # 60 Hz / 15 Hz
KINDS = ("action60", "action15", "latent")
CMD = slice(8, 10)  # the last commanded target in the observation (sim.OBS_NAMES)


def reference(obs: np.ndarray) -> np.ndarray:
    """The command in force at the observation tick (n, 2): chunks are relative to it."""
    return np.asarray(obs)[:, CMD]


def features(obs: np.ndarray) -> np.ndarray:
    """Observation (n, 10) + puck - fingertip + goal - puck (n, 14): the policy's conditioning input."""
    obs = np.asarray(obs)
    return np.concatenate([obs, obs[:, 4:6] - obs[:, 0:2], obs[:, 6:8] - obs[:, 4:6]], 1)


class Normalizer:
    """Per-dimension standardisation fitted on training data."""

    def __init__(self, mean: np.ndarray, std: np.ndarray):
        self.mean, self.std = np.asarray(mean, np.float32), np.maximum(np.asarray(std, np.float32), 1e-6)

    @classmethod
    def fit(cls, x: np.ndarray) -> "Normalizer":
        flat = x.reshape(-1, x.shape[-1])
        return cls(flat.mean(0), flat.std(0))

    def __call__(self, x):
        return (x - self.mean) / self.std

    def inverse(self, x):
        return x * self.std + self.mean

    def state(self) -> dict:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_state(cls, st: dict) -> "Normalizer":
        return cls(np.array(st["mean"]), np.array(st["std"]))


class Codec:
    """Physical chunk (B, H, A) <-> the flat sample (B, D) a policy generates."""

    def __init__(self, kind: str, act_norm: Normalizer, vae: BlockVAE | None = None, z_norm: Normalizer | None = None):
        if kind not in KINDS:
            raise ValueError(f"unknown policy kind {kind!r}")
        self.kind, self.act_norm, self.vae, self.z_norm = kind, act_norm, vae, z_norm

    def encode(self, chunk: np.ndarray, ref: np.ndarray) -> np.ndarray:
        x = self.act_norm(chunk - ref[:, None]).astype(np.float32)
        if self.kind == "action15":
            x = to_low_rate(x, RATIO)
        if self.kind == "latent":
            with torch.no_grad():
                mu, _ = self.vae.encode(torch.as_tensor(x))
            return self.z_norm(mu.numpy()).astype(np.float32)
        return x.reshape(len(x), -1)

    def decode(self, sample: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Sample -> physical actions: (B, H, A) for action60 and latent, (B, H / 4, A) knots for action15."""
        sample = np.asarray(sample, np.float32)
        if self.kind == "latent":
            with torch.no_grad():
                x = self.vae.decode(torch.as_tensor(self.z_norm.inverse(sample).astype(np.float32))).numpy()
        else:
            x = sample.reshape(len(sample), -1, len(self.act_norm.mean))
        return self.act_norm.inverse(x) + ref[:, None]


def schedulers(s: dict):
    from diffusers import DDIMScheduler, DDPMScheduler

    kw = dict(num_train_timesteps=s["train_timesteps"], beta_schedule="squaredcos_cap_v2", clip_sample=False,
              prediction_type=s.get("prediction", "epsilon"))
    return DDPMScheduler(**kw), DDIMScheduler(**kw)


def train_denoiser(samples: np.ndarray, obs: np.ndarray, s: dict, rng: np.random.Generator) -> tuple[Denoiser, list]:
    """``s['steps']`` AdamW updates on random (sample, obs) minibatches; the network regresses the noise
    (``prediction`` epsilon) or the clean sample (``prediction`` sample)."""
    target_is_noise = s.get("prediction", "epsilon") == "epsilon"
    ddpm, _ = schedulers(s)
    model = Denoiser(samples.shape[1], obs.shape[1], s["hidden"], s["layers"])
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"], weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(s["steps"], 1))
    x_all, o_all = torch.as_tensor(samples), torch.as_tensor(obs, dtype=torch.float32)
    losses = []
    for _ in range(s["steps"]):
        idx = torch.as_tensor(rng.integers(0, len(x_all), size=s["batch"]))
        x0, o = x_all[idx], o_all[idx]
        noise = torch.randn_like(x0)
        t = torch.randint(0, s["train_timesteps"], (len(x0),))
        loss = torch.nn.functional.mse_loss(model(ddpm.add_noise(x0, noise, t), t, o), noise if target_is_noise else x0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return model.eval(), losses


@torch.no_grad()
def sample(model: Denoiser, obs: np.ndarray, dim: int, s: dict, generator: torch.Generator,
           known: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """DDIM sampling of (B, dim) samples given normalised observations (B, O).

    ``known`` = (mask (dim,) bool, values (B, dim)): entries fixed by inpainting.
    """
    _, ddim = schedulers(s)
    ddim.set_timesteps(s["inference_steps"])
    o = torch.as_tensor(obs, dtype=torch.float32)
    x = torch.randn((len(o), dim), generator=generator)
    if known is not None:
        mask = torch.as_tensor(known[0], dtype=torch.bool)
        values = torch.as_tensor(known[1], dtype=torch.float32)
    steps = list(ddim.timesteps)
    for i, t in enumerate(steps):
        out = model(x, t.repeat(len(o)), o)  # noise or clean sample, as the scheduler's prediction_type says
        x = ddim.step(out, t, x).prev_sample
        if known is not None:
            if i + 1 < len(steps):
                nz = ddim.add_noise(values, torch.randn(values.shape, generator=generator), steps[i + 1].repeat(len(o)))
            else:
                nz = values
            x[:, mask] = nz[:, mask]
    return x.numpy()
