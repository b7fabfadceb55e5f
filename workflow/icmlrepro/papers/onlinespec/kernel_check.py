"""The verification kernel against its torch reference on random inputs (same uniforms for both).

Run as ``TRITON_INTERPRET=1 python -m icmlrepro.papers.onlinespec.kernel_check`` on CPU (Triton reads
the variable at import, so the tests use a fresh process) or on CUDA. Prints one JSON list.
"""

from __future__ import annotations

import json

import torch

from icmlrepro.core.device import use_triton

from .verify import verify, verify_reference

SHAPES = [(3, 4, 7), (2, 1, 50), (5, 6, 1500), (4, 3, 2)]  # batch, drafted tokens, vocabulary


def compare(shape, device: str = "cpu", draws: int = 20) -> dict:
    b, g, v = shape
    gen = torch.Generator().manual_seed(v)
    p = torch.softmax(2 * torch.randn(b, g + 1, v, generator=gen), -1)
    q = torch.softmax(2 * torch.randn(b, g, v, generator=gen), -1)
    q[0] = p[0, :g]  # a row where draft and target agree exactly: every token accepted
    toks = torch.multinomial(q.view(-1, v), 1, generator=gen).view(b, g)
    mismatches = 0
    for _ in range(draws):
        ua, us = torch.rand(b, g, generator=gen), torch.rand(b, generator=gen)
        args = [t.to(device) for t in (p, q, toks, ua, us)]
        n, nxt = verify(*args)
        rn, rnxt = verify_reference(*args)
        mismatches += int((n.cpu() != rn.cpu()).sum() + (nxt.cpu() != rnxt.cpu()).sum())
    return {"shape": list(shape), "kernel_used": use_triton(p.to(device)), "mismatches": mismatches}


if __name__ == "__main__":
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    print(json.dumps([compare(s, dev) for s in SHAPES]))
