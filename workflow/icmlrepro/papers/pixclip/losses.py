"""The three alignment branches (our reading; PixCLIP's released code shows only CLIP's symmetric loss).

- global: whole image (alpha = ones) <-> full long caption, symmetric InfoNCE over the batch;
- region: image with the region's mask as alpha <-> one of the region's two descriptions (its phrase, or its
  category name alone, drawn at random), symmetric InfoNCE over the batch's regions, where two regions with the
  same text, or a category name and a region of that category, are not each other's negatives;
- pixel: every patch token <-> the phrases of its own image (regions + background), cross-entropy against the
  share of the patch's pixels that each region (or the background) covers: dense patch-phrase alignment.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def contrastive(a: torch.Tensor, b: torch.Tensor, scale: torch.Tensor, groups: torch.Tensor | None = None,
                same: torch.Tensor | None = None) -> torch.Tensor:
    """Symmetric InfoNCE between rows of ``a`` and ``b`` (matched by index), cosine logits times ``scale``.
    Rows with the same ``groups`` id (e.g. the same phrase) are masked out of each other's negatives; so is every
    pair marked in the boolean (N, N) matrix ``same`` (``same[i, j]``: ``b[j]`` is true of ``a[i]``, e.g. a
    category name and a region of that category; masked in both directions of the loss, as ``logits[i, j]``)."""
    logits = scale * F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T
    mask = torch.zeros(len(a), len(a), dtype=torch.bool)
    if groups is not None:
        mask |= groups[:, None] == groups[None, :]
    if same is not None:
        mask |= same
    if groups is not None or same is not None:
        logits = logits.masked_fill(mask & ~torch.eye(len(a), dtype=torch.bool), float("-inf"))
    target = torch.arange(len(a))
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def patch_targets(labels: torch.Tensor, patch: int, k: int) -> torch.Tensor:
    """(B, P, k+1) share of each patch's pixels in background (0) and regions 1..k, from (B, H, W) label maps."""
    one_hot = F.one_hot(labels.long(), k + 1).permute(0, 3, 1, 2).float()
    shares = F.avg_pool2d(one_hot, patch)  # (B, k+1, H/p, W/p)
    return shares.flatten(2).transpose(1, 2)


def pixel_loss(patches: torch.Tensor, phrases: torch.Tensor, valid: torch.Tensor, targets: torch.Tensor,
               scale: torch.Tensor) -> torch.Tensor:
    """Dense alignment: ``patches`` (B, P, E), ``phrases`` (B, k+1, E) with slot 0 the background sentence,
    ``valid`` (B, k+1) which slots exist, ``targets`` (B, P, k+1) pixel shares. Soft cross-entropy per patch."""
    logits = scale * torch.einsum("bpe,bke->bpk", F.normalize(patches, dim=-1), F.normalize(phrases, dim=-1))
    logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
    logp = F.log_softmax(logits, dim=-1).masked_fill(~valid[:, None, :], 0.0)
    return -(targets * logp).sum(-1).mean()
