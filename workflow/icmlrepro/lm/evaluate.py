"""Stage ``lm.evaluate``: accuracy per family at full attention, and decode throughput.

Full-attention accuracy is the quality bar the sparse-attention and speculative methods are judged
against. Every evaluation task is decoded greedily with the KV cache and checked exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.device import torch_device
from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.metrics import MetricsFile

from .data import tasks_from_table
from .decode import generate, tpot
from .model import load, parameter_count
from .tasks import check


def evaluate_model(model, tok, tasks, batch_size: int, max_new_tokens: int):
    rows, steps = [], []
    order = sorted(range(len(tasks)), key=lambda i: (tasks[i].family, len(tasks[i].prompt)))
    for start in range(0, len(order), batch_size):
        batch = [tasks[i] for i in order[start: start + batch_size]]
        g = generate(model, tok, [t.prompt for t in batch], max_new_tokens)
        steps.append((len(batch), g.step_seconds))
        for t, text, toks in zip(batch, g.texts, g.tokens):
            rows.append({"family": t.family, "difficulty": t.difficulty,
                         "target_tokens": len(tok(t.target, add_special_tokens=False)["input_ids"]),
                         "generated_tokens": len(toks), "correct": bool(check(t, text))})
    return pd.DataFrame(rows), steps


def run(job) -> None:
    p = job.params
    tasks = tasks_from_table(read_parquet(job.input.eval))
    mf = MetricsFile("lm", p["scale"], replicate="seed", replicates=[p["seeds"][0]])
    tables = []
    for role in ("target", "draft"):
        model, tok = load(job.input[role], torch_device())  # a GPU-tagged rule: CUDA when given one
        df, steps = evaluate_model(model, tok, tasks, p["eval_batch_size"], p["max_new_tokens"])
        df.insert(0, "role", role)
        tables.append(df)
        for fam, acc in df.groupby("family")["correct"].mean().items():
            mf.add(f"accuracy.{role}.{fam}", [float(acc)], unit="fraction", direction="higher",
                   description=f"exact-answer accuracy of the {role} model on {fam} (greedy, full attention)")
        mf.add(f"parameters.{role}", [parameter_count(model)], unit="count", direction="none")
        full = [tpot(s) for b, s in steps if b == p["eval_batch_size"] and len(s) > 3]
        t = float(np.median(full)) if full else float("nan")
        mf.add(f"tpot_ms.{role}.b{p['eval_batch_size']}", [1000 * t], unit="ms", direction="lower", timing=True,
               description="median time per output token (KV-cache decode, after 3 warm-up steps)")
        mf.add(f"decode_tokens_per_s.{role}.b{p['eval_batch_size']}", [p["eval_batch_size"] / t], unit="tokens/s",
               direction="higher", timing=True, description="batched decode throughput")
    write_parquet(job.output.table, pd.concat(tables, ignore_index=True))
    mf.write(job.output.metrics)
