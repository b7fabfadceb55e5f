"""A small pre-LN transformer encoder with exits at every layer and a factorisable token embedding.

Why not ``transformers.BertModel``: importing it costs ~3.5 s of CPU per process here, and the smoke
chain runs one process per (arm, seed); a post-LN BERT also has no final norm, while MLL applies the
final norm to every exit's hidden state (the published recipe, on pre-norm decoders). So the encoder is
torch's own ``nn.TransformerEncoderLayer`` stack (norm_first) plus a final LayerNorm, mean pooling.

MEL: the token-embedding matrix E (vocab x d) is held as U (vocab x r, scaled by the singular values)
and V (r x d) from a truncated SVD of E; a sub-model of rank r' embeds tokens with U[:, :r'] V[:r'].
A model trained with a full E is cut post hoc the same way (SVD of its trained E).
"""

from __future__ import annotations

import torch
from torch import nn


def svd_factors(E: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """U (vocab x d) = left singular vectors scaled by singular values, V (d x d): E == U @ V exactly."""
    u, s, vh = torch.linalg.svd(E, full_matrices=False)
    return u * s, vh


class Encoder(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, ff: int, max_len: int, mel: bool):
        super().__init__()
        self.d, self.mel = d, mel
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        if mel:  # trained as U, V (the full E is never a parameter)
            U, V = svd_factors(self.tok.weight.detach())
            del self.tok
            self.U, self.V = nn.Parameter(U.contiguous()), nn.Parameter(V.contiguous())

    def factors(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.mel:
            return self.U, self.V
        return svd_factors(self.tok.weight.detach())

    def embed(self, ids: torch.Tensor, rank: int | None = None, factors=None) -> torch.Tensor:
        if rank is None and not self.mel:
            return self.tok(ids)
        U, V = factors if factors is not None else self.factors()
        r = rank or self.d
        return U[ids, :r] @ V[:r]

    def forward(self, ids: torch.Tensor, exits=None, rank: int | None = None, factors=None) -> list[torch.Tensor]:
        """Mean-pooled, final-normed embeddings (batch x d) at each exit layer (1-based, ascending)."""
        exits = sorted(exits or [len(self.layers)])
        pad = ids == 0
        h = self.embed(ids, rank, factors) + self.pos.weight[: ids.shape[1]]
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        out = []
        for i, layer in enumerate(self.layers[: exits[-1]], start=1):
            h = layer(h, src_key_padding_mask=pad)
            if i in exits:
                z = self.norm(h) * keep
                out.append(z.sum(1) / keep.sum(1).clamp_min(1.0))
        return out


def exit_layers(n_layers: int) -> list[int]:
    """MLL exits: {1, 2, 4, 8, ...} <= L, plus L."""
    out, k = [], 1
    while k < n_layers:
        out.append(k)
        k *= 2
    return out + [n_layers]


def sub_model_params(vocab: int, d: int, layers: int, heads: int, ff: int, max_len: int, rank: int, layer: int) -> int:
    """Parameters of the sub-model that embeds at ``rank`` and stops at ``layer``: the factorised table
    (vocab*r + r*d) when that is smaller than the full one, positions, the first ``layer`` blocks, final norm."""
    block = sum(p.numel() for p in nn.TransformerEncoderLayer(d, heads, ff, batch_first=True, norm_first=True).parameters())
    emb = min(vocab * d, vocab * rank + rank * d)
    return emb + max_len * d + layer * block + 2 * d
