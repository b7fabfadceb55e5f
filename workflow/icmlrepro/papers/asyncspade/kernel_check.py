"""The kernels against their torch references on random inputs: max abs error per kernel and shape.

Run as ``TRITON_INTERPRET=1 python -m icmlrepro.papers.asyncspade.kernel_check`` on CPU (the tests
do: Triton reads the variable when it is imported, so it needs a fresh process), or on a CUDA
machine as part of the GPU benchmark. Prints one JSON list.
"""

from __future__ import annotations

import json

import torch

from icmlrepro.core.device import use_triton

from . import kernels
from .selectors import page_bounds

# b, heads, kv_heads, n (cached tokens), d, k (selected), dtype
SHAPES = [
    (2, 4, 2, 50, 32, 7, "float32"),
    (1, 8, 2, 300, 64, 100, "bfloat16"),
    (3, 2, 1, 17, 16, 17, "float16"),
    (1, 4, 4, 129, 24, 65, "float32"),  # head dim not a power of two, multi-head (no grouping)
]


def compare(shape, device: str = "cpu") -> dict:
    b, h, kvh, n, d, k, dtype = shape
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(n)
    q = torch.randn(b, h, d, generator=g).to(device, dt)
    keys = torch.randn(b, kvh, n, d, generator=g).to(device, dt)
    values = torch.randn(b, kvh, n, d, generator=g).to(device, dt)
    idx = torch.randint(0, n, (b, h, k), generator=g).to(device)
    idx[..., -2:] = -1  # empty slots are skipped
    kmax, kmin, _ = page_bounds(keys, 16)
    kmax, kmin = kmax.to(dt), kmin.to(dt)

    def err(a, r):
        return float((a.float() - r.float()).abs().max())

    return {
        "shape": list(shape),
        "kernels_used": use_triton(q),
        "gather_attention": err(kernels.gather_attention(q, keys, values, idx, 0.125),
                                kernels.gather_attention_reference(q, keys, values, idx, 0.125)),
        "token_scores": err(kernels.token_scores(q, keys), kernels.token_scores_reference(q, keys)),
        "quest_page_scores": err(kernels.quest_page_scores(q, kmax, kmin),
                                 kernels.quest_page_scores_reference(q, kmax, kmin)),
    }


if __name__ == "__main__":
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    print(json.dumps([compare(s, dev) for s in SHAPES]))
