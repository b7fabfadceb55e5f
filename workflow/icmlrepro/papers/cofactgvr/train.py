"""One arm, every seed: GRPO fine-tuning of the grounded-VQA policy, with equal rollouts and gradient steps
in every arm; every arm of a seed starts from the same warm-started policy, which is also the KL reference.

The warm start stands in for the pretrained MLLM the paper fine-tunes: a short supervised pass
(``sft_steps`` steps of cross-entropy on the evidence cell and the answer of ``n_sft`` training scenes,
which carry the shortcut like the rest of the training split) gives a policy that grounds partly; RL then
either strengthens its grounding or lets it decay into the shortcut. It is recomputed identically in every
arm's job (same seed stream), which is cheaper than a job of its own.

Arms (the cause each one adds):
  ``grpo``         reward = answer correctness + format (a valid evidence cell): the RL baseline;
  ``grpo_cf``      + the counterfactual bonus lambda * (r_fact - r_cf) for high-quality factual rollouts
                   (answer correct, format valid), r_cf from re-answering with the PREDICTED cell masked;
  ``grpo_qpas``    + Q-PAS only (no bonus);
  ``cofactgvr``    the full method: bonus + Q-PAS;
  ``grpo_cfrand``  the control of the bonus: the same bonus, but the masked cell is a RANDOM cell other than
                   the predicted one (the intervention no longer targets the mediator).
r_fact and r_cf are the policy's probabilities of the correct answer given the factual and the
counterfactual image (the expected correctness of a re-answer; matched: same question, same evidence
location, same policy), so the gap measures how much the answer relies on the evidence.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import atomic_path, write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.rl import grpo

from .arms import ARMS
from .data import TASKS, feature_dim, load_split, question_dim
from .model import GVRPolicy, log_probs, mask_cells

def new_policy(s: dict, seed: int) -> GVRPolicy:
    """The seed's initial policy (identical in every arm; also the frozen KL reference)."""
    torch.manual_seed(derive_seed(seed, "cofactgvr", "init"))
    K = s["n_values"]
    return GVRPolicy(feature_dim(K), question_dim(K), K, s["hidden"])


def tensors(split: dict) -> tuple[torch.Tensor, ...]:
    return (torch.as_tensor(split["x"]), torch.as_tensor(split["q"]), torch.as_tensor(split["answer"]),
            torch.as_tensor(split["target_cell"]))


def other_cells(e: torch.Tensor, n_cells: int, rng: np.random.Generator) -> torch.Tensor:
    """A uniformly random cell different from ``e`` (any cell when ``e`` is "no evidence")."""
    r = torch.as_tensor(rng.integers(n_cells - 1, size=len(e)))
    r = r + ((r >= e) & (e < n_cells)).long()
    none = e >= n_cells
    r[none] = torch.as_tensor(rng.integers(n_cells, size=int(none.sum())), dtype=r.dtype)
    return r


def counterfactual_bonus(policy: GVRPolicy, x, q, e, y, answer_logits, high_quality, region, lam: float):
    """lambda * (r_fact - r_cf) on high-quality factual rollouts, 0 elsewhere; r = P(correct answer)."""
    p_fact = torch.softmax(answer_logits, -1).gather(1, y[:, None]).squeeze(1)
    p_cf = torch.softmax(policy.answer_logits(mask_cells(x, region), q, e), -1).gather(1, y[:, None]).squeeze(1)
    return lam * (p_fact - p_cf) * high_quality


def warm_start(train_split: dict, s: dict, seed: int) -> GVRPolicy:
    """The seed's starting policy: ``sft_steps`` supervised steps on the first ``n_sft`` training scenes."""
    policy = new_policy(s, seed)
    rng = seed_everything(derive_seed(seed, "cofactgvr", "sft"))
    X, Q, Y, T = (v[: s["n_sft"]] for v in tensors(train_split))
    opt = torch.optim.Adam(policy.parameters(), lr=s["lr"])
    for _ in range(s["sft_steps"]):
        i = torch.as_tensor(rng.choice(len(Y), size=min(s["prompts"] * s["group_size"], len(Y)), replace=False))
        loss = -log_probs(policy, X[i], Q[i], T[i], Y[i]).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return policy


def train(arm: str, train_split: dict, s: dict, seed: int) -> tuple[GVRPolicy, pd.DataFrame, dict]:
    """(trained policy, training log, the warm-started state it began from)."""
    region_kind, use_qpas = ARMS[arm]
    policy = warm_start(train_split, s, seed)
    start = {k: v.clone() for k, v in policy.state_dict().items()}
    ref = new_policy(s, seed).requires_grad_(False)
    ref.load_state_dict(start)
    rng = seed_everything(derive_seed(seed, "cofactgvr", "train", arm))
    opt = torch.optim.Adam(policy.parameters(), lr=s["lr"])
    cfg = grpo.GRPOConfig(clip_eps=s["clip_eps"], beta=s["beta"], epochs=s["epochs"], minibatches=s["minibatches"],
                          qpas=use_qpas, qpas_quantile=s["qpas_quantile"])
    X, Q, Y, T = tensors(train_split)
    n_cells, G, rows = X.shape[1], s["group_size"], []
    for it in range(s["iterations"]):
        idx = torch.as_tensor(np.repeat(rng.choice(len(Y), size=s["prompts"], replace=False), G))
        x, q, y, t = X[idx], Q[idx], Y[idx], T[idx]
        with torch.no_grad():
            e = torch.distributions.Categorical(logits=policy.evidence_logits(x, q)).sample()
            al = policy.answer_logits(x, q, e)
            a = torch.distributions.Categorical(logits=al).sample()
            logp_old, logp_ref = log_probs(policy, x, q, e, a), log_probs(ref, x, q, e, a)
            correct, valid = (a == y).float(), (e < n_cells).float()
            reward = correct + s["format_weight"] * valid
            bonus = torch.zeros_like(reward)
            if region_kind is not None:
                region = e if region_kind == "predicted" else other_cells(e, n_cells, rng)
                bonus = counterfactual_bonus(policy, x, q, e, y, al, correct * valid, region, s["cf_lambda"])
            adv = grpo.group_advantages(reward + bonus, G)
        st = grpo.update(lambda i: log_probs(policy, x[i], q[i], e[i], a[i]), logp_old, logp_ref, adv,
                         torch.ones_like(logp_old, dtype=torch.bool), opt, cfg, rng, G)
        rows.append({"iteration": it, "train_acc": float(correct.mean()), "evidence_hit": float((e == t).float().mean()),
                     "format": float(valid.mean()), "bonus": float(bonus.mean()), **st})
    return policy, pd.DataFrame(rows), start


def run(job) -> None:
    s, arm = job.params, job.wildcards.arm
    split = load_split(job.input.train)
    states, logs = {}, []
    for seed in s["seeds"]:
        t0 = time.perf_counter()
        policy, log, start = train(arm, split, s, seed)
        states[seed] = {"state": policy.state_dict(), "start": start, "train_seconds": time.perf_counter() - t0}
        logs.append(log.assign(seed=seed, arm=arm))
    with atomic_path(job.output.model) as tmp:
        torch.save({"arm": arm, "seeds": states, "tasks": list(TASKS)}, tmp)
    write_parquet(job.output.log, pd.concat(logs, ignore_index=True))
