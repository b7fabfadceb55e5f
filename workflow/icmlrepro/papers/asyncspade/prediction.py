"""Stage ``asyncspade.predict``: how well the temporal regression predicts the next query.

Teacher-forced on gold chains of thought: one forward pass records every layer's pre-RoPE queries
(``q_norm``) and post-RoPE keys; at each sampled position t the predictor sees the W queries before
t, its prediction is rotated to position t and ranks the earlier tokens; the ranking's top-k is
compared with the top-k of the true query (recall), at several windows W. Reference predictors: the
previous query reused as is (no regression), and the true query itself (recall 1 by definition).
"""

from __future__ import annotations

import pandas as pd
import torch
from transformers import DynamicCache

from icmlrepro.core.device import torch_device
from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.seeding import seed_everything
from icmlrepro.core.timer import Interval
from icmlrepro.lm.data import tasks_from_table
from icmlrepro.lm.decode import QueryRecorder
from icmlrepro.lm.model import load

from .decoding import rotate_to
from .predictor import cosine, predict_next
from .selectors import recall, token_scores


def topk_past(scores: torch.Tensor, t: torch.Tensor, k: int) -> torch.Tensor:
    """Top-k over the tokens before each row's position ``t``: ``scores[T, heads, n]``."""
    n = scores.shape[-1]
    future = torch.arange(n, device=scores.device)[None, :] >= t[:, None]
    return scores.masked_fill(future[:, None, :], float("-inf")).topk(k, dim=-1).indices


@torch.no_grad()
def analyse_trace(model, ids: torch.Tensor, windows: list[int], order: int, lam: float, budget: int,
                  dense_layers: int, stride: int) -> list[dict]:
    rec = QueryRecorder(model)
    cache = DynamicCache(config=model.config)
    try:
        model(input_ids=ids, past_key_values=cache, use_cache=True)
    finally:
        rec.remove()
    n = ids.shape[1]
    t = torch.arange(max(max(windows), order + 1, budget + 1), n, stride, device=ids.device)
    rows = []
    for layer in range(dense_layers, len(model.model.layers)):
        q_pre = rec.queries[layer][0][0]                    # [n, heads, d]
        keys = cache.layers[layer].keys                      # [1, kv_heads, n, d], post-RoPE
        keys_t = keys.expand(len(t), -1, -1, -1)
        true_q = rotate_to(model, q_pre[t], t)
        oracle = topk_past(token_scores(true_q, keys_t), t, budget)
        preds = {"previous query": (q_pre[t - 1], 0.0)}
        for w in windows:
            hist = torch.stack([q_pre[t - w + j] for j in range(w)], dim=-2)  # [T, heads, W, d]
            with Interval(ids.device) as timer:  # device time (CUDA events on GPU)
                pred = predict_next(hist, order, lam)
            preds[f"ridge AR({order}), W={w}"] = (pred, timer.seconds() / len(t))
        for name, (pred, secs) in preds.items():
            sel = topk_past(token_scores(rotate_to(model, pred, t), keys_t), t, budget)
            rows.append({"layer": layer, "predictor": name,
                         "window": 1 if name == "previous query" else int(name.rsplit("=", 1)[1]),
                         "recall": float(recall(sel, oracle, n).mean()),
                         "cosine": float(cosine(pred, q_pre[t]).mean()),
                         "predict_seconds_per_step": secs, "positions": len(t), "context": n})
    return rows


def run(job) -> None:
    p = job.params
    a = p["prediction"]
    seed = int(job.wildcards.seed)
    seed_everything(seed)
    model, tok = load(job.input.target, torch_device())
    rows = []
    for i, task in enumerate(tasks_from_table(read_parquet(job.input.traces))):
        ids = tok(task.text, return_tensors="pt")["input_ids"].to(model.device)
        for r in analyse_trace(model, ids, a["windows"], p["order"], p["ridge_lambda"], a["budget"],
                               p["dense_layers"], a["stride"]):
            rows.append({"seed": seed, "trace": i, "family": task.family, **r})
    write_parquet(job.output.table, pd.DataFrame(rows))
