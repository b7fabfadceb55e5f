"""Stage ``onlinespec.kernel_bench`` (rule ``onlinespec_kernels``, GPU-tagged): the exact-verification
kernel against its torch reference, and on CUDA its speed and bandwidth share (``core.kernelbench``).

- check (every device): random target/draft distributions, one row where draft = target (every
  token accepted), 8 uniform draws per shape, the same uniforms for kernel and reference; the error
  is the number of differing (accepted count, next token) outputs, which must be 0;
- timing (CUDA only): Qwen3's vocabulary (151,936 tokens), 4 and 8 drafted tokens, batches of 1, 8
  and 64 sequences. The kernel's minimal traffic is one target and one draft row of the vocabulary
  per sequence (the residual it samples from); the drafted tokens' probabilities are negligible.

Run also by ``workflow/scripts/gpu_benchmark_onlinespec.py`` (the same cases).
"""

from __future__ import annotations

import torch

from icmlrepro.core.kernelbench import Case, prepare_interpreter, print_result, run_cases, stage

CHECK_SHAPES = [(3, 4, 7), (2, 1, 50), (5, 6, 1500), (4, 3, 2)]  # batch, drafted tokens, vocabulary
TIMING_SHAPES = [(b, g, 151936) for b in (1, 8, 64) for g in (4, 8)]
DRAWS = 8  # uniform draws per check shape (the interpreter runs each draw's kernel in Python)


def label(shape) -> str:
    b, g, v = shape
    return f"b{b}_g{g}_v{v}"


def case(shape, device: str, draws: int) -> Case:
    from .verify import verify, verify_reference

    b, g, v = shape
    gen = torch.Generator().manual_seed(v + 7 * b + g)
    p = torch.softmax(2 * torch.randn(b, g + 1, v, generator=gen), -1)
    q = torch.softmax(2 * torch.randn(b, g, v, generator=gen), -1)
    q[0] = p[0, :g]  # a row where draft and target agree exactly: every token accepted
    toks = torch.multinomial(q.view(-1, v), 1, generator=gen).view(b, g)
    uniforms = [(torch.rand(b, g, generator=gen), torch.rand(b, generator=gen)) for _ in range(draws)]
    p, q, toks = p.to(device), q.to(device), toks.to(device)
    uniforms = [(ua.to(device), us.to(device)) for ua, us in uniforms]

    def many(fn):
        return lambda: [fn(p, q, toks, ua, us) for ua, us in uniforms]

    def mismatches(out, ref) -> float:
        return float(sum(int((a.cpu() != b.cpu()).sum()) for pair, rpair in zip(out, ref) for a, b in zip(pair, rpair)))

    return Case("verify", label(shape), many(verify), many(verify_reference), mismatches, 0.0,
                draws * b * 2 * v * p.element_size())


def bench(device: str, timing_shapes=TIMING_SHAPES) -> dict:
    """Checks on every device; timings (one draw per call) built and run on CUDA only."""
    prepare_interpreter(device)  # before the verification kernel's module is imported
    return run_cases([case(s, device, DRAWS) for s in CHECK_SHAPES],
                     lambda: [case(s, device, 1) for s in timing_shapes],
                     [("verify", label(s)) for s in timing_shapes], device)


def run(job) -> None:
    stage(job, bench)


if __name__ == "__main__":  # the tests' CPU branch: TRITON_INTERPRET=1 python -m ...kernel_bench
    print_result(bench)
