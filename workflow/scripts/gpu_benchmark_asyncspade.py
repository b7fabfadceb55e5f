"""AsyncSpade on a CUDA GPU in one command (about 5 minutes on an A100/H100): kernels and TPOT.

    .venv/bin/python workflow/scripts/gpu_benchmark_asyncspade.py [--out results/gpu_benchmark/asyncspade]
                                                                  [--quick]

1. Correctness: every Triton kernel against its torch reference (``kernel_check``) on CUDA.
2. Kernel speed (``triton.testing.do_bench``): gather attention over a budget vs dense SDPA over the
   whole context, token scoring vs the torch reference, Quest's page estimate, at long contexts.
3. TPOT side by side (the pipeline's own ``asyncspade.tpot`` stage code): full, Quest, oracle top-k,
   AsyncSpade and the ideal sparse forward on a bf16 model of Qwen3-1.7B-like attention geometry at
   8K-32K contexts and batches 1-16.

Writes ``kernels.json``, ``kernel_speed.json`` and ``tpot.parquet`` + ``tpot_summary.csv`` under
``--out``. Exits with a message (code 2) on a machine without CUDA: the CPU path is the pipeline's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from icmlrepro.core.device import benchmark_dir


def kernel_speed(quick: bool) -> list[dict]:
    import triton.testing

    from icmlrepro.papers.asyncspade import kernels as K
    from icmlrepro.papers.asyncspade.selectors import page_bounds

    rows = []
    for n in ([8192] if quick else [8192, 32768]):
        for b in ([8] if quick else [1, 8, 32]):
            h, kvh, d, k = 32, 8, 128, 2048
            q = torch.randn(b, h, d, device="cuda", dtype=torch.bfloat16)
            keys = torch.randn(b, kvh, n, d, device="cuda", dtype=torch.bfloat16)
            vals = torch.randn_like(keys)
            idx = torch.stack([torch.randperm(n, device="cuda")[:k] for _ in range(b * h)]).view(b, h, k)
            kmax, kmin, _ = page_bounds(keys, 16)
            kmax, kmin = kmax.bfloat16(), kmin.bfloat16()
            dense = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
                q[:, :, None], keys, vals, enable_gqa=True)
            timings = {
                "dense_sdpa_ms": triton.testing.do_bench(dense),
                "gather_attention_triton_ms": triton.testing.do_bench(lambda: K.gather_attention(q, keys, vals, idx, d ** -0.5)),
                "gather_attention_torch_ms": triton.testing.do_bench(
                    lambda: K.gather_attention_reference(q, keys, vals, idx, d ** -0.5)),
                "token_scores_triton_ms": triton.testing.do_bench(lambda: K.token_scores(q, keys)),
                "token_scores_torch_ms": triton.testing.do_bench(lambda: K.token_scores_reference(q, keys)),
                "quest_pages_triton_ms": triton.testing.do_bench(lambda: K.quest_page_scores(q, kmax, kmin)),
                "quest_pages_torch_ms": triton.testing.do_bench(lambda: K.quest_page_scores_reference(q, kmax, kmin)),
            }
            rows.append({"context": n, "batch": b, "heads": h, "kv_heads": kvh, "head_dim": d, "budget": k, **timings})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def tpot_sweep(out: Path, quick: bool) -> None:
    from icmlrepro.core.io import read_parquet
    from icmlrepro.papers.asyncspade import tpot

    settings = {
        "seeds": [0], "window": 16, "order": 2, "ridge_lambda": 1e-3, "dense_layers": 2, "min_pages": 3,
        "tpot": {"size": {"hidden": 2048, "intermediate": 6144, "layers": 8, "heads": 16, "kv_heads": 8,
                          "max_positions": 40960},
                 "vocab": 32000, "contexts": [8192] if quick else [8192, 16384, 32768],
                 "batches": [4] if quick else [1, 4, 16], "budget": 2048, "page_size": 16,
                 "steps": 32 if quick else 64, "warmup": 8, "repeats": 2 if quick else 3, "threads": 4,
                 "prefill_chunk": 4096},
    }
    job = SimpleNamespace(params=settings, output=SimpleNamespace(table=str(out / "tpot.parquet")))
    tpot.run(job)
    df = read_parquet(out / "tpot.parquet")
    summary = df.groupby(["context", "batch", "method"]).tpot_ms.mean().unstack("method")
    summary.to_csv(out / "tpot_summary.csv")
    print(summary.round(3).to_string(), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="results/gpu_benchmark/asyncspade")
    ap.add_argument("--quick", action="store_true", help="one workload per part (about a minute)")
    args = ap.parse_args()
    out = benchmark_dir(args.out)
    if out is None:
        return 2
    from icmlrepro.papers.asyncspade.kernel_check import SHAPES, compare

    t0 = time.time()
    checks = [compare(s, "cuda") for s in SHAPES]
    (out / "kernels.json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "checks": checks}, indent=1))
    print(json.dumps(checks), flush=True)
    (out / "kernel_speed.json").write_text(json.dumps(kernel_speed(args.quick), indent=1))
    tpot_sweep(out, args.quick)
    print(f"done in {time.time() - t0:.0f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
