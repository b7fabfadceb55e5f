"""Sparse decoding with one selector interface: full, oracle top-k, Quest, AsyncSpade, and the ideal bound.

:class:`SparseAttention` plugs into the substrate's decode-time attention hook. Every sparse method
hands the hook the indices of the tokens to read, and the same gather-attention kernel
(``kernels.gather_attention``) reads only those, so methods differ only in how (and when) they
choose:

- ``oracle``: token top-k with the true query, computed on the critical path (sequential dependency);
- ``quest``: Quest's page estimate from per-page key bounds (kept incrementally), top pages;
- ``asyncspade``: per layer, the last ``window`` pre-RoPE queries (recorded at ``q_norm``) predict
  q_{t+1} (ridge AR, ``predictor.py``); the prediction is rotated to position t+1 and scored against
  the cached keys. With ``asynchronous=True`` that runs on a worker thread while decoding goes on
  (the paper's disaggregated selection worker: a thread on its own core here, a separate device or
  stream on GPU); step t+1 waits only if the worker fell behind, and waits are counted and timed.
  The token written at step t+1 is always attended.
- ``ideal``: ``budget`` tokens spread over the context, indices given for free (drawn once): the same
  sparse forward with no selection cost, the "theoretical optimal TPOT" of the claim.

Prefill and the first ``dense_layers`` layers are dense, as in Quest; a budget covering the whole
context is dense too.
"""

from __future__ import annotations

import itertools
import time
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb

from icmlrepro.lm.decode import QueryRecorder, register_selector

from .kernels import gather_attention
from .predictor import cosine, predict_next
from .selectors import PageTable, oracle_indices, quest_indices, recall, token_scores, topk_indices

METHODS = ("full", "oracle", "quest", "asyncspade", "ideal")
_ids = itertools.count()


class SparseAttention:
    """Context manager that decodes ``model`` with one selection method at a token ``budget``."""

    def __init__(self, model, method: str, budget: int, window: int = 16, order: int = 2, lam: float = 1e-3,
                 dense_layers: int = 2, page_size: int = 16, min_pages: int = 3, asynchronous: bool = True,
                 measure: bool = False, worker_threads: int | None = None):
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r} (known: {', '.join(METHODS)})")
        self.model, self.method, self.budget = model, method, budget
        self.window, self.order, self.lam = window, order, lam
        self.dense_layers, self.page_size, self.min_pages = dense_layers, page_size, min_pages
        self.asynchronous, self.measure, self.worker_threads = asynchronous, measure, worker_threads
        self.stats = {"selections": 0, "waits": 0, "wait_seconds": 0.0, "predict_seconds": 0.0,
                      "score_seconds": 0.0, "recall": [], "cosine": []}
        self._pending: dict[int, tuple[int, Future | tuple]] = {}
        self._history: dict[int, list[torch.Tensor]] = {}
        self._tables: dict[int, PageTable] = {}
        self._free = None  # the ideal method's indices
        self._stream = None  # CUDA: the selection worker's stream
        self._name = register_selector(f"icmlrepro_{method}_{next(_ids)}", self._select, gather_attention)
        self._recorder = None
        self._executor = None

    def __enter__(self) -> "SparseAttention":
        if self.method == "asyncspade":
            self._recorder = QueryRecorder(self.model)
            if self.asynchronous:
                init = (lambda: torch.set_num_threads(self.worker_threads)) if self.worker_threads else None
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kv-select", initializer=init)
        self.model.set_attn_implementation(self._name)
        return self

    def __exit__(self, *exc) -> None:
        self.model.set_attn_implementation("sdpa")
        if self._recorder:
            self._recorder.remove()
        if self._executor:
            self._executor.shutdown(wait=True)

    # -- selection --------------------------------------------------------------------------------
    def _select(self, layer: int, query, key, value, positions=None, valid=None):
        if self.method == "full" or layer < self.dense_layers:
            return None
        q = query[:, :, 0, :]
        n = key.shape[2]
        if self.method == "asyncspade":
            return self._asyncspade(layer, q, key, positions, valid)
        if self.budget >= n:
            return None
        if self.method == "oracle":
            return oracle_indices(q, key, self.budget, valid)
        if self.method == "quest":
            table = self._tables.setdefault(layer, PageTable(self.page_size))
            return quest_indices(q, key, self.budget, self.page_size, self.min_pages, valid, table)
        return self._ideal(q, n, valid)

    def _ideal(self, q, n: int, valid):
        """Indices given for free: ``budget`` - 1 tokens spread over the context like a real selection
        (drawn once, so no selection work per step) plus the newest token."""
        if self._free is None or self._free.shape[:2] != q.shape[:2] or self._free.max() >= n - 1:
            g = torch.Generator().manual_seed(n)
            self._free = torch.stack([torch.randperm(n - 1, generator=g)[: self.budget - 1]
                                      for _ in range(q.shape[0] * q.shape[1])]).view(*q.shape[:2], -1).to(q.device)
        idx = torch.cat([self._free, torch.full_like(self._free[..., :1], n - 1)], dim=-1)
        return idx if valid is None else idx.masked_fill(~torch.gather(valid[:, None, :].expand(-1, idx.shape[1], -1),
                                                                       -1, idx), -1)

    def _asyncspade(self, layer: int, q, key, positions, valid):
        n = key.shape[2]
        pre = self._recorder.queries[layer][-1][:, -1]  # this step's pre-RoPE query [b, heads, d]
        self._recorder.queries[layer].clear()
        hist = self._history.setdefault(layer, [])
        if hist and hist[-1].shape != pre.shape:
            hist.clear()
        hist.append(pre)
        del hist[: -self.window]
        idx = None
        submitted_at, pending = self._pending.pop(layer, (None, None))
        if pending is not None and submitted_at == n - 1:  # the selection made at the previous step
            if isinstance(pending, Future):
                if not pending.done():
                    self.stats["waits"] += 1
                    t0 = time.perf_counter()
                    pending = pending.result()
                    self.stats["wait_seconds"] += time.perf_counter() - t0
                else:
                    pending = pending.result()
            prev, q_pred, done_event = pending
            if done_event is not None:  # CUDA: the worker's stream finished before this stream reads
                torch.cuda.current_stream().wait_event(done_event)
                for t in (prev, q_pred):
                    if t is not None:
                        t.record_stream(torch.cuda.current_stream())
            self.stats["selections"] += 1
            if prev is not None:  # plus the token written at this step
                newest = torch.full_like(prev[..., :1], n - 1)
                idx = torch.cat([prev, newest], dim=-1)
            if self.measure and self.budget < n:
                ref = oracle_indices(q, key, self.budget, valid)
                mine = idx if idx is not None else topk_indices(token_scores(q, key), n, valid)
                self.stats["recall"].append(float(recall(mine, ref, n).mean()))
                self.stats["cosine"].append(float(cosine(q_pred, q).mean()))
        if len(hist) > self.order and positions is not None:
            ready = None
            if key.is_cuda:  # the worker's stream must see this step's keys
                ready = torch.cuda.Event()
                ready.record()
            args = (torch.stack(hist, dim=-2), key, positions[:, -1] + 1, valid, ready)
            job = self._executor.submit(self._next_selection, *args) if self._executor else self._next_selection(*args)
            self._pending[layer] = (n, job)
        return idx

    def _next_selection(self, history, key, next_pos, valid, ready=None):
        """Predict the next query, rotate it to its position, and pick the budgeted tokens (on CUDA in
        the worker's own stream, so that selection overlaps the decode loop's kernels)."""
        if ready is None:
            return (*self._predict_and_score(history, key, next_pos, valid), None)
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=key.device)
        with torch.cuda.stream(self._stream):
            self._stream.wait_event(ready)
            out = self._predict_and_score(history, key, next_pos, valid)
            done = torch.cuda.Event()
            done.record()
        return (*out, done)

    def _predict_and_score(self, history, key, next_pos, valid):
        t0 = time.perf_counter()
        q_pre = predict_next(history, self.order, self.lam)                    # [b, heads, d]
        t1 = time.perf_counter()
        q_rot = rotate_to(self.model, q_pre, next_pos)
        n = key.shape[2]
        # budget - 1 from the cache seen now: the token written next step is added on top
        idx = None if self.budget > n else topk_indices(token_scores(q_rot, key), self.budget - 1, valid, newest=0)
        self.stats["predict_seconds"] += t1 - t0
        self.stats["score_seconds"] += time.perf_counter() - t1
        return idx, q_rot


def rotate_to(model, q_pre: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Pre-RoPE queries ``[b, heads, d]`` rotated to ``positions[b]`` with the model's own rotary embedding."""
    cos, sin = model.model.rotary_emb(q_pre, positions[:, None])
    q_rot, _ = apply_rotary_pos_emb(q_pre[:, :, None, :], q_pre[:, :, None, :], cos, sin)
    return q_rot[:, :, 0, :]


def overlap_summary(stats: dict) -> dict:
    """How often and how long the decode loop waited for the selection worker, and prediction quality."""
    sel = max(stats["selections"], 1)
    out = {"wait_rate": stats["waits"] / sel, "wait_seconds": stats["wait_seconds"],
           "predict_seconds": stats["predict_seconds"], "score_seconds": stats["score_seconds"]}
    for k in ("recall", "cosine"):
        if stats[k]:
            out[f"mean_{k}"] = float(sum(stats[k]) / len(stats[k]))
    return out
