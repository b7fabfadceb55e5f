"""The abstract's two diagnostics, computed the same way for every rung of the ladder.

* Consistency of neighbourhood-context use: the trained encoder sees the same ``R`` uniform random
  masks (shared by all rungs of a seed). For each masked node its last-layer attention over
  neighbours (head mean, self loop included) is a distribution; consistency = 1 - mean total
  variation distance between that distribution under one mask and its mean over the masks in
  which the node is masked. 1 = the node reads its context the same way whatever else is masked.
* Reconstruction outcome under the same masks: mean scaled cosine error on the masked nodes, overall
  and per density bin (``recon_bins``): how evenly the trained model covers sparse and dense regions,
  a coverage outcome that the masking sampler does not fix (its per-epoch counts per bin are fixed by
  construction; see masking.py).
Training coverage per density bin (share masked per window) lives in masking.coverage_per_bin.
"""

from __future__ import annotations

import torch

import torch.nn.functional as F

from .model import MaskedGraphAutoEncoder, GraphTensors, sce_loss


def recon_error_per_bin(errors: list[torch.Tensor], masks: list[torch.Tensor], bins: torch.Tensor) -> list[float]:
    """Mean per-node scaled cosine error per density bin, pooled over the masks (masked nodes only)."""
    n_bins = int(bins.max()) + 1
    total, count = torch.zeros(n_bins, dtype=torch.float64), torch.zeros(n_bins, dtype=torch.float64)
    for err, m in zip(errors, masks):
        total.index_add_(0, bins[m], err.double())
        count.index_add_(0, bins[m], torch.ones(m.numel(), dtype=torch.float64))
    return (total / count.clamp(min=1.0)).tolist()


def attention_consistency(attn: torch.Tensor, dst: torch.Tensor, masks: list[torch.Tensor], n: int) -> float:
    """``attn``: (R, E) attention per mask and edge into ``dst``; ``masks``: the masked nodes of each mask."""
    r = attn.shape[0]
    node_masked = torch.zeros(r, n, dtype=torch.bool)
    for i, m in enumerate(masks):
        node_masked[i, m] = True
    on = node_masked[:, dst].float()                  # edge's target masked in mask r
    mean = (attn * on).sum(0) / on.sum(0).clamp(min=1.0)
    dev = (attn - mean).abs() * on
    tv = 0.5 * torch.zeros(r, n).index_add_(1, dst, dev)
    counted = node_masked & (node_masked.sum(0) >= 2)  # a node seen under one mask only has no spread
    if not counted.any():
        raise ValueError("no node is masked in two of the consistency masks; raise their number")
    return float(1.0 - tv[counted].mean())


@torch.no_grad()
def diagnose(model: MaskedGraphAutoEncoder, g: GraphTensors, masks: list[torch.Tensor], seed: int,
             gamma: float) -> dict:
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    attn, losses, errors, dst = [], [], [], None
    for m in masks:
        rec, (edge_index, alpha) = model.reconstruct(g, m, gen, return_attention=True)
        losses.append(float(sce_loss(rec[m], g.x[m], gamma)))
        cos = (F.normalize(rec[m], p=2, dim=-1) * F.normalize(g.x[m], p=2, dim=-1)).sum(-1)
        errors.append((1.0 - cos).pow(gamma))
        attn.append(alpha.mean(-1))
        dst = edge_index[1]
    return {"recon_loss": sum(losses) / len(losses),
            "recon_bins": recon_error_per_bin(errors, masks, g.bins),
            "consistency": attention_consistency(torch.stack(attn), dst, masks, g.x.shape[0])}
