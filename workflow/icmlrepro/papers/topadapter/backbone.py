"""A small Point-MAE-shaped point Transformer: patch tokens from FPS + kNN groups, a mini-PointNet patch
embedding, a [CLS] token, a centre-position MLP added before every block (as Point-MAE does), pre-LN blocks.

Attention is written out (``qkv`` and ``proj`` Linear layers, ``fc1``/``fc2`` in the MLP) so that peft's LoRA
can target the same linear layers the paper's backbones have, and the PEFT methods can hook in before and
after each block. ``run_blocks`` is the one forward path every arm uses.
"""

from __future__ import annotations

import torch
from torch import nn


class PatchEmbed(nn.Module):
    """Mini-PointNet: a shared point MLP on the offsets of a patch, max-pooled, projected to width d."""

    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.point = nn.Sequential(nn.Linear(3, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.out = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.GELU(), nn.Linear(hidden, d))

    def forward(self, rel: torch.Tensor) -> torch.Tensor:  # (B, G, K, 3) -> (B, G, d)
        f = self.point(rel)
        g = f.amax(-2, keepdim=True).expand_as(f)
        return self.out(torch.cat([f, g], -1)).amax(-2)


class Attention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        # written out rather than scaled_dot_product_attention: the same maths, and it has a vmap batching rule
        # (SeedBatch trains the seeds of an arm as one vmapped model; SDPA falls back to a per-seed loop there)
        y = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, -1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.fc1, self.fc2 = nn.Linear(d, mlp_ratio * d), nn.Linear(mlp_ratio * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))


class PointTransformer(nn.Module):
    def __init__(self, d: int, depth: int, heads: int, mlp_ratio: int = 2, patch_hidden: int = 32):
        super().__init__()
        self.d = d
        self.embed = PatchEmbed(d, patch_hidden)
        self.pos = nn.Sequential(nn.Linear(3, 64), nn.GELU(), nn.Linear(64, d))
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.cls_pos = nn.Parameter(torch.zeros(1, 1, d))
        self.blocks = nn.ModuleList(Block(d, heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(d)
        nn.init.normal_(self.cls, std=0.02)
        nn.init.normal_(self.cls_pos, std=0.02)

    def tokens(self, rel: torch.Tensor, centers: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """([CLS] + patch tokens (B, 1+G, d), their position embeddings (B, 1+G, d))."""
        B = rel.shape[0]
        x = torch.cat([self.cls.expand(B, -1, -1), self.embed(rel)], 1)
        pos = torch.cat([self.cls_pos.expand(B, -1, -1), self.pos(centers)], 1)
        return x, pos

    def run_blocks(self, x, pos, before=None, after=None) -> torch.Tensor:
        """Every block sees x + pos (extra tokens appended by a hook get zero position); ``before(l, x)`` and
        ``after(l, x)`` may change the token sequence around block l. Returns the final-normed tokens."""
        for layer, blk in enumerate(self.blocks):
            if before is not None:
                x = before(layer, x)
            p = torch.cat([pos, pos.new_zeros(pos.shape[0], x.shape[1] - pos.shape[1], pos.shape[2])], 1)
            x = blk(x + p)
            if after is not None:
                x = after(layer, x)
        return self.norm(x)

    @staticmethod
    def pooled(x: torch.Tensor, n_groups: int) -> torch.Tensor:
        """[CLS] token concatenated with the max over patch tokens (prompt tokens are not pooled)."""
        return torch.cat([x[:, 0], x[:, 1:1 + n_groups].amax(1)], -1)

    def forward(self, rel, centers) -> torch.Tensor:
        x, pos = self.tokens(rel, centers)
        return self.pooled(self.run_blocks(x, pos), rel.shape[1])


def new_backbone(s: dict) -> PointTransformer:
    return PointTransformer(s["d"], s["depth"], s["heads"], s["mlp_ratio"], s["patch_hidden"])
