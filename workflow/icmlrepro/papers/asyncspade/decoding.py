"""Sparse decoding with one selector interface: full, oracle top-k, Quest, AsyncSpade (sync or async).

:class:`SparseAttention` plugs into the substrate's decode-time attention hook. AsyncSpade keeps, per
layer, the last ``window`` pre-RoPE queries (recorded at ``q_norm``); after the layer has used its
selection for step t, it predicts q_{t+1} (ridge AR, ``predictor.py``), rotates it to position t+1
and scores the cached keys: that selection is what step t+1 uses. With ``asynchronous=True`` the
scoring runs on a worker thread while decoding continues (the disaggregated selection worker of the
paper, on CPU threads here and a separate CUDA stream on GPU later); step t+1 waits only if the
worker has fallen behind, and such waits are counted. Tokens that arrived after a selection was
computed are always attended. Prefill and the first ``dense_layers`` layers are dense, as in Quest.
"""

from __future__ import annotations

import itertools
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb

from icmlrepro.lm.decode import QueryRecorder, register_selector

from .predictor import cosine, predict_next
from .selectors import oracle_topk, quest_mask, recall, token_scores, topk_mask

METHODS = ("full", "oracle", "quest", "asyncspade")
_ids = itertools.count()


class SparseAttention:
    """Context manager that decodes ``model`` with one selection method at a token ``budget``."""

    def __init__(self, model, method: str, budget: int, window: int = 16, order: int = 2, lam: float = 1e-3,
                 dense_layers: int = 2, page_size: int = 16, asynchronous: bool = True, measure: bool = False):
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r} (known: {', '.join(METHODS)})")
        self.model, self.method, self.budget = model, method, budget
        self.window, self.order, self.lam = window, order, lam
        self.dense_layers, self.page_size = dense_layers, page_size
        self.asynchronous, self.measure = asynchronous, measure
        self.stats = {"selections": 0, "waits": 0, "recall": [], "cosine": []}
        self._pending: dict[int, Future | tuple] = {}
        self._history: dict[int, list[torch.Tensor]] = {}
        self._name = register_selector(f"icmlrepro_{method}_{next(_ids)}", self._select)
        self._recorder = None
        self._executor = None

    def __enter__(self) -> "SparseAttention":
        if self.method == "asyncspade":
            self._recorder = QueryRecorder(self.model)
            if self.asynchronous:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kv-select")
        self.model.set_attn_implementation(self._name)
        return self

    def __exit__(self, *exc) -> None:
        self.model.set_attn_implementation("sdpa")
        if self._recorder:
            self._recorder.remove()
        if self._executor:
            self._executor.shutdown(wait=True)

    # -- selection --------------------------------------------------------------------------------
    def _select(self, layer: int, query, key, value, positions=None):
        if self.method == "full" or layer < self.dense_layers:
            return None
        q = query[:, :, 0, :]
        if self.method == "oracle":
            return oracle_topk(q, key, self.budget)
        if self.method == "quest":
            return quest_mask(q, key, self.budget, self.page_size)
        return self._asyncspade(layer, q, key, positions)

    def _asyncspade(self, layer: int, q, key, positions):
        n = key.shape[2]
        pre = self._recorder.queries[layer][-1][:, -1]  # this step's pre-RoPE query [b, heads, d]
        self._recorder.queries[layer].clear()
        hist = self._history.setdefault(layer, [])
        hist.append(pre)
        del hist[: -self.window]
        keep = None
        pending = self._pending.pop(layer, None)
        if pending is not None:
            if isinstance(pending, Future):
                if not pending.done():
                    self.stats["waits"] += 1
                pending = pending.result()
            prev_keep, q_pred = pending
            keep = torch.ones(q.shape[0], q.shape[1], n, dtype=torch.bool)
            keep[..., : prev_keep.shape[-1]] = prev_keep  # newer tokens stay attended
            self.stats["selections"] += 1
            if self.measure:
                self.stats["recall"].append(float(recall(keep, oracle_topk(q, key, self.budget)).mean()))
                self.stats["cosine"].append(float(cosine(q_pred, q).mean()))
        if len(hist) > self.order and positions is not None:
            args = (layer, torch.stack(hist, dim=-2), key, positions[:, -1] + 1)
            self._pending[layer] = (self._executor.submit(self._next_selection, *args) if self._executor
                                    else self._next_selection(*args))
        return keep

    def _next_selection(self, layer: int, history, key, next_pos):
        """Predict the next query, rotate it to its position, and pick the budgeted tokens."""
        q_pre = predict_next(history, self.order, self.lam)                    # [b, heads, d]
        cos, sin = self.model.model.rotary_emb(q_pre, next_pos[:, None])
        q_rot, _ = apply_rotary_pos_emb(q_pre[:, :, None, :], q_pre[:, :, None, :], cos, sin)
        q_rot = q_rot[:, :, 0, :]
        return topk_mask(token_scores(q_rot, key), self.budget, always_last=0), q_rot


def overlap_summary(stats: dict) -> dict:
    """How often the decode loop waited for the selection worker, and prediction quality."""
    sel = max(stats["selections"], 1)
    out = {"wait_rate": stats["waits"] / sel}
    for k in ("recall", "cosine"):
        if stats[k]:
            out[f"mean_{k}"] = float(sum(stats[k]) / len(stats[k]))
    return out
