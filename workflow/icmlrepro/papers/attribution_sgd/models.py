"""The classifiers: MLP, CNN and a small vision transformer with softmax or kernel attention.

Smooth activations (GELU) everywhere: with ReLU the input gradient is piecewise constant, so the
top-k attack (which differentiates the saliency map) and the input Hessian would be zero almost
everywhere. Every model takes images [n, 1, h, w].

The transformer cuts the image into non-overlapping patches (16 tokens), adds learned position
embeddings, applies ``depth`` pre-norm blocks and mean-pools the tokens (no class token, so the
attribution to a token is a plain column mass of the rolled-out attention). Both attention kinds
build the explicit n x n row-stochastic matrix, so rollout treats them alike:

* softmax: A = softmax(q k^T / sqrt(d));
* kernel (linear attention, Katharopoulos et al. 2020): A_ij = phi(q_i).phi(k_j) / sum_j phi(q_i).phi(k_j)
  with phi = elu + 1, a positive feature map without the exponential's normalisation.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

FAMILIES = {"feedforward": ("mlp", "cnn"), "transformer": ("vit_softmax", "vit_kernel")}


class MLP(nn.Module):
    def __init__(self, shape, n_classes: int, width: int):
        super().__init__()
        d = shape[0] * shape[1]
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(d, width), nn.GELU(), nn.Linear(width, width), nn.GELU(),
                                 nn.Linear(width, n_classes))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self, shape, n_classes: int, width: int):
        super().__init__()
        c = max(4, width // 8)
        self.conv = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.GELU(), nn.Conv2d(c, 2 * c, 3, padding=1),
                                  nn.GELU(), nn.AvgPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * c * (shape[0] // 2) * (shape[1] // 2), width),
                                  nn.GELU(), nn.Linear(width, n_classes))

    def forward(self, x):
        return self.head(self.conv(x))


def attention_matrix(q: torch.Tensor, k: torch.Tensor, kind: str) -> torch.Tensor:
    """Row-stochastic attention [..., n, n] from queries and keys [..., n, d]."""
    if kind == "softmax":
        return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
    if kind == "kernel":
        s = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)
        return s / s.sum(dim=-1, keepdim=True)
    raise ValueError(f"unknown attention {kind!r}")


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, kind: str):
        super().__init__()
        self.heads, self.kind = heads, kind
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.attn = None  # last attention [b, heads, n, n], kept for rollout

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = attention_matrix(q, k, self.kind)
        self.attn = a
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.n2(x))


class ViT(nn.Module):
    def __init__(self, shape, n_classes: int, width: int, patch: int, kind: str, depth: int = 2, heads: int = 2):
        super().__init__()
        self.patch = patch
        n_tok = (shape[0] // patch) * (shape[1] // patch)
        self.embed = nn.Linear(patch * patch, width)
        self.pos = nn.Parameter(torch.randn(1, n_tok, width))  # O(1): a bag of small patches alone hardly tells digits apart
        self.blocks = nn.ModuleList(Block(width, heads, kind) for _ in range(depth))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, n_classes)

    def tokens(self, x):
        p = self.patch
        t = F.unfold(x, kernel_size=p, stride=p)  # [b, p*p, n_tok]
        return self.embed(t.transpose(1, 2)) + self.pos

    def forward(self, x):
        h = self.tokens(x)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h).mean(dim=1))

    def rollout(self, x) -> torch.Tensor:
        """Attention rollout (Abnar & Zuidema 2020): prod over layers of (A_mean_heads + I) / 2; a token's
        attribution is the mean over output tokens of its rolled-out mass (mean pooling). [b, n_tok]"""
        with torch.no_grad():
            self(x)
            r = None
            for blk in self.blocks:
                a = blk.attn.mean(dim=1)
                a = 0.5 * a + 0.5 * torch.eye(a.shape[-1])
                r = a if r is None else a @ r
        return r.mean(dim=1)


def build(model: str, shape, n_classes: int, width: int, patch: int) -> nn.Module:
    if model == "mlp":
        return MLP(shape, n_classes, width)
    if model == "cnn":
        return CNN(shape, n_classes, width)
    if model in ("vit_softmax", "vit_kernel"):
        return ViT(shape, n_classes, max(16, width // 2), patch, model.split("_")[1])
    raise ValueError(f"unknown model {model!r}")
