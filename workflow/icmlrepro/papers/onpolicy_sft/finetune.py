"""Fine-tuning loops with equal compute: every arm takes ``steps`` AdamW updates of ``batch_size``
examples (a preference pair counts as one example) with the substrate's warm-up + cosine schedule and
gradient clipping; only the loss differs. DPO and SimPO spend the first ``finetune.pref_sft.steps`` of their
updates on SFT of the chosen completions (their papers' recipe; the SFT model is DPO's reference), the rest on
the preference loss, on pairs re-sampled from that SFT model when ``finetune.pref_sft.pairs`` is ``sft`` (DPO's
recipe: completions drawn from pi_ref = pi_SFT).
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from icmlrepro.core.seeding import derive_seed
from icmlrepro.lm.train import collate, lr_at

from . import losses
from .arms import ARMS
from .corpora import cost_clock, encode, own_pairs, sample



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
                  s: dict, reference=None) -> list[float]:
    """DPO or SimPO on (prompt, chosen, rejected) triples, in place. DPO's frozen reference is ``reference``
    (default: ``model`` as it starts); its log-probs are computed once per pair before training."""
    data = [(encode(tokenizer, p, w), encode(tokenizer, p, r)) for p, w, r in pairs]
    if loss == "dpo":
        ref_w_all, ref_l_all = reference_logps(model if reference is None else reference, tokenizer, data)

    def batch_loss(step, pick):
        enc_w, enc_l = [data[j][0] for j in pick], [data[j][1] for j in pick]
        if loss == "dpo":
            idx = torch.as_tensor(pick)
            pi_w, pi_l = _pair_logps(model, tokenizer, enc_w, enc_l, average=False)
            return losses.dpo_loss(pi_w, pi_l, ref_w_all[idx], ref_l_all[idx], s["dpo"]["beta"])
        pi_w, pi_l = _pair_logps(model, tokenizer, enc_w, enc_l, average=True)
        return losses.simpo_loss(pi_w, pi_l, s["simpo"]["beta"], s["simpo"]["gamma"])

    return _train_loop(model, len(data), steps, batch_size, lr, seed, batch_loss)


def reference_logps(reference, tokenizer, data):
    """The frozen reference's summed log-probs of every (chosen, rejected) encoded pair: two [n] tensors."""
    was_training = reference.training
    reference.eval()
    with torch.no_grad():
        ref = [_pair_logps(reference, tokenizer, [d[0] for d in data[i: i + 32]], [d[1] for d in data[i: i + 32]],
                           average=False) for i in range(0, len(data), 32)]
    reference.train(was_training)
    return torch.cat([r[0] for r in ref]), torch.cat([r[1] for r in ref])


def pref_sft_stage(base, tokenizer, pairs, ft: dict, seed: int, s: dict, tasks=None):
    """Stage 1 of the DPO / SimPO recipe (Rafailov et al. 2023, Sec. 4; Meng et al. 2024): a copy of ``base``
    fine-tuned by SFT on the chosen completions ("SFT on chosen") for ``ft["pref_sft"]["steps"]`` of the arm's
    updates at rate ``ft["pref_sft"]["lr"]``; with ``ft["pref_sft"]["pairs"] == "sft"`` (and the training
    ``tasks``), the preference stage's pairs are then re-sampled from that SFT model (``corpora.samples_per_problem``
    at ``corpora.temperature`` per problem; own first correct vs own first wrong sample), as DPO draws its
    completions from pi_ref = pi_SFT; else (or when the SFT model's samples give no pair) the given ``pairs``.
    Returns (the SFT model, its seconds on ``corpora.cost_clock`` with the re-sampling, the stage-2 triples,
    where they came from: "sft" or "base")."""
    model = copy.deepcopy(base)
    t0 = cost_clock(base.device)
    token_finetune(model, tokenizer, [(p, w) for p, w, _ in pairs], "sft", int(ft["pref_sft"]["steps"]),
                   ft["batch_size"], float(ft["pref_sft"]["lr"]), seed, s)
    stage_pairs, source = list(pairs), "base"
    if ft["pref_sft"].get("pairs", "base") == "sft" and tasks:
        c = s["corpora"]
        resampled = own_pairs(tasks, sample(model, tokenizer, tasks, int(c["samples_per_problem"]), c,
                                            derive_seed(seed, "pref_pairs")))
        if resampled:
            stage_pairs, source = resampled, "sft"
    return model, cost_clock(base.device) - t0, stage_pairs, source


def training_rows(corpus, source: str):
    """The rows of ``source`` an arm fine-tunes on (column ``train``; every row where a corpus lacks it)."""
    sub = corpus[corpus["corpus"] == source]
    return sub[sub["train"].astype(bool)] if "train" in sub else sub


def finetune(base, tokenizer, arm: str, corpus, pairs, lr: float, seed: int, s: dict, stage_cache: dict | None = None,
             stage_seed: int | None = None, tasks=None):
    """A fresh model fine-tuned by ``arm`` at rate ``lr``: (model, losses, seconds on ``corpora.cost_clock``).

    Preference arms (DPO, SimPO) run two stages inside the arm's ``steps`` updates when ``finetune.pref_sft``
    gives stage-1 steps: SFT on the chosen completions (``pref_sft_stage``), then the preference loss at ``lr``
    for the remaining updates, from the SFT model and (DPO) with the SFT model as the frozen reference, on pairs
    re-sampled from the SFT model on the training ``tasks`` when ``finetune.pref_sft.pairs`` is ``sft``. Stage 1
    (with the re-sampling) depends on neither ``lr`` nor the loss, so it runs once per seed (batch draw
    ``stage_seed``, default ``seed``; kept in ``stage_cache``) and DPO and SimPO start from the same SFT model and
    pairs, as in both papers; its seconds are added to every rate's of both arms; ``lr`` is the preference
    stage's rate."""
    source, loss = ARMS[arm]
    ft = s["finetune"]
    steps = int(ft["steps"])
    if source == "pairs":
        triples = list(zip(pairs["prompt"], pairs["chosen"], pairs["rejected"]))
        sft_steps = int((ft.get("pref_sft") or {}).get("steps", 0))
        if not 0 <= sft_steps < steps:
            raise ValueError(f"finetune.pref_sft.steps must be in [0, {steps}): {sft_steps}")
        start, stage_secs = base, 0.0
        if sft_steps:
            cache = {} if stage_cache is None else stage_cache
            key = ("pref_sft", seed if stage_seed is None else stage_seed)
            if key not in cache:
                cache[key] = pref_sft_stage(base, tokenizer, triples, ft, key[1], s, tasks)
            start, stage_secs, triples, _ = cache[key]
        model = copy.deepcopy(start)
        t0 = cost_clock(base.device)
        curve = pair_finetune(model, tokenizer, triples, loss, steps - sft_steps, ft["batch_size"], lr, seed, s,
                              reference=start)
        return model, curve, stage_secs + cost_clock(base.device) - t0
    model = copy.deepcopy(base)
    t0 = cost_clock(base.device)
    sub = training_rows(corpus, source)
    curve = token_finetune(model, tokenizer, list(zip(sub["prompt"], sub["completion"])), loss, steps,
                           ft["batch_size"], lr, seed, s)
    return model, curve, cost_clock(base.device) - t0
