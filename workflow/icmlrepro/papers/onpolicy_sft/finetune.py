"""Fine-tuning loops with equal compute: every arm takes ``steps`` AdamW updates of ``batch_size``
examples (a preference pair counts as one example) with the substrate's warm-up + cosine schedule and
gradient clipping; only the loss differs.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from icmlrepro.lm.train import collate, lr_at

from . import losses
from .arms import ARMS
from .corpora import cost_clock, encode



def _optimizer(model, lr):
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)


def _step(model, opt, loss) -> float:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss.detach())


def _logits(model, batch):
    ids, mask, labels = batch
    return model(input_ids=ids, attention_mask=mask).logits, labels


def _train_loop(model, n_data: int, steps: int, batch_size: int, lr: float, seed: int, batch_loss) -> list[float]:
    """The loop every fine-tuning arm shares (optimiser, warm-up and schedule, batch draw), so arms differ
    only in ``batch_loss(step, picked indices)``; trains ``model`` in place and returns the per-step losses."""
    rng = np.random.default_rng(seed)
    opt, warmup, out = _optimizer(model, lr), max(1, steps // 20), []
    model.train()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, lr, warmup)
        pick = rng.choice(n_data, size=min(batch_size, n_data), replace=n_data < batch_size)
        out.append(_step(model, opt, batch_loss(step, pick)))
    model.eval()
    return out


def token_finetune(model, tokenizer, rows, loss: str, steps: int, batch_size: int, lr: float, seed: int,
                   s: dict) -> list[float]:
    """SFT / DFT / IDFT on (prompt, completion) rows, in place; returns the per-step losses."""
    data = [encode(tokenizer, p, c) for p, c in rows]

    def batch_loss(step, pick):
        logits, labels = _logits(model, collate([data[j] for j in pick], tokenizer.pad_token_id))
        if loss == "idft":
            ramp = losses.idft_ramp(step, steps, s["idft"]["warmup"], s["idft"]["transition"])
            return losses.idft_loss(logits, labels, s["idft"]["beta"], s["idft"]["gamma_min"],
                                    s["idft"]["gamma_max"], ramp)
        return losses.TOKEN_LOSSES[loss](logits, labels)

    return _train_loop(model, len(data), steps, batch_size, lr, seed, batch_loss)


def _pair_logps(model, tokenizer, enc_w, enc_l, average: bool):
    both = collate(enc_w + enc_l, tokenizer.pad_token_id)
    logits, labels = _logits(model, both)
    lp = losses.sequence_logprob(logits, labels, average=average)
    return lp[: len(enc_w)], lp[len(enc_w):]


def pair_finetune(model, tokenizer, pairs, loss: str, steps: int, batch_size: int, lr: float, seed: int,
                  s: dict) -> list[float]:
    """DPO (the start model as reference: its log-probs computed once per pair before training) or SimPO on
    (prompt, chosen, rejected) triples."""
    data = [(encode(tokenizer, p, w), encode(tokenizer, p, r)) for p, w, r in pairs]
    if loss == "dpo":  # the frozen start model's log-probs, once per pair (the reference never changes)
        model.eval()
        with torch.no_grad():
            ref = [_pair_logps(model, tokenizer, [d[0] for d in data[i: i + 32]], [d[1] for d in data[i: i + 32]],
                               average=False) for i in range(0, len(data), 32)]
        ref_w_all, ref_l_all = torch.cat([r[0] for r in ref]), torch.cat([r[1] for r in ref])

    def batch_loss(step, pick):
        enc_w, enc_l = [data[j][0] for j in pick], [data[j][1] for j in pick]
        if loss == "dpo":
            idx = torch.as_tensor(pick)
            pi_w, pi_l = _pair_logps(model, tokenizer, enc_w, enc_l, average=False)
            return losses.dpo_loss(pi_w, pi_l, ref_w_all[idx], ref_l_all[idx], s["dpo"]["beta"])
        pi_w, pi_l = _pair_logps(model, tokenizer, enc_w, enc_l, average=True)
        return losses.simpo_loss(pi_w, pi_l, s["simpo"]["beta"], s["simpo"]["gamma"])

    return _train_loop(model, len(data), steps, batch_size, lr, seed, batch_loss)


def training_rows(corpus, source: str):
    """The rows of ``source`` an arm fine-tunes on (column ``train``; every row where a corpus lacks it)."""
    sub = corpus[corpus["corpus"] == source]
    return sub[sub["train"].astype(bool)] if "train" in sub else sub


def finetune(base, tokenizer, arm: str, corpus, pairs, lr: float, seed: int, s: dict):
    """A fresh copy of ``base`` fine-tuned by ``arm``: (model, losses, seconds on ``corpora.cost_clock``)."""
    source, loss = ARMS[arm]
    model = copy.deepcopy(base)
    ft = s["finetune"]
    t0 = cost_clock(base.device)
    if source == "pairs":
        triples = list(zip(pairs["prompt"], pairs["chosen"], pairs["rejected"]))
        curve = pair_finetune(model, tokenizer, triples, loss, ft["steps"], ft["batch_size"], lr, seed, s)
    else:
        sub = training_rows(corpus, source)
        curve = token_finetune(model, tokenizer, list(zip(sub["prompt"], sub["completion"])), loss, ft["steps"],
                               ft["batch_size"], lr, seed, s)
    return model, curve, cost_clock(base.device) - t0
