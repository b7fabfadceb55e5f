"""Decoding harness: batched greedy/sampled generation with the KV cache, per-step timing, attention hooks.

Sparse-attention methods plug in at decode time through transformers' attention interface: a
registered attention function receives, per layer, the post-RoPE query of the new token and the
cached keys/values, and may restrict which cached positions the token attends to
(:func:`register_selector`). Pre-RoPE query states are captured by forward hooks on each layer's
``q_norm`` (:class:`QueryRecorder`). Step timings exclude the prefill; TPOT is the median over
steps after a warm-up (:func:`tpot`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from transformers import AttentionInterface, DynamicCache
from transformers.cache_utils import Cache, DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from icmlrepro.core.timer import Timings

# selector(layer_idx, query[b, heads, 1, d], key[b, kv_heads, n, d], value, positions=position_ids[b, 1],
#          valid=bool[b, n] (False at left padding))
#   -> None (dense), a bool keep-mask [b, heads, n], or int indices [b, heads, k] (-1 = empty slot)
Selector = Callable[..., "torch.Tensor | None"]
# sparse_attend(query[b, heads, d], key, value, indices[b, heads, k], scale) -> [b, heads, d]
SparseAttend = Callable[..., torch.Tensor]


@dataclass
class Generation:
    tokens: list[list[int]]          # generated ids per sequence, EOS excluded
    texts: list[str]
    step_seconds: list[float] = field(default_factory=list)
    prefill_seconds: float = 0.0


def _pick(logits: torch.Tensor, do_sample: bool, temperature: float, generator: torch.Generator | None):
    if not do_sample:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(model, tokenizer, prompts: list[str], max_new_tokens: int, do_sample: bool = False,
             temperature: float = 1.0, seed: int = 0) -> Generation:
    """Generate continuations of ``prompts`` (left-padded batch) until EOS or ``max_new_tokens``.

    Runs on the model's device; step times are device times (CUDA events on CUDA, ``core.timer``).
    """
    device = model.device
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    gen = torch.Generator(device=device).manual_seed(seed) if do_sample else None
    cache = DynamicCache(config=model.config)
    timings = Timings(device)
    with timings.region("prefill"):
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
                       use_cache=True).logits[:, -1]
    b = ids.shape[0]
    done = [False] * b
    out = [[] for _ in range(b)]
    pos = pos[:, -1:]
    pad = torch.tensor(tokenizer.pad_token_id, device=device)
    for _ in range(max_new_tokens):
        with timings.region("step"):
            nxt = _pick(logits, do_sample, temperature, gen)
            nxt = torch.where(torch.tensor(done, device=device), pad, nxt)
            for i, tok in enumerate(nxt.tolist()):  # one device-to-host copy per step
                if not done[i] and tok != tokenizer.eos_token_id:
                    out[i].append(tok)
                done[i] = done[i] or tok == tokenizer.eos_token_id
            if all(done):
                timings.discard_last("step")  # the last pick is not a decode step
                break
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)  # finished rows feed padding, never read
            pos = pos + 1
            logits = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos, past_key_values=cache,
                           use_cache=True).logits[:, -1]
    texts = [tokenizer.decode(t, skip_special_tokens=True) for t in out]
    return Generation(out, texts, timings.seconds("step"), timings.total("prefill"))


@torch.no_grad()
def generate_full_recompute(model, tokenizer, prompt: str, max_new_tokens: int) -> list[int]:
    """Greedy decoding without a cache (the whole sequence re-run at every step): the reference
    the cached path must match token for token."""
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    out = []
    for _ in range(max_new_tokens):
        nxt = int(model(input_ids=ids).logits[0, -1].argmax())
        if nxt == tokenizer.eos_token_id:
            break
        out.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return out


class PreallocatedLayer(DynamicLayer):
    """A KV-cache layer that writes each step into a preallocated buffer (doubled when full) and hands
    attention views of it, as serving engines do: appending a token costs O(1), not a copy of the
    whole cache (transformers' default concatenates), so decode-step timings reflect attention.
    Views handed out earlier stay valid: later tokens land beyond them."""

    def __init__(self, capacity: int, **kwargs):
        super().__init__(**kwargs)
        self.capacity = capacity

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self._kbuf = self._vbuf = None
        n, new = self.get_seq_length(), key_states.shape[-2]
        if self._kbuf is None or self._kbuf.shape[0] != key_states.shape[0] or n + new > self._kbuf.shape[-2]:
            cap = max(self.capacity, 2 * (n + new))
            shape = (*key_states.shape[:-2], cap, key_states.shape[-1])
            kbuf, vbuf = key_states.new_empty(shape), value_states.new_empty(shape)
            if n:
                kbuf[..., :n, :], vbuf[..., :n, :] = self.keys, self.values
            self._kbuf, self._vbuf = kbuf, vbuf
        self._kbuf[..., n: n + new, :] = key_states
        self._vbuf[..., n: n + new, :] = value_states
        self.keys, self.values = self._kbuf[..., : n + new, :], self._vbuf[..., : n + new, :]
        return self.keys, self.values


def preallocated_cache(model, capacity: int) -> Cache:
    """A cache of :class:`PreallocatedLayer` for every layer of ``model`` (capacity in tokens)."""
    return Cache(layers=[PreallocatedLayer(capacity) for _ in range(model.config.num_hidden_layers)])


def tpot(step_seconds: list[float], warmup: int = 3) -> float:
    """Time per output token: median step time after ``warmup`` steps (NaN if too few steps)."""
    s = step_seconds[warmup:]
    return float(np.median(s)) if s else float("nan")


def register_selector(name: str, selector: Selector | None, sparse_attend: SparseAttend | None = None) -> str:
    """Register an attention function that applies ``selector`` at decode steps; returns ``name``.

    Prefill (more than one query position) always runs dense attention. At a decode step the
    selector returns None (dense), a boolean keep-mask over cached positions per query head
    (positions not kept are masked out before a dense softmax: same cost as full attention), or
    integer indices of the positions to attend, which ``sparse_attend`` reads alone (a gather
    kernel: the cost falls with the budget). Use with ``model.set_attn_implementation(name)``.
    """

    def attention(module, query, key, value, attention_mask, **kwargs):
        if selector is None or query.shape[2] != 1:
            return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
        valid = _valid_positions(attention_mask, key.shape[2])
        sel = selector(module.layer_idx, query, key, value, positions=kwargs.get("position_ids"), valid=valid)
        if sel is not None and sel.dtype != torch.bool:
            if sparse_attend is None:
                raise ValueError(f"selector {name!r} returned indices but no sparse_attend was registered")
            out = sparse_attend(query[:, :, 0], key, value, sel, module.scaling)
            return out[:, None].to(query.dtype), None  # [b, 1, heads, d], as sdpa_attention_forward
        if sel is not None:
            keep = sel[:, :, None, :]  # [b, heads, 1, n]
            if attention_mask is None:
                attention_mask = keep
            elif attention_mask.dtype == torch.bool:
                attention_mask = attention_mask & keep
            else:
                attention_mask = attention_mask.masked_fill(~keep, torch.finfo(attention_mask.dtype).min)
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(name, attention)
    AttentionMaskInterface.register(name, sdpa_mask)  # the same masks as the default sdpa path
    return name


def _valid_positions(attention_mask, n: int) -> torch.Tensor | None:
    """Which cached positions the decode token may attend (False at left padding); None = all."""
    if attention_mask is None:
        return None
    m = attention_mask[:, 0, -1, -n:]
    return m if m.dtype == torch.bool else m > torch.finfo(m.dtype).min / 2


class QueryRecorder:
    """Records pre-RoPE query states (the output of each layer's ``q_norm``) during decoding."""

    def __init__(self, model):
        self.queries: dict[int, list[torch.Tensor]] = {}
        self._handles = []
        for i, layer in enumerate(model.model.layers):
            self._handles.append(layer.self_attn.q_norm.register_forward_hook(self._hook(i)))

    def _hook(self, layer_idx: int):
        def hook(_module, _inputs, output):
            self.queries.setdefault(layer_idx, []).append(output.detach())
        return hook

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
