"""The block VAE of action chunks and the denoiser of the diffusion policies.

Block VAE (as the published code): a chunk of ``H`` actions is cut into blocks of ``block`` steps; each
block is encoded on its own by a Conv1d stack (kernel 5, hidden 32, ``log2(downsample)`` stride-2 layers,
at least two layers) and a 1x1 conv to a diagonal Gaussian with ``latent_channels`` channels per latent
step; one MLP decodes all blocks' latent steps together into all ``H`` actions. Loss: L1 reconstruction
plus ``beta`` times the KL to N(0, I). Because the decoder sees every block, the decoded chunk is one
smooth whole, which is what Reuse-then-Refine relies on.

Denoiser: an MLP on (noisy sample, normalised observation, sinusoidal timestep embedding) that predicts
the noise; the same network (sizes from config) serves every policy, only the sample dimension differs.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def latent_steps(block: int, downsample: int) -> int:
    """Latent steps per block after ``log2(downsample)`` stride-2 convs (kernel 5, padding 2: ceil halving)."""
    n = block
    for _ in range(int(round(math.log2(downsample)))):
        n = (n + 1) // 2
    return n


class BlockVAE(nn.Module):
    def __init__(self, act_dim: int, horizon: int, block: int, downsample: int, latent_channels: int,
                 hidden: int = 32, decoder_hidden: int = 256):
        super().__init__()
        if horizon % block:
            raise ValueError(f"horizon {horizon} is not a multiple of the block size {block}")
        if downsample < 1 or downsample & (downsample - 1):
            raise ValueError(f"downsample must be a power of two, got {downsample}")
        self.act_dim, self.horizon, self.block = act_dim, horizon, block
        self.n_blocks, self.latent_channels = horizon // block, latent_channels
        self.steps = latent_steps(block, downsample)
        n_stride = int(round(math.log2(downsample)))
        layers, c_in = [], act_dim
        for i in range(max(2, n_stride)):
            layers += [nn.Conv1d(c_in, hidden, kernel_size=5, stride=2 if i < n_stride else 1, padding=2), nn.Mish()]
            c_in = hidden
        self.encoder = nn.Sequential(*layers)
        self.to_stats = nn.Conv1d(hidden, 2 * latent_channels, kernel_size=1)
        self.latent_dim = self.n_blocks * self.steps * latent_channels
        self.decoder = nn.Sequential(nn.Linear(self.latent_dim, decoder_hidden), nn.Mish(),
                                     nn.Linear(decoder_hidden, decoder_hidden), nn.Mish(),
                                     nn.Linear(decoder_hidden, horizon * act_dim))

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, H, A) normalised chunk -> mean and log-variance, each (B, latent_dim)."""
        b = x.shape[0]
        blocks = x.reshape(b * self.n_blocks, self.block, self.act_dim).transpose(1, 2)
        stats = self.to_stats(self.encoder(blocks))  # (B * n_blocks, 2C, steps)
        mu, logvar = stats.chunk(2, dim=1)
        return mu.reshape(b, -1), logvar.clamp(-12, 8).reshape(b, -1)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(z).reshape(z.shape[0], self.horizon, self.act_dim)

    def forward(self, x: torch.Tensor, sample: bool = True):
        mu, logvar = self.encode(x)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar) if sample else mu
        return self.decode(z), mu, logvar

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        """Encode to the posterior mean and decode: what Reuse-then-Refine applies to a chunk."""
        return self.decode(self.encode(x)[0])


def vae_loss(recon: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, beta: float):
    """L1 reconstruction (mean over entries) + beta * KL(q(z|x) || N(0, I)) (mean over the batch)."""
    l1 = F.l1_loss(recon, x)
    kl = (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)).mean()
    return l1 + beta * kl, l1, kl


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], -1)


class Denoiser(nn.Module):
    """eps_theta(x_t, t | obs): an MLP with the observation and timestep embedding concatenated."""

    def __init__(self, sample_dim: int, obs_dim: int, hidden: int, layers: int, t_dim: int = 32):
        super().__init__()
        self.t_dim = t_dim
        dims = [sample_dim + obs_dim + t_dim] + [hidden] * layers
        mods = []
        for a, b in zip(dims[:-1], dims[1:]):
            mods += [nn.Linear(a, b), nn.Mish()]
        self.net = nn.Sequential(*mods, nn.Linear(hidden, sample_dim))

    def forward(self, x: torch.Tensor, t: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, obs, timestep_embedding(t, self.t_dim)], -1))
