"""The edit agent: a small policy over (instruction embedding, image features), the instruction prior, the
simulated judge and batched rollouts of bounded edit sequences (shared by training and evaluation)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .data import N_INSTR
from .tools import ACTIONS, N_ACTIONS, N_FEATURES, STEPS, STOP, TOOLS, apply_actions, delta_e, features, proxy_quality

OBS_DIM = N_INSTR + 2 * N_FEATURES + 1
STATE_DIM = OBS_DIM - 1  # what the reward model sees: the observation without the step counter


def new_policy(hidden: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(OBS_DIM, hidden), torch.nn.Tanh(),
                               torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
                               torch.nn.Linear(hidden, N_ACTIONS))


def observe(instr: torch.Tensor, f: torch.Tensor, f0: torch.Tensor, t: int, horizon: int) -> torch.Tensor:
    return torch.cat([instr, f, f - f0, torch.full((len(f), 1), t / horizon)], 1)


def instruction_prior(instr: torch.Tensor, step: int = 0, horizon: int = 1, eps: float = 0.1) -> torch.Tensor:
    """pi_0(a | instruction, step): the tools the instruction names, in its direction, small steps twice as
    likely as big ones; ``stop`` gets the share step / horizon (edit first, stop later); mixed with ``eps`` of
    uniform so that no action is impossible. The prior an MLLM's reading of the instruction would give, here
    read off the instruction's (tool, direction) words; it knows nothing of the amounts."""
    p = torch.zeros(len(instr), N_ACTIONS)
    for a, (tool, amount) in enumerate(ACTIONS):
        if tool:
            k = TOOLS.index(tool)
            p[:, a] = instr[:, 2 * k + int(amount > 0)] * (2.0 if abs(amount) == STEPS[tool][0] else 1.0)
    p = p / p.sum(1, keepdim=True).clamp(min=1e-12) * (1 - step / horizon)
    p[:, STOP] = step / horizon
    p = p / p.sum(1, keepdim=True)
    return (1 - eps) * p + eps / N_ACTIONS


def judge(final: torch.Tensor, target: torch.Tensor, threshold: float, noise: float,
          rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
    """(distance, accept bit): accept when the mean CIEDE2000 to the hidden target, plus Gaussian judge noise
    of scale ``noise`` (none when ``rng`` is None), is under ``threshold``."""
    d = delta_e(final, target)
    noisy = d + (noise * rng.standard_normal(len(d)) if rng is not None else 0.0)
    return d, (noisy < threshold).astype(np.float32)


@dataclass
class Rollout:
    obs: list = field(default_factory=list)        # (B, OBS_DIM) per step
    actions: list = field(default_factory=list)    # (B,) per step
    alive: list = field(default_factory=list)      # (B,) bool: the step was taken (no earlier stop)
    behaviour: list = field(default_factory=list)  # (B,) probability of the action under the sampler
    proxy_gain: list = field(default_factory=list)  # (B,) dense proxy increment of the step
    images: list = field(default_factory=list)     # images before each step, then the final image
    final: torch.Tensor | None = None
    final_state: torch.Tensor | None = None        # (B, STATE_DIM) of the final image (what the judge rates)

    def n_edits(self) -> np.ndarray:
        return sum(((a != STOP) & m).numpy().astype(int) for a, m in zip(self.actions, self.alive))


def rollout(policy, source: torch.Tensor, instr: torch.Tensor, horizon: int, gen: torch.Generator | None,
            prior_weight: float = 0.0, keep_images: bool = False, proxy: bool = False) -> Rollout:
    """Run edit sequences of at most ``horizon`` tool calls. ``gen`` None: greedy (argmax). Otherwise sample
    from the behaviour policy (1 - prior_weight) pi + prior_weight pi_0 (prior-guided trajectory sampling)."""
    ro, x = Rollout(), source
    f0 = features(source)
    f, alive = f0, torch.ones(len(source), dtype=torch.bool)
    q = proxy_quality(x) if proxy else None
    for t in range(horizon):
        obs = observe(instr, f, f0, t, horizon)
        with torch.no_grad():
            mu = torch.softmax(policy(obs), 1)
        if prior_weight > 0:
            mu = (1 - prior_weight) * mu + prior_weight * instruction_prior(instr, t, horizon)
        a = mu.argmax(1) if gen is None else torch.multinomial(mu, 1, generator=gen)[:, 0]
        a = torch.where(alive, a, torch.full_like(a, STOP))
        ro.obs.append(obs), ro.actions.append(a), ro.alive.append(alive.clone())
        ro.behaviour.append(mu.gather(1, a[:, None])[:, 0])
        if keep_images:
            ro.images.append(x)
        x = apply_actions(x, a)
        if proxy:
            q_new = proxy_quality(x)
            ro.proxy_gain.append(torch.where(alive, q_new - q, torch.zeros_like(q)))
            q = q_new
        alive = alive & (a != STOP)
        if not bool(alive.any()):
            break
        f = features(x)
    ro.final = x
    ro.final_state = observe(instr, features(x), f0, 0, horizon)[:, :STATE_DIM]
    if keep_images:
        ro.images.append(x)
    return ro
