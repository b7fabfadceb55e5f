"""One arm, every seed: GRPO fine-tuning of the grounded-VQA policy, with equal rollouts and gradient steps
in every arm; every arm of a seed starts from the same warm-started policy, which is also the KL reference.

The warm start stands in for the pretrained MLLM the paper fine-tunes: a short supervised pass
(``sft_steps`` steps of cross-entropy on the evidence cell and the answer of ``n_sft`` training scenes,
which carry the shortcut like the rest of the training split) gives a policy that grounds partly; RL then
either strengthens its grounding or lets it decay into the shortcut. It is recomputed identically in every
arm's job (same seed stream), which is cheaper than a job of its own.

Tuning (the same for every arm): the GRPO learning rate is picked from ``lr_grid`` (four rates around the
former fixed one) by greedy answer accuracy on the ``val`` split (fresh scenes from the training law, cue
included; never a test split) after training the FIRST seed with each rate; ties go to the smaller rate.
The picked rate then trains every seed (the first seed's run is reused). The warm start's rate ``sft_lr``,
lambda and the Q-PAS quantile are fixed, not tuned: the warm start is shared by all arms, and lambda and the
quantile exist only in some arms, so tuning them would give those arms a grid the baseline lacks.

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

from icmlrepro.core.io import write_json, write_parquet, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.core.tuning import at_grid_edge
from icmlrepro.rl import grpo

from .arms import ARMS
from .data import TASKS, feature_dim, load_split, question_dim
from .model import GVRPolicy, greedy_act, log_probs, mask_cells

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
    opt = torch.optim.Adam(policy.parameters(), lr=s["sft_lr"])
    for _ in range(s["sft_steps"]):
        i = torch.as_tensor(rng.choice(len(Y), size=min(s["prompts"] * s["group_size"], len(Y)), replace=False))
        loss = -log_probs(policy, X[i], Q[i], T[i], Y[i]).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return policy


def train(arm: str, train_split: dict, s: dict, seed: int, lr: float) -> tuple[GVRPolicy, pd.DataFrame, dict]:
    """(trained policy, training log, the warm-started state it began from); GRPO's Adam rate ``lr``."""
    region_kind, use_qpas = ARMS[arm]
    policy = warm_start(train_split, s, seed)
    start = {k: v.clone() for k, v in policy.state_dict().items()}
    ref = new_policy(s, seed).requires_grad_(False)
    ref.load_state_dict(start)
    rng = seed_everything(derive_seed(seed, "cofactgvr", "train", arm))
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
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


def val_accuracy(policy: GVRPolicy, split: dict) -> float:
    """Greedy answer accuracy on a split (the tuning score; same decoding as the test evaluation)."""
    x, q, y, _ = tensors(split)
    return float((greedy_act(policy, x, q)[1] == y).float().mean())


def timed_train(arm: str, train_split: dict, s: dict, seed: int, lr: float) -> dict:
    t0 = time.perf_counter()
    policy, log, start = train(arm, train_split, s, seed, lr)
    return {"policy": policy, "log": log, "start": start, "train_seconds": time.perf_counter() - t0}


def tune(arm: str, train_split: dict, val_split: dict, s: dict, seed: int) -> tuple[dict, dict]:
    """Train ``seed`` with every rate of ``lr_grid``; (the run at the picked rate, the tuning record)."""
    grid = sorted(s["lr_grid"])
    runs = {lr: timed_train(arm, train_split, s, seed, lr) for lr in grid}
    rows = [{"lr": lr, "val_acc": val_accuracy(r["policy"].eval(), val_split), "train_seconds": r["train_seconds"]}
            for lr, r in runs.items()]
    best = max(rows, key=lambda r: (r["val_acc"], -r["lr"]))["lr"]  # ties: the smaller rate
    record = {"arm": arm, "seed": seed, "grid": rows, "chosen_lr": best,
              "at_grid_edge": at_grid_edge(best, grid)}
    return runs[best], record


def run(job) -> None:
    s, arm = job.params, job.wildcards.arm
    split, val = load_split(job.input.train), load_split(job.input.val)
    seeds = list(s["seeds"])
    first, tuning = tune(arm, split, val, s, seeds[0])
    states, logs = {}, []
    for seed in seeds:
        r = first if seed == seeds[0] else timed_train(arm, split, s, seed, tuning["chosen_lr"])
        states[seed] = {"state": r["policy"].state_dict(), "start": r["start"], "train_seconds": r["train_seconds"]}
        logs.append(r["log"].assign(seed=seed, arm=arm, lr=tuning["chosen_lr"]))
    write_torch(job.output.model, {"arm": arm, "seeds": states, "tasks": list(TASKS), "lr": tuning["chosen_lr"]})
    write_parquet(job.output.log, pd.concat(logs, ignore_index=True))
    write_json(job.output.tuning, tuning)
