"""Triton kernels of sparse decoding, each with a torch reference of the same signature.

- :func:`gather_attention`: one decode query per head attends to the cached tokens listed in
  ``indices`` only (grouped-query attention; index -1 = empty slot). This is the forward every
  sparse method shares, so its cost is the "indices given for free" lower bound of a step.
- :func:`token_scores`: q . k of every cached token for one query per head (AsyncSpade's selection
  worker scores the predicted query with it, then takes the top-k).
- :func:`quest_page_scores`: Quest's per-page estimate sum_i max(q_i M_i, q_i m_i) from the pages'
  channel-wise key max M and min m.

On CUDA the Triton kernels run; elsewhere the torch references do (``use_triton``). The tests run
the kernels under ``TRITON_INTERPRET=1`` on CPU against the references. Loads are cast to fp32
inside the kernels, so bf16/fp16 caches accumulate in fp32 like the references.
"""

from __future__ import annotations

import torch

from icmlrepro.core.device import use_triton

try:  # triton is pinned in the environment; import lazily tolerated for docs builds
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None


# --- gather attention ---------------------------------------------------------------------------

def gather_attention_reference(query, keys, values, indices, scale: float):
    """``query[b, h, d]``, ``keys/values[b, kvh, n, d]``, ``indices[b, h, k]`` (int, -1 = empty)
    -> ``[b, h, d]`` fp32: softmax over the listed tokens only."""
    b, h, d = query.shape
    kvh = keys.shape[1]
    kv_of_head = torch.arange(h, device=query.device) // (h // kvh)
    idx = indices.clamp(min=0).long()
    bi = torch.arange(b, device=query.device)[:, None, None]
    k, v = _gather_rows(keys, bi, kv_of_head, idx), _gather_rows(values, bi, kv_of_head, idx)  # [b, h, k, d]
    s = torch.einsum("bhd,bhkd->bhk", query.float(), k) * scale
    s = s.masked_fill(indices < 0, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bhk,bhkd->bhd", p, v)


def _gather_rows(cache, bi, kv_of_head, idx):
    """``cache[b, kv_of_head[h], idx[b, h, k]]`` as fp32 ``[b, h, k, d]``. A cache that is a slice of a
    contiguous buffer along the token axis (the preallocated decode cache) is read as one table of
    rows with a single index_select, several times faster on CPU than three-way fancy indexing."""
    b, kvh, n, d = cache.shape
    cap = cache.stride(1) // d if d else 0
    fits = cache.storage_offset() + b * kvh * cap * d <= cache.untyped_storage().nbytes() // cache.element_size()
    if cache.stride(3) == 1 and cache.stride(2) == d and cache.stride(0) == kvh * cache.stride(1) and cap >= n and fits:
        rows = cache.as_strided((b * kvh * cap, d), (d, 1))
        flat = ((bi * kvh + kv_of_head[None, :, None]) * cap + idx).reshape(-1)
        return rows.index_select(0, flat).view(*idx.shape, d).float()
    return cache[bi, kv_of_head[None, :, None], idx].float()


if triton is not None:
    @triton.jit
    def _head_query(q_ptr, sq_b, sq_h, H, GROUP, D, BLOCK_D: tl.constexpr):
        """This program's (batch, head), the kv head it reads, and its query in fp32."""
        pid = tl.program_id(0)
        bi = pid // H
        hi = pid % H
        offs_d = tl.arange(0, BLOCK_D)
        dmask = offs_d < D
        q = tl.load(q_ptr + bi * sq_b + hi * sq_h + offs_d, mask=dmask, other=0.0).to(tl.float32)
        return bi, hi, hi // GROUP, offs_d, dmask, q

    @triton.jit
    def _gather_attention_kernel(q_ptr, k_ptr, v_ptr, idx_ptr, out_ptr, scale,
                                 H, GROUP, K, D,
                                 sq_b, sq_h, sk_b, sk_h, sk_n, sv_b, sv_h, sv_n, si_b, si_h, so_b, so_h,
                                 BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
        bi, hi, kv, offs_d, dmask, q = _head_query(q_ptr, sq_b, sq_h, H, GROUP, D, BLOCK_D)
        m_i = tl.full((1,), float("-inf"), tl.float32)
        l_i = tl.zeros((1,), tl.float32)
        acc = tl.zeros((BLOCK_D,), tl.float32)
        for start in range(0, K, BLOCK_K):
            offs_k = start + tl.arange(0, BLOCK_K)
            idx = tl.load(idx_ptr + bi * si_b + hi * si_h + offs_k, mask=offs_k < K, other=-1)
            valid = idx >= 0
            safe = tl.where(valid, idx, 0)
            kblk = tl.load(k_ptr + bi * sk_b + kv * sk_h + safe[:, None] * sk_n + offs_d[None, :],
                           mask=valid[:, None] & dmask[None, :], other=0.0).to(tl.float32)
            s = tl.sum(kblk * q[None, :], axis=1) * scale
            s = tl.where(valid, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=0))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp(s - m_safe)
            alpha = tl.exp(m_i - m_safe)
            vblk = tl.load(v_ptr + bi * sv_b + kv * sv_h + safe[:, None] * sv_n + offs_d[None, :],
                           mask=valid[:, None] & dmask[None, :], other=0.0).to(tl.float32)
            acc = acc * alpha + tl.sum(p[:, None] * vblk, axis=0)
            l_i = l_i * alpha + tl.sum(p, axis=0)
            m_i = m_new
        out = acc / l_i
        tl.store(out_ptr + bi * so_b + hi * so_h + offs_d, out, mask=dmask)

    @triton.jit
    def _token_scores_kernel(q_ptr, k_ptr, out_ptr, H, GROUP, N, D,
                             sq_b, sq_h, sk_b, sk_h, sk_n, so_b, so_h,
                             BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
        bi, hi, kv, offs_d, dmask, q = _head_query(q_ptr, sq_b, sq_h, H, GROUP, D, BLOCK_D)
        offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = offs_n < N
        k = tl.load(k_ptr + bi * sk_b + kv * sk_h + offs_n[:, None] * sk_n + offs_d[None, :],
                    mask=nmask[:, None] & dmask[None, :], other=0.0).to(tl.float32)
        tl.store(out_ptr + bi * so_b + hi * so_h + offs_n, tl.sum(k * q[None, :], axis=1), mask=nmask)

    @triton.jit
    def _quest_page_kernel(q_ptr, max_ptr, min_ptr, out_ptr, H, GROUP, P, D,
                           sq_b, sq_h, sm_b, sm_h, sm_p, so_b, so_h,
                           BLOCK_P: tl.constexpr, BLOCK_D: tl.constexpr):
        bi, hi, kv, offs_d, dmask, q = _head_query(q_ptr, sq_b, sq_h, H, GROUP, D, BLOCK_D)
        offs_p = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
        pmask = offs_p < P
        off = bi * sm_b + kv * sm_h + offs_p[:, None] * sm_p + offs_d[None, :]
        m = pmask[:, None] & dmask[None, :]
        hi_k = tl.load(max_ptr + off, mask=m, other=0.0).to(tl.float32)
        lo_k = tl.load(min_ptr + off, mask=m, other=0.0).to(tl.float32)
        est = tl.maximum(hi_k * q[None, :], lo_k * q[None, :])
        tl.store(out_ptr + bi * so_b + hi * so_h + offs_p, tl.sum(est, axis=1), mask=pmask)


def gather_attention(query, keys, values, indices, scale: float):
    """Sparse decode attention over ``indices`` (see :func:`gather_attention_reference`)."""
    if not use_triton(query):
        return gather_attention_reference(query, keys, values, indices, scale)
    b, h, d = query.shape
    k = indices.shape[-1]
    out = torch.empty(b, h, d, device=query.device, dtype=torch.float32)
    idx = indices.to(torch.int32).contiguous()
    _gather_attention_kernel[(b * h,)](
        query, keys, values, idx, out, float(scale), h, h // keys.shape[1], k, d,
        query.stride(0), query.stride(1), keys.stride(0), keys.stride(1), keys.stride(2),
        values.stride(0), values.stride(1), values.stride(2), idx.stride(0), idx.stride(1),
        out.stride(0), out.stride(1), BLOCK_K=min(64, triton.next_power_of_2(k)), BLOCK_D=triton.next_power_of_2(d))
    return out


def token_scores_reference(query, keys):
    """``query[b, h, d]`` . ``keys[b, kvh, n, d]`` -> ``[b, h, n]`` fp32 (GQA grouping)."""
    b, h, d = query.shape
    kvh = keys.shape[1]
    q = query.float().view(b, kvh, h // kvh, d)  # query heads grouped by the kv head they read
    return torch.matmul(q, keys.float().transpose(-1, -2)).view(b, h, -1)


def token_scores(query, keys):
    if not use_triton(query):
        return token_scores_reference(query, keys)
    b, h, d = query.shape
    n = keys.shape[2]
    out = torch.empty(b, h, n, device=query.device, dtype=torch.float32)
    block = min(128, triton.next_power_of_2(n))
    _token_scores_kernel[(b * h, triton.cdiv(n, block))](
        query, keys, out, h, h // keys.shape[1], n, d, query.stride(0), query.stride(1),
        keys.stride(0), keys.stride(1), keys.stride(2), out.stride(0), out.stride(1),
        BLOCK_N=block, BLOCK_D=triton.next_power_of_2(d))
    return out


def quest_page_scores_reference(query, page_max, page_min):
    """``query[b, h, d]``, ``page_max/page_min[b, kvh, P, d]`` -> ``[b, h, P]`` fp32."""
    b, h, d = query.shape
    kvh = page_max.shape[1]
    q = query.float().view(b, kvh, h // kvh, 1, d)
    hi, lo = page_max.float()[:, :, None], page_min.float()[:, :, None]
    return torch.maximum(q * hi, q * lo).sum(-1).view(b, h, -1)


def quest_page_scores(query, page_max, page_min):
    if not use_triton(query):
        return quest_page_scores_reference(query, page_max, page_min)
    b, h, d = query.shape
    p = page_max.shape[2]
    out = torch.empty(b, h, p, device=query.device, dtype=torch.float32)
    block = min(64, triton.next_power_of_2(p))
    page_max, page_min = page_max.contiguous(), page_min.contiguous()
    _quest_page_kernel[(b * h, triton.cdiv(p, block))](
        query, page_max, page_min, out, h, h // page_max.shape[1], p, d, query.stride(0), query.stride(1),
        page_max.stride(0), page_max.stride(1), page_max.stride(2), out.stride(0), out.stride(1),
        BLOCK_P=block, BLOCK_D=triton.next_power_of_2(d))
    return out
