"""Untrained arms: the trivial reference (no edit), the prompt-based recipe, the AIGC-style one-shot global
transform and the oracle ceiling (greedy with the hidden target, which no agent sees)."""

from __future__ import annotations

import numpy as np
import torch

from .tools import N_ACTIONS, STEPS, TOOLS, apply_actions, apply_tool, delta_e, lab

RECIPE_GRID = [("small", 1), ("small", 2), ("small", 3), ("big", 1), ("big", 2)]  # (step size, steps per aspect)


def prompt_recipe(source: torch.Tensor, instr: torch.Tensor, size: str, n: int) -> torch.Tensor:
    """Fixed heuristic edit recipe read off the instruction: every named tool ``n`` steps of ``size`` in the
    named direction, whatever the image (what a prompt-only agent without feedback does)."""
    x = source
    z = 0 if size == "small" else 1
    for k, tool in enumerate(TOOLS):
        amount = (instr[:, 2 * k + 1] - instr[:, 2 * k]) * STEPS[tool][z]
        for _ in range(n):
            x = apply_tool(x, tool, amount)
    return x


def tune_recipe(train: dict, threshold: float, noise: float, rng: np.random.Generator) -> tuple[tuple, list]:
    """The recipe of ``RECIPE_GRID`` with the most noisy-judge accepts on the training tasks (the same feedback
    the trained arms get), and the grid's scores."""
    scores = []
    for size, n in RECIPE_GRID:
        d = delta_e(prompt_recipe(train["source"], train["instr"], size, n), train["target"])
        scores.append(float(((d + noise * rng.standard_normal(len(d))) < threshold).mean()))
    return RECIPE_GRID[int(np.argmax(scores))], scores


def lab_stats(x: torch.Tensor) -> torch.Tensor:
    L = lab(x).flatten(2)
    return torch.cat([L.mean(2), L.std(2)], 1)


class GlobalRegenerator:
    """AIGC-style editor: predicts the whole look of the result (per-channel CIELAB mean and spread) from the
    source's statistics and the instruction in one shot (ridge regression fitted on the training pairs), and
    re-renders the image to that look by a global Lab transfer; no tool sequence, no local edits."""

    def fit(self, train: dict, ridge: float = 1.0) -> "GlobalRegenerator":
        from sklearn.linear_model import Ridge

        self.model = Ridge(alpha=ridge).fit(self._x(train["source"], train["instr"]),
                                            lab_stats(train["target"]).numpy())
        return self

    @staticmethod
    def _x(source, instr):
        return torch.cat([lab_stats(source), instr], 1).numpy()

    def __call__(self, source: torch.Tensor, instr: torch.Tensor) -> torch.Tensor:
        import kornia.color

        want = torch.from_numpy(self.model.predict(self._x(source, instr))).float()
        L = lab(source)
        st = lab_stats(source)
        mu, sd = st[:, :3, None, None], st[:, 3:, None, None].clamp(min=1e-3)
        out = (L - mu) / sd * want[:, 3:, None, None].clamp(min=0) + want[:, :3, None, None]
        out = torch.cat([out[:, :1].clamp(0, 100), out[:, 1:]], 1)
        return kornia.color.lab_to_rgb(out, clip=True).clamp(0, 1)


def oracle(source: torch.Tensor, target: torch.Tensor, horizon: int) -> tuple[torch.Tensor, np.ndarray]:
    """Ceiling: at each step the action that brings the image closest to the hidden target (stop if none)."""
    x, edits = source, np.zeros(len(source), int)
    for _ in range(horizon):
        cands = [apply_actions(x, torch.full((len(x),), a)) for a in range(N_ACTIONS)]
        dist = np.stack([delta_e(c, target) for c in cands])
        best = dist.argmin(0)
        x = torch.stack([cands[b][i] for i, b in enumerate(best)])
        edits += best != 0
    return x, edits

