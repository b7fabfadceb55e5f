"""OnlineSPEC's verification kernel on a CUDA GPU in one command (about a minute).

    .venv/bin/python workflow/scripts/gpu_benchmark_onlinespec.py [--out results/gpu_benchmark/onlinespec]

1. Correctness: the Triton verification kernel against the torch reference (``kernel_check``) on CUDA.
2. Speed (``triton.testing.do_bench``): kernel vs reference for Qwen3's vocabulary (151,936 tokens),
   4-8 drafted tokens and batches of 1-64 sequences.

Writes ``verify_check.json`` and ``verify_speed.json`` under ``--out``. Exits with code 2 without CUDA.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from icmlrepro.core.device import benchmark_dir


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="results/gpu_benchmark/onlinespec")
    args = ap.parse_args()
    out = benchmark_dir(args.out)
    if out is None:
        return 2
    import triton.testing

    from icmlrepro.papers.onlinespec.kernel_check import SHAPES, compare
    from icmlrepro.papers.onlinespec.verify import verify, verify_reference

    checks = [compare(s, "cuda") for s in SHAPES]
    (out / "verify_check.json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "checks": checks}))
    print(json.dumps(checks), flush=True)
    rows = []
    v = 151936
    for b in (1, 8, 64):
        for g in (4, 8):
            p = torch.softmax(torch.randn(b, g + 1, v, device="cuda"), -1)
            q = torch.softmax(torch.randn(b, g, v, device="cuda"), -1)
            toks = torch.randint(0, v, (b, g), device="cuda")
            ua, us = torch.rand(b, g, device="cuda"), torch.rand(b, device="cuda")
            rows.append({"batch": b, "gamma": g, "vocab": v,
                         "kernel_ms": triton.testing.do_bench(lambda: verify(p, q, toks, ua, us)),
                         "torch_ms": triton.testing.do_bench(lambda: verify_reference(p, q, toks, ua, us))})
            print(json.dumps(rows[-1]), flush=True)
    (out / "verify_speed.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
