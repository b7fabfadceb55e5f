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
  stream on GPU); step t+1 waits only if the worker fell behind, and waits are counted and timed
  (CUDA events on GPU, ``core.timer``). The token written at step t+1 is always attended. The first
  step of a generation selects with the last query there is; until the window fills, the predictor
  returns the last query (no dense warm-up steps).
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

from icmlrepro.core.timer import Interval, Timings
from icmlrepro.lm.decode import QueryRecorder, register_selector

from .kernels import gather_attention
from .predictor import cosine, predict_next
from .selectors import PageTable, oracle_indices, quest_indices, recall, token_scores, topk_indices

METHODS = ("full", "oracle", "quest", "asyncspade", "ideal")
_ids = itertools.count()
STALL_EPS_S = 20e-6  # on CUDA, a device-side stall shorter than this (event resolution + overhead) is no wait


class SparseAttention:
    """Context manager that decodes ``model`` with one selection method at a token ``budget``.

    Selection state (AsyncSpade's query history and in-flight selections, Quest's page tables, the
    ideal bound's indices) belongs to one generation: a forward over more than one new token (a
    prefill) starts a new generation, and so does, per layer, a cache that did not grow by exactly
    one token since that layer's last step (a cropped or replaced cache). Nothing of batch A's
    decoding can then enter batch B's selections, whatever their shapes.

    ``keep_selections`` records every step's indices (layer, cache length, indices on the CPU) in
    ``self.selections``, for tests.
    """

    def __init__(self, model, method: str, budget: int, window: int = 16, order: int = 2, lam: float = 1e-3,
                 dense_layers: int = 2, page_size: int = 16, min_pages: int = 3, asynchronous: bool = True,
                 measure: bool = False, worker_threads: int | None = None, keep_selections: bool = False):
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r} (known: {', '.join(METHODS)})")
        self.model, self.method, self.budget = model, method, budget
        self.window, self.order, self.lam = window, order, lam
        self.dense_layers, self.page_size, self.min_pages = dense_layers, page_size, min_pages
        self.asynchronous, self.measure, self.worker_threads = asynchronous, measure, worker_threads
        self.stats = {"selections": 0, "bootstrap": 0, "generations": 0, "recall": [], "cosine": []}
        self.timings = Timings(model.device)
        self._waits: list[tuple[float, Interval | None]] = []  # per collected selection: host wait, device stall
        self.selections = [] if keep_selections else None
        self._pending: dict[int, tuple[int, Future | tuple]] = {}
        self._history: dict[int, list[torch.Tensor]] = {}
        self._tables: dict[int, PageTable] = {}
        self._seen: dict[int, tuple[int, int]] = {}  # layer -> (generation, cache length) of its last step
        self._free = None  # the ideal method's indices
        self._stream = None  # CUDA: the selection worker's stream
        self._name = register_selector(f"icmlrepro_{method}_{next(_ids)}", self._select, gather_attention)
        self._recorder = None
        self._executor = None
        self._hook = None

    def __enter__(self) -> "SparseAttention":
        if self.method == "asyncspade":
            self._recorder = QueryRecorder(self.model)
            if self.asynchronous:
                init = (lambda: torch.set_num_threads(self.worker_threads)) if self.worker_threads else None
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kv-select", initializer=init)
        # registered after the recorder's q_norm hooks exist; runs before any of them in a forward
        self._hook = self.model.register_forward_pre_hook(self._on_forward, with_kwargs=True)
        self.model.set_attn_implementation(self._name)
        return self

    def __exit__(self, *exc) -> None:
        self.model.set_attn_implementation("sdpa")
        self._hook.remove()
        if self._recorder:
            self._recorder.remove()
        if self._executor:
            self._executor.shutdown(wait=True)

    # -- generations ------------------------------------------------------------------------------
    def _on_forward(self, _module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and ids.shape[-1] > 1:  # a prefill: a new generation starts
            self.stats["generations"] += 1
            self._pending.clear()  # selections in flight belong to the old generation: dropped
            self._history.clear()
            self._tables.clear()
            self._free = None
            if self._recorder:
                self._recorder.queries.clear()

    def _layer_state_current(self, layer: int, n: int) -> bool:
        """Whether ``layer``'s state continues its last step (same generation, cache one token
        longer); if not, its history, pending selection and page table are dropped."""
        gen = self.stats["generations"]
        current = self._seen.get(layer) == (gen, n - 1)
        self._seen[layer] = (gen, n)
        if not current:
            self._history.pop(layer, None)
            self._pending.pop(layer, None)
            self._tables.pop(layer, None)
        return current

    # -- selection --------------------------------------------------------------------------------
    def _select(self, layer: int, query, key, value, positions=None, valid=None):
        if self.method == "full" or layer < self.dense_layers:
            return None
        q = query[:, :, 0, :]
        n = key.shape[2]
        self._layer_state_current(layer, n)
        if self.method == "asyncspade":
            idx = self._asyncspade(layer, q, key, positions, valid)
        elif self.budget >= n:
            idx = None
        elif self.method == "oracle":
            idx = oracle_indices(q, key, self.budget, valid)
        elif self.method == "quest":
            table = self._tables.setdefault(layer, PageTable(self.page_size))
            idx = quest_indices(q, key, self.budget, self.page_size, self.min_pages, valid, table)
        else:
            idx = self._ideal(q, n, valid)
        if self.selections is not None:
            self.selections.append((layer, n, None if idx is None else idx.cpu()))
        return idx

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
        """Use the selection made at the previous step (waiting if the worker is late), then hand the
        worker the next one. The first decode step of a generation has no previous selection: it
        selects with the last query there is (the prompt's last, recorded at the prefill; the current
        one if the prefill ran before recording), and until the window holds more than ``order``
        queries the predictor returns the last query: no step of a sparse layer is dense."""
        n = key.shape[2]
        recorded = self._recorder.queries.get(layer, [])
        pre = recorded[-1][:, -1]  # this step's pre-RoPE query [b, heads, d]
        last = recorded[-2][:, -1] if len(recorded) > 1 else pre  # the prompt's last query, if recorded
        recorded.clear()
        hist = self._history.setdefault(layer, [])
        submitted_at, pending = self._pending.pop(layer, (None, None))
        if pending is not None and submitted_at == n - 1:  # the selection made at the previous step
            prev, q_pred = self._collect(pending)
            self.stats["selections"] += 1
        elif not hist and positions is not None:  # first step of the generation: nothing in flight yet
            prev, q_pred = self._predict_and_score(last[:, :, None, :], key[:, :, : n - 1], positions[:, -1],
                                                   None if valid is None else valid[:, : n - 1])
            self.stats["bootstrap"] += 1
        else:
            prev = q_pred = None
        idx = None
        if prev is not None:  # plus the token written at this step
            idx = torch.cat([prev, torch.full_like(prev[..., :1], n - 1)], dim=-1)
        if self.measure and q_pred is not None and self.budget < n:
            ref = oracle_indices(q, key, self.budget, valid)
            mine = idx if idx is not None else topk_indices(token_scores(q, key), n, valid)
            self.stats["recall"].append(float(recall(mine, ref, n).mean()))
            self.stats["cosine"].append(float(cosine(q_pred, q).mean()))
        hist.append(pre)
        del hist[: -self.window]
        if positions is not None:
            ready = None
            if key.is_cuda:  # the worker's stream must see this step's keys
                ready = torch.cuda.Event()
                ready.record()
            args = (torch.stack(hist, dim=-2), key, positions[:, -1] + 1, valid, ready)
            job = self._executor.submit(self._next_selection, *args) if self._executor else self._next_selection(*args)
            self._pending[layer] = (n, job)
        return idx

    def _collect(self, pending):
        """The previous step's selection. Waiting is timed where it happens: the host blocked on a
        worker that has not finished queueing (``perf_counter``), and on CUDA the decode stream
        stalled on the worker stream's event (CUDA events around ``wait_event``)."""
        host = 0.0
        if isinstance(pending, Future):
            if not pending.done():
                t0 = time.perf_counter()
                pending.result()
                host = time.perf_counter() - t0
            pending = pending.result()
        prev, q_pred, done_event = pending
        stall = None
        if done_event is not None:  # CUDA: the worker's stream finished before this stream reads
            with self.timings.region("stall") as stall:
                torch.cuda.current_stream().wait_event(done_event)
            for t in (prev, q_pred):
                if t is not None:
                    t.record_stream(torch.cuda.current_stream())
        self._waits.append((host, stall))
        return prev, q_pred

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
        """Selection for position ``next_pos`` from the cache ``key`` seen now. Timed on the stream it
        runs on (the worker's on CUDA), so the cost is device time, not launch time."""
        with self.timings.region("predict"):
            q_pre = predict_next(history, self.order, self.lam)                    # [b, heads, d]
        with self.timings.region("score"):
            q_rot = rotate_to(self.model, q_pre, next_pos)
            n = key.shape[2]
            # budget - 1 from the cache seen now: the token written next step is added on top
            idx = None if self.budget > n else topk_indices(token_scores(q_rot, key), self.budget - 1, valid, newest=0)
        return idx, q_rot

    def overlap(self) -> dict:
        """How often and how long the decode loop waited for the selection worker (a step waited if
        the host blocked on the worker or, on CUDA, the decode stream stalled more than
        ``STALL_EPS_S``), the predictor's and the scoring's cost, and prediction quality."""
        waited = [h > 0 or (s is not None and s.seconds() > STALL_EPS_S) for h, s in self._waits]
        wait_s = sum(h + (s.seconds() if s is not None else 0.0) for h, s in self._waits)
        out = {"selections": len(self._waits), "bootstrap": self.stats["bootstrap"],
               "wait_rate": sum(waited) / max(len(waited), 1), "wait_seconds": wait_s,
               "predict_seconds": self.timings.total("predict"), "score_seconds": self.timings.total("score")}
        for k in ("recall", "cosine"):
            if self.stats[k]:
                out[f"mean_{k}"] = float(sum(self.stats[k]) / len(self.stats[k]))
        return out


def rotate_to(model, q_pre: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Pre-RoPE queries ``[b, heads, d]`` rotated to ``positions[b]`` with the model's own rotary embedding."""
    cos, sin = model.model.rotary_emb(q_pre, positions[:, None])
    q_rot, _ = apply_rotary_pos_emb(q_pre[:, :, None, :], q_pre[:, :, None, :], cos, sin)
    return q_rot[:, :, 0, :]
