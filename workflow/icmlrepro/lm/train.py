"""Training recipe for the substrate models (target and draft): next-token loss on the target text.

Recipe: AdamW (betas 0.9/0.95, weight decay 0.01), linear warm-up then cosine decay, gradient
clipping at 1.0, batches of examples of similar length (less padding), loss on the chain of
thought, the answer and the end-of-sequence token only (the prompt is given, never predicted).
Deterministic: one seeded generator drives batching; torch runs deterministic CPU kernels.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from .tasks import Task


def encode(tokenizer, tasks: list[Task]) -> list[tuple[list[int], int]]:
    """(token ids with EOS, index where the target starts) per task."""
    out = []
    for t in tasks:
        prompt = tokenizer(t.prompt)["input_ids"]
        full = tokenizer(t.text)["input_ids"] + [tokenizer.eos_token_id]
        if full[: len(prompt)] != prompt:
            raise ValueError(f"prompt does not tokenize as a prefix of its example: {t.prompt!r}")
        out.append((full, len(prompt)))
    return out


def collate(batch: list[tuple[list[int], int]], pad_id: int):
    """Right-padded ids, attention mask and labels (-100 on prompt and padding)."""
    n = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), n), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), n), -100, dtype=torch.long)
    mask = torch.zeros((len(batch), n), dtype=torch.long)
    for i, (seq, start) in enumerate(batch):
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        labels[i, start: len(seq)] = torch.tensor(seq[start:])
    return ids, mask, labels


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def train(model, tokenizer, tasks: list[Task], steps: int, batch_size: int, lr: float, seed: int,
          log_every: int = 25, logger=None) -> list[dict]:
    """Train in place; returns the training curve (step, loss, lr, seconds)."""
    rng = np.random.default_rng(seed)
    data = encode(tokenizer, tasks)
    order = np.argsort([len(ids) for ids, _ in data], kind="stable")
    buckets = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]  # similar lengths
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    warmup = max(1, steps // 20)
    model.train()
    curve, t0, running = [], time.perf_counter(), []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup)
        ids, mask, labels = collate([data[j] for j in buckets[int(rng.integers(len(buckets)))]],
                                    tokenizer.pad_token_id)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running.append(loss.item())
        if (step + 1) % log_every == 0 or step + 1 == steps:
            entry = {"step": step + 1, "loss": float(np.mean(running)), "lr": opt.param_groups[0]["lr"],
                     "seconds": time.perf_counter() - t0}
            curve.append(entry)
            running = []
            if logger:
                logger.info("step %(step)d loss %(loss).4f lr %(lr).2e %(seconds).1fs", entry)
    model.eval()
    return curve
