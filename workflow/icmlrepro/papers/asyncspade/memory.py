"""What the TPOT sweep asks of the device: memory of weights and KV cache, which workloads fit, and
how long the rule needs (its ``runtime`` resource).

Arithmetic (stated in resources/claims/asyncspade.yaml): a decode step of full attention reads all
weights and the whole KV cache once, so it is memory-bound; with Qwen3-8B's geometry (36 layers,
8 KV heads of 128 channels, bf16) the cache costs 2 x 36 x 8 x 128 x 2 B = 144 KiB per token and the
weights 8.19 B x 2 B = 16.4 GB. A workload (context, batch) runs only if weights + KV cache of
batch x (context + warm-up + steps) tokens stay under ``HEADROOM`` of ``tpot.memory_gb`` (the rest
for activations of a prefill chunk, the logits of one position and the allocator).
"""

from __future__ import annotations

HEADROOM = 0.9
# Assumed sustained rates of the sizing model (an A100-80GB; the H100/H200 are faster, so the
# runtime is an upper bound there): HBM bandwidth reached by a decode step, bf16 matmul throughput
# reached by a chunked prefill. Used only to size the SLURM runtime, never as a result.
ASSUMED_BANDWIDTH_BPS = 1.5e12
ASSUMED_FLOPS = 150e12


def head_dim(size: dict) -> int:
    return size["hidden"] // size["heads"]


def weight_count(size: dict, vocab: int) -> int:
    """Parameters of the Qwen3 of ``size`` (untied embeddings, as Qwen3-8B; norms neglected)."""
    hd, h, i = head_dim(size), size["hidden"], size["intermediate"]
    attention = h * size["heads"] * hd * 2 + h * size["kv_heads"] * hd * 2
    return size["layers"] * (attention + 3 * h * i) + 2 * vocab * h


def kv_bytes_per_token(size: dict, dtype_bytes: int) -> int:
    return 2 * size["layers"] * size["kv_heads"] * head_dim(size) * dtype_bytes


def workload_bytes(t: dict, context: int, batch: int, dtype_bytes: int) -> int:
    capacity = context + t["warmup"] + t["steps"]
    return weight_count(t["size"], t["vocab"]) * dtype_bytes + batch * capacity * kv_bytes_per_token(
        t["size"], dtype_bytes)


def fitting_workloads(t: dict, dtype_bytes: int) -> tuple[list[tuple[int, int]], list[tuple[int, int, str]]]:
    """(context, batch) pairs of the sweep whose memory fits, and the skipped ones with the reason."""
    limit = HEADROOM * t["memory_gb"] * 1e9
    run, skipped = [], []
    for context in t["contexts"]:
        for batch in t["batches"]:
            need = workload_bytes(t, context, batch, dtype_bytes)
            if need <= limit:
                run.append((context, batch))
            else:
                skipped.append((context, batch, f"needs {need / 1e9:.1f} GB > {HEADROOM:.0%} of {t['memory_gb']} GB"))
    return run, skipped


def claim_workload(t: dict, workloads: list[tuple[int, int]]) -> tuple[int, int]:
    """The workload fixed before the run at which the overlap and ideal-ratio claims are read."""
    w = (t["claim_workload"]["context"], t["claim_workload"]["batch"])
    if w not in workloads:
        raise ValueError(f"tpot.claim_workload {w} is not among the workloads that run: {workloads}")
    return w


def heaviest(workloads) -> tuple[int, int]:
    """The workload with the most cached tokens (batch x context; ties: the longer context)."""
    return max(workloads, key=lambda w: (w[0] * w[1], w[0]))


def runtime_minutes(t: dict, floor: int = 30) -> int:
    """The rule's runtime: prefill (compute-bound) and decode steps of every method (memory-bound:
    weights + cache read once per step; sparse methods read ``budget`` tokens) at every workload
    that fits, times 2 for selection work and model build; at least ``floor`` minutes."""
    weights = weight_count(t["size"], t["vocab"])
    per_token = kv_bytes_per_token(t["size"], 2)
    seconds = 0.0
    for context, batch in fitting_workloads(t, 2)[0]:
        seconds += 2 * weights * batch * context / ASSUMED_FLOPS
        steps = (t["warmup"] + t["steps"]) * t["repeats"]
        full = (2 * weights + batch * context * per_token) / ASSUMED_BANDWIDTH_BPS
        sparse = (2 * weights + batch * min(context, t["budget"]) * per_token) / ASSUMED_BANDWIDTH_BPS
        seconds += steps * (full + 4 * sparse)
    return max(floor, int(2 * seconds / 60) + 1)
