"""Stage ``asyncspade.kernel_bench`` (rule ``asyncspade_kernels``, GPU-tagged): the three sparse-decoding
kernels against their torch references, and on CUDA their speed and bandwidth share.

- check (every device): small shapes covering GQA grouping, bf16/fp16/fp32, head sizes that are not
  a power of two and empty index slots; on the CPU the kernels run under Triton's interpreter;
- timing (CUDA only, ``core.kernelbench``): Qwen3-8B's attention geometry (32 query heads, 8 KV
  heads, head size 128, bf16) at 8K and 32K cached tokens, batch 1 and 8, AsyncSpade's budget of
  2048 tokens: gather attention over the budget, token scoring over the whole cache, Quest's page
  estimate over 16-token pages.

Run also by ``workflow/scripts/gpu_benchmark_asyncspade.py`` (the same cases).
"""

from __future__ import annotations

import torch

from icmlrepro.core.kernelbench import Case, prepare_interpreter, print_result, run_cases, stage

# b, heads, kv_heads, n (cached tokens), d, k (selected), dtype
CHECK_SHAPES = [
    (2, 4, 2, 50, 32, 7, "float32"),
    (1, 8, 2, 300, 64, 100, "bfloat16"),
    (3, 2, 1, 17, 16, 17, "float16"),
    (1, 4, 4, 129, 24, 65, "float32"),  # head dim not a power of two, multi-head (no grouping)
]
TIMING_SHAPES = [(b, 32, 8, n, 128, 2048, "bfloat16") for n in (8192, 32768) for b in (1, 8)]
TOLERANCE = {"gather_attention": 1e-4, "token_scores": 1e-3, "quest_page_scores": 1e-3}


def _max_abs(a, r) -> float:
    return float((a.float() - r.float()).abs().max())


def cases(shape, device: str) -> list[Case]:
    """The three kernels on random inputs of ``shape`` (seeded by the shape), on ``device``."""
    from . import kernels as K
    from .selectors import page_bounds

    b, h, kvh, n, d, k, dtype = shape
    dt = getattr(torch, dtype)
    size = dt.itemsize
    g = torch.Generator().manual_seed(n * 31 + b)
    q = torch.randn(b, h, d, generator=g).to(device, dt)
    keys = torch.randn(b, kvh, n, d, generator=g).to(device, dt)
    values = torch.randn(b, kvh, n, d, generator=g).to(device, dt)
    idx = torch.stack([torch.randperm(n, generator=g)[:k] for _ in range(b * h)]).view(b, h, k).to(device)
    idx[..., -2:] = -1  # empty slots are skipped
    kmax, kmin, _ = page_bounds(keys, 16)
    kmax, kmin = kmax.to(dt), kmin.to(dt)
    pages = kmax.shape[2]
    name = label(shape)
    scale = d ** -0.5
    return [
        Case("gather_attention", name, lambda: K.gather_attention(q, keys, values, idx, scale),
             lambda: K.gather_attention_reference(q, keys, values, idx, scale), _max_abs,
             TOLERANCE["gather_attention"],
             b * h * d * size + 2 * b * h * k * d * size + b * h * k * 4 + b * h * d * 4),
        Case("token_scores", name, lambda: K.token_scores(q, keys), lambda: K.token_scores_reference(q, keys),
             _max_abs, TOLERANCE["token_scores"], b * h * d * size + b * kvh * n * d * size + b * h * n * 4),
        Case("quest_page_scores", name, lambda: K.quest_page_scores(q, kmax, kmin),
             lambda: K.quest_page_scores_reference(q, kmax, kmin), _max_abs, TOLERANCE["quest_page_scores"],
             b * h * d * size + 2 * b * kvh * pages * d * size + b * h * pages * 4),
    ]


def label(shape) -> str:
    b, _, _, n, _, k, dtype = shape
    return f"b{b}_n{n}_k{k}_{dtype}"


def bench(device: str, timing_shapes=TIMING_SHAPES) -> dict:
    """Checks on every device; timings built and run on CUDA only (listed as NaN rows elsewhere)."""
    prepare_interpreter(device)  # before the kernels' module is imported
    return run_cases([c for s in CHECK_SHAPES for c in cases(s, device)],
                     lambda: [c for s in timing_shapes for c in cases(s, device)],
                     [(kernel, label(s)) for s in timing_shapes for kernel in TOLERANCE], device)


def run(job) -> None:
    stage(job, bench)


if __name__ == "__main__":  # the tests' CPU branch: TRITON_INTERPRET=1 python -m ...kernel_bench
    print_result(bench)
