"""Stage ``asyncspade.tpot``: time per output token of every method side by side, per workload.

One process, one model, one prefilled KV cache per (context length, batch); each repetition runs
every method in a rotated order on the same cache (cropped back to the prompt between runs), so
that drift of the machine hits all methods alike. TPOT = median step time after a warm-up. Methods:
full attention, Quest, oracle token top-k (synchronous token selection), AsyncSpade (asynchronous
worker) and ``ideal`` (the same sparse forward with the indices given for free: the theoretical
optimum AsyncSpade claims to reach).

Timing depends on the model's geometry (layers, heads, head size, context, batch), not on its
weights, so the model here is a randomly initialised Qwen3 of the ``tpot.size`` block, built in
place on the job's device (bf16 on CUDA): at paper scale Qwen3-8B's geometry, at miniature scale one
whose attention reads dominate a decode step the way they do for an 8B model at long context.
Workloads whose weights and KV cache do not fit ``tpot.memory_gb`` are skipped (``memory.py``).
Step, wait and predictor times are device times (CUDA events on GPU, ``core.timer``). The main loop
and the selection worker get ``threads`` CPU threads each (on CPU the worker's core is the
disaggregated selection device).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from icmlrepro.core.device import torch_device
from icmlrepro.core.io import write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.core.timer import Timings
from icmlrepro.lm.decode import preallocated_cache, tpot

from .accuracy import selector_options
from .decoding import SparseAttention
from .memory import claim_workload, fitting_workloads

METHODS = ("full", "quest", "oracle", "asyncspade", "ideal")
log = logging.getLogger("icmlrepro.asyncspade")


def proxy_config(size: dict, vocab: int) -> Qwen3Config:
    return Qwen3Config(vocab_size=vocab, hidden_size=size["hidden"], intermediate_size=size["intermediate"],
                       num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
                       num_key_value_heads=size["kv_heads"], head_dim=size["hidden"] // size["heads"],
                       max_position_embeddings=size["max_positions"], attn_implementation="sdpa")


def proxy_model(size: dict, vocab: int, seed: int, device: str, dtype: torch.dtype) -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3 built directly on ``device`` in ``dtype``: at paper scale (Qwen3-8B
    geometry, 16.4 GB in bf16) no fp32 host copy ever exists."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3ForCausalLM._from_config(proxy_config(size, vocab), dtype=dtype)
    return model.eval()


@torch.no_grad()
def prefill(model, ids: torch.Tensor, chunk: int, capacity: int):
    """KV cache of ``ids`` built chunk by chunk (bounded memory: only the last position's logits are
    computed), and the first generated token."""
    cache = preallocated_cache(model, capacity)
    for start in range(0, ids.shape[1], chunk):
        logits = model(input_ids=ids[:, start: start + chunk], past_key_values=cache, use_cache=True,
                       logits_to_keep=1).logits
    return cache, logits[:, -1].argmax(-1)


@torch.no_grad()
def decode_steps(model, cache, first: torch.Tensor, start: int, steps: int, device: str) -> list[float]:
    """Greedy decode ``steps`` tokens after position ``start``; seconds per step, timed on the device
    (CUDA events on the decode stream; the host is never synchronised inside the loop)."""
    nxt = first
    pos = torch.full((first.shape[0], 1), start, device=first.device)
    timings = Timings(device)
    for i in range(steps):
        with timings.region("step"):
            logits = model(input_ids=nxt[:, None], position_ids=pos + i, past_key_values=cache, use_cache=True,
                           logits_to_keep=1).logits
            nxt = logits[:, -1].argmax(-1)
    return timings.seconds("step")


def run(job) -> None:
    p = job.params
    t = p["tpot"]
    seed = p["seeds"][0]
    seed_everything(seed)
    torch.set_num_threads(t["threads"])
    device = torch_device()
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    workloads, skipped = fitting_workloads(t, 2 if device == "cuda" else 4)
    for w in skipped:
        log.info("skipped workload context %d, batch %d: %s", *w)
    claim_workload(t, workloads)  # the pre-declared workload must be run
    model = proxy_model(t["size"], t["vocab"], derive_seed(seed, "asyncspade", "tpot-model"), device, dtype)
    opts = selector_options(p, t["page_size"])
    rows = []
    for context, batch in workloads:
        g = torch.Generator().manual_seed(derive_seed(seed, "asyncspade", "tpot", context, batch))
        ids = torch.randint(0, t["vocab"], (batch, context), generator=g).to(device)
        cache, first = prefill(model, ids, t["prefill_chunk"], context + t["warmup"] + t["steps"])
        for rep in range(t["repeats"]):
            k = rep % len(METHODS)
            for method in METHODS[k:] + METHODS[:k]:
                cache.crop(context - cache.get_seq_length())  # back to the prompt
                with SparseAttention(model, method, t["budget"], asynchronous=True,
                                     worker_threads=t["threads"], **opts) as sa:
                    steps = decode_steps(model, cache, first, context, t["warmup"] + t["steps"], device)
                s = sa.overlap()
                n_steps = len(steps)
                rows.append({"context": context, "batch": batch, "repeat": rep, "method": method,
                             "budget": t["budget"], "tpot_ms": 1000 * tpot(steps, t["warmup"]),
                             "mean_step_ms": 1000 * float(np.mean(steps[t["warmup"]:])),
                             "wait_rate": s["wait_rate"] if method == "asyncspade" else float("nan"),
                             "wait_ms_per_step": 1000 * s["wait_seconds"] / n_steps,
                             "predict_ms_per_step": 1000 * s["predict_seconds"] / n_steps,
                             "score_ms_per_step": 1000 * s["score_seconds"] / n_steps,
                             "selections_per_step": s["selections"] / n_steps, "device": device})
        del cache
    write_parquet(job.output.table, pd.DataFrame(rows))
