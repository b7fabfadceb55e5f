"""GRPO of one reward, one job looping over the seeds, each seed from that seed's SFT model, on the long-tailed
training set; the learning rate is picked from the grid on the first seed's validation MAE (tuning.py).

Every RL arm gets the same steps, prompts per step, answers per prompt (the group), temperature, optimiser,
clip range, KL weight (fixed, not tuned) and learning-rate grid, and the same prompt batches (one stream per seed, shared by the rewards); only the
reward differs (the paper's plug-and-play). The reference policy of the KL term is the SFT model. With
``rl.freeze_encoder`` the image encoder (CNN and its projection to the prefix) keeps its SFT weights during GRPO
and only the Qwen3 decoder learns, as MLLM RL recipes often freeze the vision tower; the same for every reward.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from icmlrepro.core.io import read_npz, write_json
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.rl import grpo

from .data import seed_arrays
from .model import answer_mask, parse_answers
from .rewards import total_rewards
from .sft import load_model, save_model, seed_file
from .tuning import tune_then_train, val_errors

REWARDS = ("pointwise", "ccc", "ccc_solo")


def train_rl(model, x: np.ndarray, y: np.ndarray, s: dict, reward: str, seed: int, lr: float):
    """GRPO steps on ``model`` (in place); returns the per-step log (mean reward, well-formed share, KL...)."""
    c = s["rl"]
    seed_everything(derive_seed(seed, "ccc_grpo", "rl", reward))
    batches = np.random.default_rng(derive_seed(seed, "ccc_grpo", "rl", "prompts"))   # same in every arm
    sampler = torch.Generator().manual_seed(derive_seed(seed, "ccc_grpo", "rl", "rollouts"))
    update_rng = np.random.default_rng(derive_seed(seed, "ccc_grpo", "rl", "minibatches"))
    if c.get("freeze_encoder"):
        for p in model.encoder.parameters():
            p.requires_grad_(False)
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    cfg = grpo.GRPOConfig(clip_eps=c["clip_eps"], beta=c["beta"], epochs=c["epochs"], minibatches=c["minibatches"])
    K, xt, log = c["group"], torch.as_tensor(x), []
    for step in range(c["steps"]):
        b = batches.choice(len(y), size=c["prompts"], replace=False)
        imgs = xt[b].repeat_interleave(K, 0)                   # rollouts laid out group by group
        model.eval()
        with torch.no_grad():
            prefix = model.image_prefix(imgs)
            answers = model.generate(prefix, greedy=False, temperature=c["temperature"], generator=sampler)
            logp_old = model.answer_logp(prefix, answers)
            logp_ref = ref.answer_logp(ref.image_prefix(imgs), answers)
        q = parse_answers(answers).reshape(-1, K)
        r = total_rewards(reward, q, y[b], float(s["y_max"]))
        adv = grpo.group_advantages(torch.as_tensor(r.reshape(-1), dtype=torch.float32), K)
        mask = answer_mask(answers)
        model.train()
        st = grpo.update(lambda idx: model.answer_logp(model.image_prefix(imgs[idx]), answers[idx]),
                         logp_old, logp_ref, adv, mask, opt, cfg, update_rng)
        ok = np.isfinite(q)
        log.append({"step": step, "reward": float(r.mean()), "well_formed": float(ok.mean()),
                    "abs_error": float(np.nanmean(np.abs(q - y[b][:, None]))) if ok.any() else float("nan"),
                    "answer_std": float(np.nanstd(q)), **{k: st[k] for k in ("kl", "clip_fraction")}})
    return log


def run(job) -> None:
    s, reward = job.params, job.wildcards.reward
    packed = read_npz(job.input.images)
    arrays = {seed: seed_arrays(packed, seed) for seed in s["seeds"]}

    def fit(seed, lr):
        model, _ = load_model(job.input[f"sft_seed{seed}"], s)
        a = arrays[seed]
        return model, {"log": train_rl(model, a["train_x"], a["train_y"], s, reward, seed, lr)}

    tuning = tune_then_train(list(s["seeds"]), s["rl"]["lr_grid"], fit, lambda seed, m: val_errors(m, arrays[seed]),
                             lambda seed, m, extra: save_model(seed_file(job, seed), m, arm=reward, seed=seed, **extra),
                             default=s["rl"]["lr_default"])
    write_json(job.output.tuning, {"arm": reward, "stage": "rl", **tuning})
