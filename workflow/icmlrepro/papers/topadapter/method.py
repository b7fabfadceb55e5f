"""TopAdapter (our reading of the abstract; the paper's code is not public): ToInjection + ToTransfer.

ToInjection: a simplex generator turns each patch's kNN complex at several scales (0D vertices, 1D edges,
2D triangles; geometry.simplex_features) into a topological feature per patch: one linear layer + GELU per
(scale, simplex dimension), max-pooled over the simplices, concatenated and fused. Before each frozen block a
geometric controller fuses it with the semantic patch tokens: ``h += gate(h, s) * P(s)``, the gate an
input-dependent sigmoid of both (a bottleneck MLP), ``P`` zero-initialised (the frozen model is unchanged at
the start). ToTransfer: after each block the topological state is updated from the block's output and carried
to the next layer, ``s <- s + U([s, D(h)])``; without ToTransfer every layer restarts from the generator's
output, ``s <- s0 + U([s0, D(h)])`` (same modules and parameters, nothing carried; the state entering blocks
1 and 2 is the same either way, so the two differ from the third block on).

Ablations (``variant``): ``no_totransfer``; ``no_2d`` (0D and 1D simplices only); ``single_scale`` (the largest
scale only); ``fixed_fusion`` (the gate is a learned per-channel constant, not a function of the input);
``noise_topology`` (the control: every raw simplex feature replaced by Gaussian noise with the batch's
per-channel mean and std; same shapes, same modules, same trainable parameters).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .geometry import D0, D1, D2, simplex_features, table_slices

VARIANTS = ("full", "no_totransfer", "no_2d", "single_scale", "fixed_fusion", "noise_topology")
WIDTHS = (D0, D1, D2)


def matched_noise(f: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """Gaussian noise of ``f``'s shape with the mean and std of each of its channels (last axis)."""
    flat = f.reshape(-1, f.shape[-1])
    z = torch.randn(f.shape, generator=gen)
    return z * flat.std(0) + flat.mean(0)


class SimplexGenerator(nn.Module):
    def __init__(self, scales, dims, dt: int, noise: bool = False, table_scales=None):
        super().__init__()
        self.scales, self.dims, self.noise = tuple(scales), tuple(dims), noise
        self.rows = table_slices(table_scales if table_scales is not None else scales)  # layout of a simplex table
        self.enc = nn.ModuleDict({f"k{k}_d{q}": nn.Sequential(nn.Linear(WIDTHS[q], dt), nn.GELU())
                                  for k in self.scales for q in self.dims})
        self.fuse = nn.Sequential(nn.Linear(len(self.enc) * dt, dt), nn.GELU())
        self.gen: torch.Generator | None = None  # set by the trainer for reproducible noise

    def raw(self, rel: torch.Tensor, table: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The raw features per (scale, dimension): computed from ``rel``, or read from a precomputed
        ``geometry.simplex_table`` (the same numbers, computed once per split)."""
        out = {}
        cols = (slice(0, D0), slice(D0, D0 + D1), slice(D0 + D1, D0 + D1 + D2))
        for k in self.scales:
            feats = simplex_features(rel, k) if table is None else [table[..., self.rows[k], c] for c in cols]
            for q in self.dims:
                f = feats[q]
                out[f"k{k}_d{q}"] = matched_noise(f, self.gen) if self.noise else f
        return out

    def scale_block(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Scale k's encoders (one Linear per simplex dimension) as one block-diagonal Linear on the concatenated
        [0D | 1D | 2D] columns: the same outputs (the off-diagonal blocks are exact zeros, not parameters), one
        product instead of three (the generator runs at every step of every TopAdapter arm)."""
        lins = [self.enc[f"k{k}_d{q}"][0] for q in self.dims]
        widths = [WIDTHS[q] for q in self.dims]
        rows, before = [], 0
        for lin, w in zip(lins, widths):
            rows.append(F.pad(lin.weight, (before, sum(widths) - before - w)))
            before += w
        return torch.cat(rows, 0), torch.cat([lin.bias for lin in lins])

    def forward(self, rel: torch.Tensor, table: torch.Tensor | None = None) -> torch.Tensor:  # (B, G, K, 3) -> (B, G, dt)
        """Per scale: every dimension's encoder (Linear + GELU) on its simplices, max-pooled over them;
        concatenated in the order of ``enc`` (scale-major) and fused."""
        pooled = []
        if table is not None and not self.noise and self.dims == tuple(range(len(self.dims))):
            last = sum(WIDTHS[q] for q in self.dims)  # the dimensions used are the table's first columns
            feats = {k: table[..., self.rows[k], :last] for k in self.scales}
        else:
            raw = self.raw(rel, table)
            feats = {k: torch.cat([raw[f"k{k}_d{q}"] for q in self.dims], -1) for k in self.scales}
        for k in self.scales:
            W, b = self.scale_block(k)
            pooled.append(F.gelu(F.linear(feats[k], W, b)).max(-2).values)  # max-pool (max, not amax: the cheaper backward)
        return self.fuse(torch.cat(pooled, -1))


class TopAdapter(nn.Module):
    def __init__(self, d: int, depth: int, dt: int, r: int, scales, variant: str = "full"):
        super().__init__()
        if variant not in VARIANTS:
            raise KeyError(variant)
        self.variant = variant
        dims = (0, 1) if variant == "no_2d" else (0, 1, 2)
        self.generator = SimplexGenerator([max(scales)] if variant == "single_scale" else scales, dims, dt,
                                          noise=variant == "noise_topology", table_scales=scales)
        self.inject = nn.ModuleList(nn.Linear(dt, d) for _ in range(depth))
        for p in self.inject:
            nn.init.zeros_(p.weight)
            nn.init.zeros_(p.bias)
        if variant == "fixed_fusion":
            self.gate_logit = nn.Parameter(torch.zeros(depth, d))
        else:
            self.gate = nn.ModuleList(nn.Sequential(nn.Linear(d + dt, r), nn.GELU(), nn.Linear(r, d)) for _ in range(depth))
        self.down = nn.ModuleList(nn.Linear(d, dt) for _ in range(depth))
        self.update = nn.ModuleList(nn.Sequential(nn.Linear(2 * dt, dt), nn.GELU(), nn.Linear(dt, dt)) for _ in range(depth))
        self.carry = variant != "no_totransfer"

    def controller(self, layer: int, h: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """The gate in (0, 1)^d per patch token: input-dependent, or a constant for ``fixed_fusion``."""
        if self.variant == "fixed_fusion":
            return torch.sigmoid(self.gate_logit[layer]).expand_as(h)
        return torch.sigmoid(self.gate[layer](torch.cat([h, s], -1)))

    def forward(self, bb, rel, centers, topo=None):
        x, pos = bb.tokens(rel, centers)
        G = rel.shape[1]
        s0 = self.generator(rel, topo)
        state = {"s": s0}

        def before(layer, h):
            s, patch = state["s"], h[:, 1:1 + G]
            patch = patch + self.controller(layer, patch, s) * self.inject[layer](s)
            return torch.cat([h[:, :1], patch, h[:, 1 + G:]], 1)

        def after(layer, h):
            base = state["s"] if self.carry else s0
            state["s"] = base + self.update[layer](torch.cat([base, self.down[layer](h[:, 1:1 + G])], -1))
            return h

        return bb.run_blocks(x, pos, before=before, after=after)
