"""Token selectors with one output: the indices ``[b, heads, k]`` of the cached tokens a decode step reads.

Inputs are the query ``[b, heads, d]`` used for scoring and the cached keys ``[b, kv_heads, n, d]``
(grouped-query attention: query head h reads kv head h // (heads // kv_heads)); ``valid[b, n]`` is
False at left padding. Index -1 marks an empty slot (fewer valid tokens than the budget). The
scoring runs through ``kernels`` (Triton on CUDA, the torch reference elsewhere).
"""

from __future__ import annotations

import torch

from . import kernels

NEG = float("-inf")


def token_scores(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q . k for every cached token: ``[b, heads, n]`` fp32."""
    return kernels.token_scores(query, keys)


def topk_indices(scores: torch.Tensor, budget: int, valid: torch.Tensor | None = None,
                 newest: int = 1) -> torch.Tensor:
    """The ``budget`` highest-scoring valid tokens, the newest ``newest`` always among them."""
    n = scores.shape[-1]
    scores = scores.clone()
    if valid is not None:
        scores.masked_fill_(~valid[:, None, :], NEG)
    if newest:
        scores[..., n - newest:] = float("inf")
    vals, idx = scores.topk(min(budget, n), dim=-1, sorted=False)
    return idx.masked_fill(vals == NEG, -1)


def oracle_indices(query, keys, budget: int, valid=None) -> torch.Tensor:
    """Token-level top-k with the true query: the accuracy upper bound for a given budget."""
    return topk_indices(token_scores(query, keys), budget, valid)


def indices_to_mask(indices: torch.Tensor, n: int) -> torch.Tensor:
    """Boolean ``[b, heads, n]`` mask of the listed positions (for recall and tests)."""
    mask = torch.zeros(*indices.shape[:-1], n + 1, dtype=torch.bool, device=indices.device)
    mask.scatter_(-1, torch.where(indices < 0, n, indices), True)
    return mask[..., :n]


def recall(selected: torch.Tensor, reference: torch.Tensor, n: int) -> torch.Tensor:
    """Share of the reference selection that ``selected`` also lists, per row: ``[b, heads]``."""
    s, r = indices_to_mask(selected, n), indices_to_mask(reference, n)
    return (s & r).sum(-1).double() / r.sum(-1).clamp(min=1).double()


# --- Quest --------------------------------------------------------------------------------------

def page_bounds(keys: torch.Tensor, page_size: int, valid: torch.Tensor | None = None):
    """Channel-wise key max and min per page ``[b, kv_heads, pages, d]`` and which pages hold a
    valid token ``[b, pages]``. Padding never widens a page's bounds."""
    b, kvh, n, d = keys.shape
    pages = (n + page_size - 1) // page_size
    pad = pages * page_size - n
    k = keys.float()
    ok = torch.ones(b, n, dtype=torch.bool, device=keys.device) if valid is None else valid
    ok = torch.nn.functional.pad(ok, (0, pad), value=False)
    k = torch.nn.functional.pad(k, (0, 0, 0, pad)).view(b, kvh, pages, page_size, d)
    okp = ok.view(b, 1, pages, page_size, 1)
    kmax = k.masked_fill(~okp, NEG).amax(3)
    kmin = k.masked_fill(~okp, float("inf")).amin(3)
    has = ok.view(b, pages, page_size).any(-1)
    empty = ~has[:, None, :, None]
    return kmax.masked_fill(empty, 0.0), kmin.masked_fill(empty, 0.0), has


def quest_page_scores(query, keys, page_size: int = 16) -> torch.Tensor:
    """Quest's estimate per page, sum_i max(q_i M_i, q_i m_i): ``[b, heads, pages]``."""
    kmax, kmin, _ = page_bounds(keys, page_size)
    return kernels.quest_page_scores(query, kmax, kmin)


class PageTable:
    """Quest's per-page key bounds, kept across decode steps: full pages are summarised once, only
    the current (partial) page is recomputed at each step, as Quest's append kernel does."""

    def __init__(self, page_size: int):
        self.page_size = page_size
        self.full = None  # (kmax, kmin, has) of the completed pages

    def bounds(self, keys: torch.Tensor, valid: torch.Tensor | None):
        n, ps = keys.shape[2], self.page_size
        done = n // ps
        have = 0 if self.full is None else self.full[0].shape[2]
        if have > done or (self.full is not None and self.full[0].shape[0] != keys.shape[0]):
            self.full, have = None, 0  # a new generation started
        if done > have:
            new = page_bounds(keys[:, :, have * ps: done * ps], ps,
                              None if valid is None else valid[:, have * ps: done * ps])
            self.full = new if self.full is None else tuple(torch.cat([a, c], dim=-2 if a.dim() == 4 else -1)
                                                            for a, c in zip(self.full, new))
        parts = [self.full] if self.full is not None else []
        if n > done * ps:
            parts.append(page_bounds(keys[:, :, done * ps:], ps, None if valid is None else valid[:, done * ps:]))
        kmax = torch.cat([p[0] for p in parts], dim=2)
        kmin = torch.cat([p[1] for p in parts], dim=2)
        has = torch.cat([p[2] for p in parts], dim=1)
        return kmax, kmin, has


def quest_indices(query, keys, budget: int, page_size: int = 16, min_pages: int = 3, valid=None,
                  table: PageTable | None = None) -> torch.Tensor | None:
    """Quest: the tokens of the top pages by estimate, page budget max(budget // page_size,
    min_pages); the current (last) page always kept. None (dense) when the budget covers all pages."""
    n = keys.shape[2]
    kmax, kmin, has = (table or PageTable(page_size)).bounds(keys, valid)
    pages = kmax.shape[2]
    k_pages = max(budget // page_size, min_pages)
    if k_pages >= pages:
        return None
    scores = kernels.quest_page_scores(query, kmax, kmin).masked_fill(~has[:, None, :], NEG)
    scores[..., -1] = float("inf")
    chosen = scores.topk(k_pages, dim=-1, sorted=False).indices
    idx = (chosen[..., None] * page_size + torch.arange(page_size, device=keys.device)).flatten(-2)
    bad = idx >= n
    if valid is not None:
        bad |= ~torch.gather(valid[:, None, :].expand(-1, idx.shape[1], -1), -1, idx.clamp(max=n - 1))
    return idx.masked_fill(bad, -1)
