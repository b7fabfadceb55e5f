"""The PEFT baselines the abstract names, in miniature, each hooked into the frozen backbone's one forward path.

- ``IDPT``-style: an instance-aware dynamic prompt generator before the last block (a token MLP, max-pooled
  over patches, projected to P prompt tokens), as IDPT inserts its dynamic prompts before the last layer.
- ``DAPT``-style: a dynamic adapter after every block (bottleneck MLP whose output is scaled per token by a
  learned function of the token) plus internal prompts (P learned prompt tokens per layer, replaced layer by layer).
- ``Point-PEFT``-style: point-prior prompts (P learned tokens at the input) and a geometry-aware adapter after
  every block (bottleneck features aggregated over each patch's kNN patches in space, edge-conv style).
- LoRA: peft's ``LoraConfig`` injected into the backbone's qkv / proj / fc1 / fc2 linear layers.
Head-only and full fine-tuning need no module (``NoAdapter``). The banks, memory and propagation tricks of
the published methods are not reproduced (see the claims file's assumptions).
"""

from __future__ import annotations

import torch
from torch import nn


class NoAdapter(nn.Module):
    """The backbone's own forward (head-only and full fine-tuning)."""

    def forward(self, bb, rel, centers):
        x, pos = bb.tokens(rel, centers)
        return bb.run_blocks(x, pos)


def bottleneck(d: int, r: int) -> nn.Sequential:
    """d -> r -> d with a zero-initialised up-projection (the adapter starts as the identity)."""
    up = nn.Linear(r, d)
    nn.init.zeros_(up.weight)
    nn.init.zeros_(up.bias)
    return nn.Sequential(nn.Linear(d, r), nn.GELU(), up)


class IDPT(nn.Module):
    def __init__(self, d: int, depth: int, r: int, n_prompts: int):
        super().__init__()
        self.depth, self.P = depth, n_prompts
        self.token = nn.Sequential(nn.Linear(d, 2 * r), nn.GELU())
        self.prompt = nn.Linear(2 * r, n_prompts * d)

    def forward(self, bb, rel, centers):
        x, pos = bb.tokens(rel, centers)
        G = rel.shape[1]

        def before(layer, h):
            if layer != self.depth - 1:
                return h
            z = self.token(h[:, 1:1 + G]).amax(1)
            return torch.cat([h, self.prompt(z).view(h.shape[0], self.P, -1)], 1)

        return bb.run_blocks(x, pos, before=before)


class DAPT(nn.Module):
    def __init__(self, d: int, depth: int, r: int, n_prompts: int):
        super().__init__()
        self.P = n_prompts
        self.adapters = nn.ModuleList(bottleneck(d, r) for _ in range(depth))
        self.scales = nn.ModuleList(nn.Linear(d, 1) for _ in range(depth))
        self.prompts = nn.Parameter(torch.randn(depth, n_prompts, d) * 0.02)

    def forward(self, bb, rel, centers):
        x, pos = bb.tokens(rel, centers)
        n = x.shape[1]

        def before(layer, h):
            return torch.cat([h[:, :n], self.prompts[layer].expand(h.shape[0], -1, -1)], 1)

        def after(layer, h):
            return h + torch.sigmoid(self.scales[layer](h)) * self.adapters[layer](h)

        return bb.run_blocks(x, pos, before=before, after=after)


class PointPEFT(nn.Module):
    def __init__(self, d: int, depth: int, r: int, n_prompts: int, k_patches: int):
        super().__init__()
        self.k = k_patches
        self.prompts = nn.Parameter(torch.randn(1, n_prompts, d) * 0.02)
        self.down = nn.ModuleList(nn.Linear(d, r) for _ in range(depth))
        self.edge = nn.ModuleList(nn.Sequential(nn.Linear(2 * r, r), nn.GELU()) for _ in range(depth))
        self.up = nn.ModuleList(nn.Linear(r, d) for _ in range(depth))
        for u in self.up:
            nn.init.zeros_(u.weight)
            nn.init.zeros_(u.bias)

    def forward(self, bb, rel, centers):
        x, pos = bb.tokens(rel, centers)
        x = torch.cat([x, self.prompts.expand(x.shape[0], -1, -1)], 1)
        G = rel.shape[1]
        nb = torch.cdist(centers, centers).topk(min(self.k, G), largest=False).indices  # (B, G, k)
        ar = torch.arange(x.shape[0])[:, None, None]

        def after(layer, h):
            f = self.down[layer](h[:, 1:1 + G])
            edge = torch.cat([f[ar, nb] - f[:, :, None], f[:, :, None].expand(-1, -1, nb.shape[-1], -1)], -1)
            g = self.up[layer](self.edge[layer](edge).amax(2))
            return torch.cat([h[:, :1], h[:, 1:1 + G] + g, h[:, 1 + G:]], 1)

        return bb.run_blocks(x, pos, after=after)


def add_lora(bb: nn.Module, r: int, alpha: float) -> nn.Module:
    """peft LoRA on every attention and MLP linear layer of the backbone (peft imported only here: ~4 s)."""
    from peft import LoraConfig, inject_adapter_in_model

    return inject_adapter_in_model(LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, bias="none",
                                              target_modules=["qkv", "proj", "fc1", "fc2"]), bb)
