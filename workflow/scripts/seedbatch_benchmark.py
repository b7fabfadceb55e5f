"""CPU seconds per seed: K seeds trained one after another vs as one batched model (core.seedbatch).

A benchmark, not a test (issue 42: goal >= 3x cheaper per seed at K = 8 for models under 1M parameters).
Run: .venv/bin/python workflow/scripts/seedbatch_benchmark.py [--k 8] [--threads 1] [--steps 300]
Prints one JSON line per model size.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from icmlrepro.core.seedbatch import SeedBatch, init_seed, per_seed_batches
from icmlrepro.core.seeding import derive_seed


def mlp(d_in: int, width: int, depth: int, d_out: int) -> nn.Module:
    layers, d = [], d_in
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    return nn.Sequential(*layers, nn.Linear(d, d_out))


def run(width: int, depth: int, k: int, steps: int, batch: int) -> dict:
    d_in, d_out, n = 64, 10, 2048
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, d_in, generator=g), torch.randint(0, d_out, (n,), generator=g)
    seeds = list(range(k))
    make = lambda: mlp(d_in, width, depth, d_out)  # noqa: E731
    n_params = sum(p.numel() for p in make().parameters())

    t0 = time.process_time()
    for seed in seeds:
        torch.manual_seed(init_seed(seed, "bench"))
        model = make()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        gen = np.random.default_rng(derive_seed(seed, "bench"))
        for _ in range(steps):
            idx = torch.as_tensor(gen.choice(n, size=batch, replace=False))
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    alone = time.process_time() - t0

    t0 = time.process_time()
    stacked = SeedBatch(make, seeds, "bench")
    opt = torch.optim.AdamW(stacked.parameters(), lr=1e-3)
    idx = per_seed_batches(n, batch, [np.random.default_rng(derive_seed(s, "bench")) for s in seeds], steps)
    for step in range(steps):
        logits = stacked(x[idx[step]])
        losses = F.cross_entropy(logits.reshape(-1, d_out), y[idx[step]].reshape(-1), reduction="none")
        opt.zero_grad()
        stacked.loss(losses.view(k, -1).mean(1)).backward()
        opt.step()
    batched = time.process_time() - t0
    return {"params": n_params, "k": k, "steps": steps, "batch": batch, "threads": torch.get_num_threads(),
            "cpu_s_per_seed_alone": round(alone / k, 3), "cpu_s_per_seed_batched": round(batched / k, 3),
            "speedup": round(alone / batched, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for width, depth in ((64, 2), (256, 2), (512, 3)):
        print(json.dumps({"model": f"mlp w{width} d{depth}", **run(width, depth, a.k, a.steps, a.batch)}))


if __name__ == "__main__":
    main()
