"""Verification feedback as training data, and the acceptance a draft gets on it.

With exact greedy verification the emitted sequence is the target's greedy output whatever the draft,
and every emitted position is scored by the target in some verification pass. So a chunk's feedback
is, per prompt, the target's output and the target's distribution at each output position (one
teacher-forced pass computes exactly what the verification passes computed). Greedy acceptance of
a draft on that sequence follows from teacher forcing the draft on it (:func:`greedy_rounds`); the
tests check it against real speculative decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from icmlrepro.lm.decode import generate


@dataclass
class Feedback:
    ids: list[list[int]]          # prompt + target output (EOS included)
    start: list[int]              # where the output starts in ids
    target_probs: list[torch.Tensor]  # [len(output), V]: target distribution for each output token


def pad_batch(seqs: list[list[int]], pad_id: int, device="cpu"):
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return ids.to(device), mask.to(device)


def model_device(model) -> torch.device:
    """Where ``model``'s parameters are: inputs are built there (the stage moved the model to
    ``core.device.torch_device()``)."""
    return next(model.parameters()).device


@torch.no_grad()
def collect(target, tok, prompts: list[str], max_new_tokens: int, batch_size: int) -> Feedback:
    """The target's greedy outputs for ``prompts`` and its distributions along them."""
    ids, start, probs = [], [], []
    for i in range(0, len(prompts), batch_size):
        batch = prompts[i: i + batch_size]
        outs = generate(target, tok, batch, max_new_tokens).tokens
        seqs, starts = [], []
        for p, out in zip(batch, outs):
            pid = tok(p)["input_ids"]
            tail = [tok.eos_token_id] if len(out) < max_new_tokens else []
            seqs.append(pid + out + tail)
            starts.append(len(pid))
        x, m = pad_batch(seqs, tok.pad_token_id, model_device(target))
        logp = torch.softmax(target(input_ids=x, attention_mask=m).logits.float(), -1)
        for j, (s, st) in enumerate(zip(seqs, starts)):
            ids.append(s)
            start.append(st)
            probs.append(logp[j, st - 1: len(s) - 1].cpu())  # position k predicts token k+1
    return Feedback(ids, start, probs)


def draft_logits(draft, fb: Feedback, idx: list[int], pad_id: int) -> list[torch.Tensor]:
    """Teacher-forced draft logits at each output position of the sequences ``idx``."""
    x, m = pad_batch([fb.ids[i] for i in idx], pad_id, model_device(draft))
    logits = draft(input_ids=x, attention_mask=m).logits
    return [logits[j, fb.start[i] - 1: len(fb.ids[i]) - 1] for j, i in enumerate(idx)]


def soft_ce(logits: torch.Tensor, target_probs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """-sum_v p_target(v) log q_draft(v), averaged over (masked) positions: the draft's loss on feedback."""
    ce = -(target_probs.to(logits.device) * F.log_softmax(logits.float(), -1)).sum(-1)
    if mask is None:
        return ce.mean()
    return (ce * mask).sum() / mask.sum().clamp(min=1)


def greedy_rounds(draft_pred: np.ndarray, output: np.ndarray, gamma: int, max_new_tokens: int | None = None) -> list[int]:
    """Accepted draft tokens per verification round when the draft proposes ``draft_pred`` (its
    teacher-forced argmax at each output position) and the target emits ``output`` (ending in EOS
    or cut at ``max_new_tokens``), as :func:`speculative.speculative_generate` does it."""
    i, rounds = 0, []
    n = len(output)
    cap = max_new_tokens if max_new_tokens is not None else n
    while i < n:
        g = min(gamma, cap - i)
        k = 0
        while k < g and i + k < n and draft_pred[i + k] == output[i + k]:
            k += 1
        rounds.append(k)
        i += k + 1
    return rounds


@torch.no_grad()
def evaluate_draft(draft, fb: Feedback, gamma: int, pad_id: int, batch_size: int = 32) -> dict:
    """Per sequence: online loss (soft CE), greedy rounds and accepted tokens, per-token acceptance."""
    losses, rounds, accepted, tokens, agree = [], 0, 0, 0, 0
    per_seq = []
    for s in range(0, len(fb.ids), batch_size):
        idx = list(range(s, min(s + batch_size, len(fb.ids))))
        for i, lg in zip(idx, draft_logits(draft, fb, idx, pad_id)):
            out = np.asarray(fb.ids[i][fb.start[i]:])
            pred = lg.argmax(-1).cpu().numpy()
            r = greedy_rounds(pred, out, gamma)
            loss = float(soft_ce(lg, fb.target_probs[i]))
            per_seq.append({"loss": loss, "rounds": len(r), "accepted": sum(r), "tokens": len(out)})
            losses.append(loss)
            rounds += len(r)
            accepted += sum(r)
            tokens += len(out)
            agree += int((pred == out).sum())
    return {"loss": float(np.mean(losses)), "acceptance_length": tokens / max(rounds, 1),
            "accept_rate": agree / max(tokens, 1), "rounds": rounds, "tokens": tokens, "per_seq": per_seq}
