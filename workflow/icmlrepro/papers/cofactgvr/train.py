"""One arm, every seed: GRPO fine-tuning of the grounded-VQA policy, with equal rollouts and gradient steps
in every arm; every arm of a seed starts from the same warm-started policy, which is also the KL reference.

The warm start stands in for the pretrained MLLM the paper fine-tunes: a short supervised pass
(``sft_steps`` steps of cross-entropy on the evidence cell and the answer of ``n_sft`` training scenes,
which carry the shortcut like the rest of the training split) gives a policy that grounds partly; RL then
either strengthens its grounding or lets it decay into the shortcut. It is recomputed identically in every
arm's job (same seed stream), which is cheaper than a job of its own.

Tuning (the same for every arm): the GRPO learning rate is picked from ``lr_grid`` by greedy answer accuracy
on the ``val`` split (fresh scenes from the training law, cue included; never a test split) after training the
FIRST seed with each rate (on that seed's own data). Rates whose val accuracy lies within one standard error
(sqrt(p (1 - p) / n_val) at the best rate p) of the best are tied: the tie goes to ``lr_default`` (the former
fixed rate, the same for every arm) when it is tied, else to the tied rate nearest to it on the log scale; the
number of rates tied with the best is recorded. The picked rate then trains every seed (the first seed's run
is reused). The warm start's rate ``sft_lr``,
lambda and the Q-PAS quantile are fixed, not tuned: the warm start is shared by all arms, and lambda and the
quantile exist only in some arms, so tuning them would give those arms a grid the baseline lacks.

Arms (the cause each one adds):
  ``grpo``         reward = answer correctness + format (a valid evidence cell): the RL baseline;
  ``grpo_cf``      + the counterfactual bonus lambda * (r_fact - r_cf) for high-quality factual rollouts
                   (answer correct, format valid), r_cf from re-answering with the PREDICTED cell masked;
  ``grpo_qpas``    + Q-PAS only (no bonus);
  ``cofactgvr``    the full method: bonus + Q-PAS;
  ``grpo_cfshuf``  the control of the bonus: the same bonus values (predicted cell masked), permuted at random
                   among the high-quality rollouts of each question's group: the same extra reward per group, the
                   same scale and gating, but a rollout's bonus no longer measures its own reliance on its evidence;
  ``grpo_cfrand``  (not in the default arms) the bonus with the masked cell a RANDOM cell other than the predicted
                   one, of the same kind (object / background) as the predicted one. It was the control until the
                   audit of issue 39: masking a cell off the evidence pays answers that rely on cells other than
                   the evidence, so it is the method's opposite rather than the method without its cause (at
                   default its evidence IoU fell from the warm start's 0.8 to 0.35-0.81, its shortcut rate rose to
                   0.13-0.50, and its accuracy gain over the warm start was undecided).
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
from icmlrepro.core.tuning import accuracy_se, at_grid_edge, pick_with_ties
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


def occupancy(split: dict) -> torch.Tensor:
    """(scenes, n_cells) bool: which cells hold an object (the rest show the background tint)."""
    n, n_cells = split["x"].shape[:2]
    occ = np.zeros((n, n_cells), dtype=bool)
    occ[np.arange(n)[:, None], split["cells"]] = True
    return torch.as_tensor(occ)


def other_cells(e: torch.Tensor, occupied: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """A uniformly random cell different from ``e`` of the same kind (object cell / background cell) as ``e``:
    masking it perturbs the global context as much as masking ``e`` would, but not the evidence itself. Any
    other cell when ``e`` has no other cell of its kind; any cell when ``e`` is "no evidence"."""
    n, n_cells = occupied.shape
    rows = torch.arange(n)
    valid = e < n_cells
    same = occupied == occupied[rows, e.clamp_max(n_cells - 1)][:, None]
    cand = same & valid[:, None]
    cand[rows[valid], e[valid]] = False
    lonely = ~cand.any(1)  # no other cell of e's kind (or no evidence): any cell but e
    cand[lonely] = True
    cand[rows[lonely & valid], e[lonely & valid]] = False
    score = torch.as_tensor(rng.random((n, n_cells))).masked_fill(~cand, -1.0)
    return score.argmax(1)


def counterfactual_bonus(policy: GVRPolicy, x, q, e, y, answer_logits, high_quality, region, lam: float):
    """lambda * (r_fact - r_cf) on high-quality factual rollouts, 0 elsewhere; r = P(correct answer)."""
    p_fact = torch.softmax(answer_logits, -1).gather(1, y[:, None]).squeeze(1)
    p_cf = torch.softmax(policy.answer_logits(mask_cells(x, region), q, e), -1).gather(1, y[:, None]).squeeze(1)
    return lam * (p_fact - p_cf) * high_quality


def shuffle_in_groups(bonus: torch.Tensor, high_quality: torch.Tensor, G: int, rng: np.random.Generator) -> torch.Tensor:
    """The bonus values permuted at random among the high-quality rollouts of each group of ``G`` (the others keep
    0): each group's total bonus is kept, the link between a rollout and its own counterfactual gap is cut."""
    out = bonus.clone()
    hq = high_quality.bool().view(-1, G)
    for g in range(hq.shape[0]):
        idx = torch.nonzero(hq[g]).squeeze(1) + g * G
        if len(idx) > 1:
            out[idx] = bonus[idx[torch.as_tensor(rng.permutation(len(idx)))]]
    return out


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
    OCC = occupancy(train_split)
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
                region = other_cells(e, OCC[idx], rng) if region_kind == "random" else e
                bonus = counterfactual_bonus(policy, x, q, e, y, al, correct * valid, region, s["cf_lambda"])
                if region_kind == "shuffled":
                    bonus = shuffle_in_groups(bonus, correct * valid, G, rng)
            adv = grpo.group_advantages(reward + bonus, G)
        st = grpo.update(lambda i: log_probs(policy, x[i], q[i], e[i], a[i]), logp_old, logp_ref, adv,
                         torch.ones_like(logp_old, dtype=torch.bool), opt, cfg, rng, G)
        rows.append({"iteration": it, "train_acc": float(correct.mean()), "evidence_hit": float((e == t).float().mean()),
                     "format": float(valid.mean()), "bonus": float(bonus.mean()), **st})
        if diverged(policy):  # a rate too large for this arm: stop here (the next sampling step would fail on NaN)
            rows[-1]["diverged"] = 1.0
            break
    return policy, pd.DataFrame(rows), start


def diverged(policy: GVRPolicy) -> bool:
    """A parameter went non-finite (Adam at a rate too large for the arm)."""
    return not all(bool(torch.isfinite(p).all()) for p in policy.parameters())


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
    rows = []
    for lr, r in runs.items():  # a diverged run scores 0 on validation: picked only if every rate diverged
        bad = diverged(r["policy"])
        rows.append({"lr": lr, "val_acc": 0.0 if bad else val_accuracy(r["policy"].eval(), val_split),
                     "train_seconds": r["train_seconds"], "diverged": bad})
    best, se, tied = pick_rate(rows, len(val_split["answer"]), s["lr_default"])
    record = {"arm": arm, "seed": seed, "grid": rows, "chosen_lr": best, "val_acc_se": se, "tied_rates": tied,
              "ties": len(tied) - 1, "at_grid_edge": at_grid_edge(best, grid)}
    return runs[best], record


def pick_rate(rows: list[dict], n_val: int, default: float) -> tuple[float, float, list[float]]:
    """(picked rate, standard error of the best val accuracy, the rates tied with the best): a rate is tied when
    its val accuracy is within one standard error of the best; among tied rates the default wins, else the one
    nearest to it on the log scale (then the smaller)."""
    se = accuracy_se(max(r["val_acc"] for r in rows), n_val)
    chosen = pick_with_ties([r["lr"] for r in rows], [r["val_acc"] for r in rows], default, tolerance=se)
    return chosen.value, se, chosen.tied


def run(job) -> None:
    s, arm = job.params, job.wildcards.arm
    seeds = list(s["seeds"])
    first, tuning = tune(arm, load_split(job.input.train, seeds[0]), load_split(job.input.val, seeds[0]), s, seeds[0])
    states, logs = {}, []
    for seed in seeds:  # each seed trains on its own draw of the world
        r = first if seed == seeds[0] else timed_train(arm, load_split(job.input.train, seed), s, seed,
                                                       tuning["chosen_lr"])
        states[seed] = {"state": r["policy"].state_dict(), "start": r["start"], "train_seconds": r["train_seconds"]}
        logs.append(r["log"].assign(seed=seed, arm=arm, lr=tuning["chosen_lr"]))
    write_torch(job.output.model, {"arm": arm, "seeds": states, "tasks": list(TASKS), "lr": tuning["chosen_lr"]})
    write_parquet(job.output.log, pd.concat(logs, ignore_index=True))
    write_json(job.output.tuning, tuning)
