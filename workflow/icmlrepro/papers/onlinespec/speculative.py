"""Speculative decoding of one sequence with exact verification, and target-only decoding to compare.

Both models keep KV caches. Each round the draft proposes ``gamma`` tokens autoregressively, the target
scores the last emitted token plus the proposal in one forward pass (that pass is the verification
feedback: the target's distribution at every drafted position), ``verify`` decides how many tokens
are accepted and which token follows, and both caches are cropped back to the accepted prefix.
Greedy mode accepts while the proposal equals the target's argmax, so the output equals the target's
greedy output token for token; sampling mode is exact speculative sampling (temperature 1).
A draft with its own caches (``new_cache``: Hedge's mixture, one per expert) brings them.
Inputs are built on the models' device. The host timer is a true wall clock on CUDA too: every round
ends by reading the accepted count and the next token to the host, which waits for the device.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from .feedback import model_device
from .verify import verify, verify_greedy


@dataclass
class SpecResult:
    tokens: list[int]                      # emitted tokens (EOS included when reached)
    accepted: list[int] = field(default_factory=list)  # accepted draft tokens per round
    seconds: float = 0.0

    @property
    def rounds(self) -> int:
        return len(self.accepted)

    @property
    def acceptance_length(self) -> float:
        """Tokens emitted per verification round (accepted draft tokens + the target's token)."""
        return len(self.tokens) / max(self.rounds, 1)


def _forward(model, ids, cache):
    """Logits of token ids ``ids`` (nested lists) appended to ``cache``, computed where the model is."""
    return model(input_ids=torch.tensor(ids, device=model_device(model)), past_key_values=cache,
                 use_cache=True).logits[0]


@torch.no_grad()
def speculative_generate(target, draft, prompt_ids: list[int], max_new_tokens: int, gamma: int, eos_id: int,
                         greedy: bool = True, generator: torch.Generator | None = None) -> SpecResult:
    t0 = time.perf_counter()
    tc = DynamicCache(config=target.config)
    dc = draft.new_cache() if hasattr(draft, "new_cache") else DynamicCache(config=draft.config)
    if len(prompt_ids) > 1:
        _forward(target, [prompt_ids[:-1]], tc)
        _forward(draft, [prompt_ids[:-1]], dc)
    cur = prompt_ids[-1]
    pending = [cur]                        # emitted tokens the draft cache has not seen yet
    out, accepted = [], []
    while len(out) < max_new_tokens:
        g = min(gamma, max_new_tokens - len(out))
        proposal, q_rows = [], []
        logits = _forward(draft, [pending], dc)[-1]
        for i in range(g):
            q = torch.softmax(logits.float(), -1)
            x = int(q.argmax()) if greedy else int(torch.multinomial(q.cpu(), 1, generator=generator))
            proposal.append(x)
            q_rows.append(q)
            if i + 1 < g:
                logits = _forward(draft, [[x]], dc)[-1]
        p_logits = _forward(target, [[cur, *proposal]], tc)   # [g+1, V]: the feedback
        toks = torch.tensor([proposal], device=p_logits.device)
        if greedy:
            n, nxt = verify_greedy(p_logits[None], toks)
        else:
            u = torch.rand(1, g, generator=generator).to(p_logits.device)
            us = torch.rand(1, generator=generator).to(p_logits.device)
            n, nxt = verify(torch.softmax(p_logits.float(), -1)[None], torch.stack(q_rows)[None], toks, u, us)
        n, nxt = int(n[0]), int(nxt[0])
        emitted = proposal[:n] + [nxt]
        accepted.append(n)
        tc.crop(-(g - n)) if g > n else None                 # target cache: cur + accepted proposal
        seen = g - 1                                          # draft cache holds cur + proposal[:g-1]
        keep = min(n, seen)
        dc.crop(-(seen - keep)) if seen > keep else None
        pending = proposal[keep:n] + [nxt]
        cur = nxt
        if eos_id in emitted:  # tokens after EOS are dropped, and do not count as accepted
            kept = emitted.index(eos_id) + 1
            accepted[-1] = min(n, kept)
            out += emitted[:kept]
            break
        out += emitted
    return SpecResult(out[:max_new_tokens], accepted, time.perf_counter() - t0)


@torch.no_grad()
def target_generate(target, prompt_ids: list[int], max_new_tokens: int, eos_id: int) -> SpecResult:
    """Greedy target-only decoding with the same cache and loop structure: the speed reference."""
    t0 = time.perf_counter()
    tc = DynamicCache(config=target.config)
    logits = _forward(target, [prompt_ids], tc)[-1]
    out = []
    while len(out) < max_new_tokens:
        x = int(logits.argmax())
        out.append(x)
        if x == eos_id:
            break
        logits = _forward(target, [[x]], tc)[-1]
    return SpecResult(out, [0] * len(out), time.perf_counter() - t0)
