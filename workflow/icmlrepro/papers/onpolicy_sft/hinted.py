"""Hinted Decoding: one model, two streams, mixed token by token by the hinted stream's entropy.

The hinted stream reads the question with the ground-truth solution as a hint; the plain stream reads
the question alone. Each token is sampled from softmax(((1 - lam) log p_hint + lam log p_plain) / T)
with lam = clamp(beta * H(p_hint) / log V, 0, 1) (published ``lambda_linear``): where the hinted stream
is sure, it writes; where it hesitates, the model's own plain-stream preference takes over. beta = 0 is
the hinted stream alone (the published "self-distillation baseline"). As in the published code the
first token comes from the hinted stream, and after the answer separator ('#', the published
``spliter``) the plain stream writes alone, so the answer follows from the re-generated trace.
Both streams append the same sampled token and keep their own KV caches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from icmlrepro.lm.tasks import SEP_ANSWER


def mixing_weight(logp_hint: torch.Tensor, beta: float) -> torch.Tensor:
    """lam = clamp(beta * H(p_hint) / log V, 0, 1) per row of log-probabilities [b, V]."""
    entropy = -(logp_hint.exp() * logp_hint).sum(-1)
    return (beta * entropy / math.log(logp_hint.shape[-1])).clamp(0.0, 1.0)


def mix(logp_hint: torch.Tensor, logp_plain: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    return (1.0 - lam[:, None]) * logp_hint + lam[:, None] * logp_plain


@dataclass
class Stream:
    """A left-padded batch of prompts with its KV cache, fed one token at a time."""

    model: object
    mask: torch.Tensor
    pos: torch.Tensor
    cache: DynamicCache

    @classmethod
    def start(cls, model, tokenizer, prompts: list[str]):
        enc = tokenizer(prompts, return_tensors="pt", padding=True)
        ids, mask = enc["input_ids"].to(model.device), enc["attention_mask"].to(model.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=model.config)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
                       use_cache=True).logits[:, -1]
        return cls(model, mask, pos[:, -1:], cache), logits

    def step(self, token: torch.Tensor) -> torch.Tensor:
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        self.pos = self.pos + 1
        return self.model(input_ids=token[:, None], attention_mask=self.mask, position_ids=self.pos,
                          past_key_values=self.cache, use_cache=True).logits[:, -1]


@torch.no_grad()
def hinted_generate(model, tokenizer, prompts: list[str], hint_prompts: list[str], max_new_tokens: int,
                    beta: float, temperature: float, seed: int) -> tuple[list[list[int]], list[float]]:
    """Token ids generated per prompt (EOS excluded) and the mean lam used per sequence."""
    gen = torch.Generator(device=model.device).manual_seed(seed)
    plain, lp = Stream.start(model, tokenizer, prompts)
    hinted, lh = Stream.start(model, tokenizer, hint_prompts)
    sep = tokenizer.convert_tokens_to_ids(SEP_ANSWER)
    b = len(prompts)
    out, lams = [[] for _ in range(b)], [[] for _ in range(b)]
    done = torch.zeros(b, dtype=torch.bool, device=model.device)
    after_sep = torch.zeros(b, dtype=torch.bool, device=model.device)
    for t in range(max_new_tokens):
        logp_h, logp_p = F.log_softmax(lh.float(), -1), F.log_softmax(lp.float(), -1)
        lam = mixing_weight(logp_h, beta) if t > 0 else torch.zeros(b, device=model.device)
        lam = torch.where(after_sep, torch.ones_like(lam), lam)
        probs = torch.softmax(mix(logp_h, logp_p, lam) / temperature, -1)
        nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]
        nxt = torch.where(done, torch.full_like(nxt, tokenizer.pad_token_id), nxt)
        for i, (tok, l) in enumerate(zip(nxt.tolist(), lam.tolist())):
            if not done[i] and tok != tokenizer.eos_token_id:
                out[i].append(tok)
                lams[i].append(l)
        done = done | (nxt == tokenizer.eos_token_id)
        after_sep = after_sep | (nxt == sep)
        if bool(done.all()):
            break
        lp, lh = plain.step(nxt), hinted.step(nxt)
    return out, [sum(x) / len(x) if x else 0.0 for x in lams]
