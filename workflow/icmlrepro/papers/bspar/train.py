"""One arm, every seed: policy-gradient training of the edit agent with equal iterations, batch, horizon,
optimiser and initial weights in every arm (same seed -> same initial policy in every arm: a random init followed
by the instruction warm start, see ``warm_start``). Every arm's learning rate is first tuned on the same grid
(``lr_grid``) on the tuning draw (``tune_lr``), then each seed is trained on its own task draw at that rate.

Arms (what each one adds or removes):
- ``sparse``: REINFORCE on the judge's one noisy accept bit per rollout (no B-Spar component).
- ``dense``: the same plus the dense proxy (the no-reference quality gain of every edit, weight ``proxy_weight``),
  the usual remedy for sparse feedback that the abstract says biases the gradient toward proxy artefacts.
- ``bspar``: prior-guided trajectory sampling + Bayesian reward model + anchor regularisation.
- ``bspar_no_prior`` / ``bspar_no_bayes`` / ``bspar_no_anchor``: B-Spar with one component removed.

Prior-guided sampling draws rollouts from (1 - beta_t) pi + beta_t pi_0 (beta_t decays linearly from
``prior_weight`` to 0 at half of training) and corrects the gradient with the per-step importance ratio
pi / mu (clipped at 2). The Bayesian reward model (reward_model.py) is refitted every ``rm_every`` iterations on
the last ``rm_buffer`` final states and their bits; the return-to-go of step t is then
bit + P(accept | s_T) - P(accept | s_t). Anchor regularisation keeps the ``anchors`` best accepted rollouts seen
so far (by bit + posterior acceptance) and adds ``anchor_weight`` x KL(smoothed anchor actions || pi) on their
states: updates are pulled toward high-reward trajectories, and the label smoothing keeps every action's
probability away from 0 (no early collapse onto one tool).
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.core.tuning import pick_with_ties

from . import data as D
from .agent import STATE_DIM, instruction_prior, judge, new_policy, rollout
from .reward_model import BayesLogistic
from .tools import N_ACTIONS

ARMS = {  # arm: (dense proxy, prior-guided sampling, Bayesian reward model, anchor regularisation)
    "sparse": (False, False, False, False),
    "dense": (True, False, False, False),
    "bspar": (False, True, True, True),
    "bspar_no_prior": (False, False, True, True),
    "bspar_no_bayes": (False, True, False, True),
    "bspar_no_anchor": (False, True, True, False),
}


def entropy(logits: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits, -1)
    return -(logp.exp() * logp).sum(-1)


def returns_to_go(bits: torch.Tensor, ro, potential=None, proxy_weight: float = 0.0) -> torch.Tensor:
    """G (steps, B): the bit at the end, plus the dense proxy's later increments, plus the change of the
    reward model's acceptance probability from this state to the final one (potential-based shaping)."""
    T = len(ro.actions)
    G = bits[None].repeat(T, 1)
    if proxy_weight:
        gains = torch.stack(ro.proxy_gain)
        G = G + proxy_weight * gains.flip(0).cumsum(0).flip(0)
    if potential is not None:
        G = G + potential[-1][None] - potential[:-1]
    return G


def anchor_loss(policy, anchors: list, smoothing: float, gen: torch.Generator, max_pairs: int = 256):
    """KL(anchor actions smoothed || pi) on anchor states, up to ``max_pairs`` sampled state-action pairs."""
    obs = torch.cat([a[0] for a in anchors])
    act = torch.cat([a[1] for a in anchors])
    if len(obs) > max_pairs:
        idx = torch.randperm(len(obs), generator=gen)[:max_pairs]
        obs, act = obs[idx], act[idx]
    return F.cross_entropy(policy(obs), act, label_smoothing=smoothing)


def update_anchors(anchors: list, ro, scores: np.ndarray, accepted: np.ndarray, k: int) -> list:
    """Keep the ``k`` best accepted trajectories so far, each as (states, actions) of its taken steps."""
    for i in np.flatnonzero(accepted):
        m = torch.stack([al[i] for al in ro.alive])
        obs = torch.stack([o[i] for o in ro.obs])[m]
        act = torch.stack([a[i] for a in ro.actions])[m]
        anchors.append((obs, act, float(scores[i])))
    anchors.sort(key=lambda a: -a[2])
    return anchors[:k]


def warm_start(policy: torch.nn.Module, tr: dict, s: dict, seed: int) -> torch.nn.Module:
    """Instruction-following initialisation shared by every trained arm (the stand-in for an MLLM that already
    reads the instruction): ``warm_steps`` Adam steps of cross-entropy to the instruction prior pi_0 on the states
    that ``warm_rollouts`` sampled pi_0 rollouts visit on the training tasks. No judge, no target: the policy
    learns which tools the words name and to stop later rather than sooner, nothing about amounts."""
    gen = torch.Generator().manual_seed(derive_seed(seed, "bspar", "warm"))
    H, obs, want = s["horizon"], [], []
    for _ in range(s["warm_rollouts"]):
        ro = rollout(lambda o: torch.zeros(len(o), N_ACTIONS), tr["source"], tr["instr"], H, gen, prior_weight=1.0)
        for t, (o, alive) in enumerate(zip(ro.obs, ro.alive)):
            obs.append(o[alive]), want.append(instruction_prior(tr["instr"][alive], t, H))
    obs, want = torch.cat(obs), torch.cat(want)
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    for _ in range(s["warm_steps"]):
        idx = torch.randint(0, len(obs), (min(256, len(obs)),), generator=gen)
        loss = F.cross_entropy(policy(obs[idx]), want[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return policy


def initial_policy(tr: dict, s: dict, seed: int) -> torch.nn.Module:
    """The same starting weights for every arm of a seed: random init, then the instruction warm start."""
    return warm_start(new_policy(s["hidden"], derive_seed(seed, "bspar", "init")), tr, s, seed)


def train_seed(arm: str, tasks: dict, s: dict, seed: int) -> dict:
    """``tasks``: one draw's splits (``train``, ``val`` keys, see data.draw)."""
    dense, prior, bayes, anchor = ARMS[arm]
    rng = seed_everything(derive_seed(seed, "bspar", "train", arm))
    gen = torch.Generator().manual_seed(derive_seed(seed, "bspar", "sample", arm))
    tr, val = tasks["train"], tasks["val"]
    policy = initial_policy(tr, s, seed)
    opt = torch.optim.Adam(policy.parameters(), lr=s["lr"])
    val_rng = np.random.default_rng(derive_seed(seed, "bspar", "val_judge"))
    rm = BayesLogistic(D.N_INSTR, s["rm_alpha"]) if bayes else None
    buf_x, buf_y, anchors, curve = [], [], [], []
    H, iters = s["horizon"], s["iterations"]
    for it in range(iters):
        beta = s["prior_weight"] * max(0.0, 1 - it / (0.5 * iters)) if prior else 0.0
        idx = torch.from_numpy(rng.choice(len(tr["source"]), s["batch"], replace=False))
        ro = rollout(policy, tr["source"][idx], tr["instr"][idx], H, gen, beta, proxy=dense)
        _, bits_np = judge(ro.final, tr["target"][idx], s["judge_threshold"], s["judge_noise"], rng)
        bits = torch.from_numpy(bits_np)
        potential, scores = None, bits_np.copy()
        if rm is not None:
            states = [o[:, :STATE_DIM] for o in ro.obs] + [ro.final_state]
            potential = torch.stack([rm.predict(x) for x in states])
            scores = scores + potential[-1].numpy()
            buf_x.append(ro.final_state), buf_y.append(bits)
            buf_x, buf_y = buf_x[-s["rm_buffer"] // s["batch"]:], buf_y[-s["rm_buffer"] // s["batch"]:]
        G = returns_to_go(bits, ro, potential, s["proxy_weight"] if dense else 0.0)
        alive = torch.stack(ro.alive).float()
        n_alive = alive.sum(0).clamp(min=1)
        base = (G * alive).sum(1, keepdim=True) / alive.sum(1, keepdim=True).clamp(min=1)
        A = (G - base) * alive
        A = A / (A[alive.bool()].std() + 1e-6) if alive.sum() > 1 else A
        obs, act = torch.stack(ro.obs), torch.stack(ro.actions)
        logits = policy(obs.reshape(-1, obs.shape[-1])).reshape(*act.shape, N_ACTIONS)
        logp = torch.log_softmax(logits, -1).gather(-1, act[..., None])[..., 0]
        ratio = (logp.detach().exp() / torch.stack(ro.behaviour)).clamp(max=2.0)
        loss = -(ratio * A * logp / n_alive).sum() / len(idx)
        if anchor and anchors:
            loss = loss + s["anchor_weight"] * anchor_loss(policy, anchors, s["anchor_smoothing"], gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if anchor:
            anchors = update_anchors(anchors, ro, scores, bits_np > 0, s["anchors"])
        if rm is not None and (it + 1) % s["rm_every"] == 0:
            rm.fit(torch.cat(buf_x), torch.cat(buf_y))
        with torch.no_grad():
            ent = float((entropy(logits) * alive).sum() / alive.sum())
        row = {"iteration": it, "accept_rate": float(bits_np.mean()), "entropy": ent,
               "edits": float(ro.n_edits().mean())}
        if it % s["eval_every"] == 0 or it == iters - 1:
            gro = rollout(policy, val["source"], val["instr"], H, None)
            d, _ = judge(gro.final, val["target"], s["judge_threshold"], 0.0, None)
            noisy = d + s["judge_noise"] * val_rng.standard_normal(len(d))
            row["val_success"] = float((d < s["judge_threshold"]).mean())
            row["val_accept"] = float((noisy < s["judge_threshold"]).mean())  # the judge's bits: what tuning reads
            row["val_delta_e"] = float(d.mean())
        curve.append(row)
    return {"state": policy.state_dict(), "curve": curve, "reward_model": rm.state() if rm is not None else None}


def tuning_score(curve: list) -> float:
    """The judge's accept rate of the greedy policy on the validation tasks, averaged over the evaluations in the
    last quarter of training (what a practitioner with only the judge's bits can select on)."""
    n = len(curve)
    return float(np.mean([r["val_accept"] for r in curve if "val_accept" in r and r["iteration"] >= 0.75 * (n - 1)]))


def tune_lr(arm: str, tune_draw: dict, s: dict) -> tuple[float, dict]:
    """The learning rate of ``lr_grid`` with the best tuning score on the tuning draw (its own crops of the
    training photos, never a seed's test photos); exact ties go to the default ``lr``
    (``core.tuning.pick_with_ties``). Same grid for every arm."""
    grid, scores = [float(v) for v in s["lr_grid"]], {}
    for lr in grid:
        scores[lr] = tuning_score(train_seed(arm, tune_draw, s | {"lr": lr}, D.TUNE_SEED)["curve"])
    return pick_with_ties(grid, [scores[lr] for lr in grid], float(s["lr"])).value, scores


def run(job) -> None:
    s, arm = job.params, job.wildcards.arm
    tasks = D.load(job.input.tasks)
    t0 = time.perf_counter()
    lr, scores = tune_lr(arm, D.draw(tasks, "tune"), s)
    tune_seconds = time.perf_counter() - t0
    runs = {}
    for seed in s["seeds"]:
        t0 = time.perf_counter()
        runs[seed] = train_seed(arm, D.draw(tasks, seed), s | {"lr": lr}, seed) | {
            "train_seconds": time.perf_counter() - t0}
    from icmlrepro.core.io import write_torch

    write_torch(job.output.runs, {"arm": arm, "runs": runs, "lr": lr, "lr_scores": scores,
                                  "tune_seconds": tune_seconds})
