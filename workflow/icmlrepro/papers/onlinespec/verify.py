"""Exact verification of a block of drafted tokens (speculative sampling), Triton kernel + torch reference.

For drafted tokens x_1..x_g with draft distributions q_i and target distributions p_1..p_{g+1}:
token i is accepted while u_i < min(1, p_i(x_i) / q_i(x_i)); at the first rejection n the next token is
drawn from the residual norm(max(0, p_{n+1} - q_{n+1})), or from p_{g+1} when all g are accepted.
This makes the emitted tokens distributed exactly as the target's own samples (Leviathan et al.,
Chen et al.). Both functions take the uniforms as inputs, so kernel and reference make the same draws.
Greedy verification (accept while x_i = argmax p_i) is :func:`verify_greedy`.
"""

from __future__ import annotations

import torch

from icmlrepro.core.device import use_triton

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None


def verify_reference(p, q, tokens, u_accept, u_sample):
    """``p[b, g+1, V]``, ``q[b, g, V]`` (probabilities), ``tokens[b, g]``, ``u_accept[b, g]``,
    ``u_sample[b]`` -> (accepted count ``[b]``, next token ``[b]``)."""
    b, g = tokens.shape
    p, q = p.float(), q.float()
    pt = p[:, :g].gather(-1, tokens[..., None])[..., 0]
    qt = q.gather(-1, tokens[..., None])[..., 0]
    ok = u_accept < torch.clamp(pt / qt.clamp(min=1e-30), max=1.0)
    n = torch.where(ok.all(-1), g, (~ok).float().argmax(-1))                    # first rejection
    rows = torch.arange(b, device=p.device)
    resid = torch.where((n < g)[:, None], (p[rows, n.clamp(max=g - 1)] - q[rows, n.clamp(max=g - 1)]).clamp(min=0),
                        p[rows, g])
    resid = torch.where((resid.sum(-1, keepdim=True) > 0), resid, p[rows, n])  # p == q exactly: sample p
    cdf = resid.cumsum(-1)
    nxt = torch.searchsorted(cdf, (u_sample * cdf[:, -1])[:, None], right=True)[:, 0]
    return n, nxt.clamp(max=p.shape[-1] - 1)


def verify_greedy(p_logits, tokens):
    """Greedy verification: accepted count and the target's token after the accepted prefix."""
    best = p_logits.argmax(-1)                                                    # [b, g+1]
    g = tokens.shape[1]
    ok = best[:, :g] == tokens
    n = torch.where(ok.all(-1), g, (~ok).float().argmax(-1))
    return n, best.gather(-1, n[:, None])[:, 0]


if triton is not None:
    @triton.jit
    def _verify_kernel(p_ptr, q_ptr, tok_ptr, ua_ptr, us_ptr, n_ptr, next_ptr, G, V,
                       sp_b, sp_g, sq_b, sq_g, st_b, su_b, BLOCK_V: tl.constexpr):
        b = tl.program_id(0)
        n = G
        for i in range(0, G):
            tok = tl.load(tok_ptr + b * st_b + i)
            pi = tl.load(p_ptr + b * sp_b + i * sp_g + tok).to(tl.float32)
            qi = tl.load(q_ptr + b * sq_b + i * sq_g + tok).to(tl.float32)
            u = tl.load(ua_ptr + b * su_b + i)
            ratio = tl.minimum(pi / tl.maximum(qi, 1e-30), 1.0)
            rejected = (u >= ratio) & (n == G)
            n = tl.where(rejected, i, n)
        has_q = n < G
        nq = tl.minimum(n, G - 1)
        offs = tl.arange(0, BLOCK_V)
        total = tl.zeros((1,), tl.float32)
        ptotal = tl.zeros((1,), tl.float32)
        for start in range(0, V, BLOCK_V):
            m = start + offs < V
            pv = tl.load(p_ptr + b * sp_b + n * sp_g + start + offs, mask=m, other=0.0).to(tl.float32)
            qv = tl.load(q_ptr + b * sq_b + nq * sq_g + start + offs, mask=m, other=0.0).to(tl.float32)
            r = tl.where(has_q, tl.maximum(pv - qv, 0.0), pv)
            total += tl.sum(r, axis=0)
            ptotal += tl.sum(pv, axis=0)
        use_p = total <= 0.0  # p == q exactly: the residual is empty, sample p
        norm = tl.where(use_p, ptotal, total)
        target = tl.load(us_ptr + b) * norm
        running = tl.zeros((1,), tl.float32)
        pick = tl.full((1,), V - 1, tl.int32)
        for start in range(0, V, BLOCK_V):
            m = start + offs < V
            pv = tl.load(p_ptr + b * sp_b + n * sp_g + start + offs, mask=m, other=0.0).to(tl.float32)
            qv = tl.load(q_ptr + b * sq_b + nq * sq_g + start + offs, mask=m, other=0.0).to(tl.float32)
            r = tl.where(has_q & ~use_p, tl.maximum(pv - qv, 0.0), pv)
            c = running + tl.cumsum(r, axis=0)
            cand = tl.where((c > target) & m, start + offs, V - 1)
            pick = tl.minimum(pick, tl.min(cand, axis=0))
            running += tl.sum(r, axis=0)
        tl.store(n_ptr + b + tl.arange(0, 1), tl.full((1,), 0, tl.int32) + n)
        tl.store(next_ptr + b + tl.arange(0, 1), pick)


def verify(p, q, tokens, u_accept, u_sample):
    """Exact verification (see :func:`verify_reference`); the Triton kernel on CUDA / interpreter."""
    if not use_triton(p):
        return verify_reference(p, q, tokens, u_accept, u_sample)
    b, g = tokens.shape
    v = p.shape[-1]
    p, q = p.contiguous(), q.contiguous()
    tokens = tokens.to(torch.int32).contiguous()
    u_accept = u_accept.float().contiguous()
    n = torch.empty(b, dtype=torch.int32, device=p.device)
    nxt = torch.empty(b, dtype=torch.int32, device=p.device)
    _verify_kernel[(b,)](p, q, tokens, u_accept, u_sample.float().contiguous(), n, nxt, g, v,
                         p.stride(0), p.stride(1), q.stride(0), q.stride(1), tokens.stride(0), u_accept.stride(0),
                         BLOCK_V=min(1024, triton.next_power_of_2(v)))
    return n.long(), nxt.long()
