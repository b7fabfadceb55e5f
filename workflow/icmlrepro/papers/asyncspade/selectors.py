"""Token selectors with one interface, as torch references (the Triton kernels will match these).

Each returns a boolean keep-mask ``[b, heads, n]`` over the ``n`` cached positions for one decode
step, given the query ``[b, heads, d]`` used for scoring and the cached keys ``[b, kv_heads, n, d]``
(grouped-query attention: query head h reads kv head h // (heads // kv_heads)).
"""

from __future__ import annotations

import torch


def expand_kv(keys: torch.Tensor, heads: int) -> torch.Tensor:
    return keys.repeat_interleave(heads // keys.shape[1], dim=1)


def token_scores(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q . k for every cached token: ``[b, heads, n]``."""
    return torch.einsum("bhd,bhnd->bhn", query.float(), expand_kv(keys, query.shape[1]).float())


def topk_mask(scores: torch.Tensor, budget: int, always_last: int = 1) -> torch.Tensor:
    """Keep the ``budget`` highest-scoring tokens, and always the newest ``always_last``."""
    n = scores.shape[-1]
    keep = torch.zeros_like(scores, dtype=torch.bool)
    if budget >= n:
        return ~keep
    idx = scores.topk(budget, dim=-1).indices
    keep.scatter_(-1, idx, True)
    if always_last:
        keep[..., n - always_last:] = True
    return keep


def oracle_topk(query: torch.Tensor, keys: torch.Tensor, budget: int) -> torch.Tensor:
    """Token-level top-k with the true query: the accuracy upper bound for a given budget."""
    return topk_mask(token_scores(query, keys), budget)


def quest_page_scores(query: torch.Tensor, keys: torch.Tensor, page_size: int = 16) -> torch.Tensor:
    """Quest's page estimate: per page, channel-wise key max M and min m; score = sum_i max(q_i M_i, q_i m_i).

    Returns ``[b, heads, n_pages]``; the last page may be partial.
    """
    b, kvh, n, d = keys.shape
    pages = (n + page_size - 1) // page_size
    pad = pages * page_size - n
    k = expand_kv(keys, query.shape[1]).float()
    kmax = torch.nn.functional.pad(k, (0, 0, 0, pad), value=float("-inf")).view(b, -1, pages, page_size, d).amax(3)
    kmin = torch.nn.functional.pad(k, (0, 0, 0, pad), value=float("inf")).view(b, -1, pages, page_size, d).amin(3)
    q = query.float()[:, :, None, :]
    return torch.maximum(q * kmax, q * kmin).sum(-1)


def quest_mask(query: torch.Tensor, keys: torch.Tensor, budget: int, page_size: int = 16,
               min_pages: int = 3) -> torch.Tensor:
    """Quest: top pages by estimated score, page budget = max(budget // page_size, min_pages); the last
    (current) page is always attended."""
    n = keys.shape[2]
    scores = quest_page_scores(query, keys, page_size)
    pages = scores.shape[-1]
    k_pages = max(budget // page_size, min_pages)
    if k_pages >= pages:
        return torch.ones(query.shape[0], query.shape[1], n, dtype=torch.bool)
    scores[..., -1] = float("inf")  # the current page is always kept
    chosen = scores.topk(k_pages, dim=-1).indices
    page_keep = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, chosen, True)
    return page_keep.repeat_interleave(page_size, dim=-1)[..., :n]


def recall(selected: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Share of the reference selection that ``selected`` also keeps, per row: ``[b, heads]``."""
    return (selected & reference).sum(-1).double() / reference.sum(-1).clamp(min=1).double()
