"""Learning-rate selection, the same rule for every arm (checklist 12: same grid and budget for baselines).

Each arm gets its stage's learning-rate grid (one grid shared by the SFT arms, one shared by the GRPO arms: SFT
trains from scratch, GRPO fine-tunes, so their rates differ by an order of magnitude) and a default rate inside
it (the stage's former base rate). On the **first seed** every rate of the grid is trained and scored on that
seed's balanced **validation** split (never the test set). The rate with the lowest validation MAE wins unless
the default's MAE lies within one standard error of the winner's (the standard error of the paired per-image
difference of absolute errors: the selection's own noise), which is a tie, and ties go to the default (never to
an end of the grid). The choice is used for every other seed. The first seed's model at the chosen rate *is*
that seed's model (same seeds and data; only the rate differs between candidates), so tuning costs
``len(grid) - 1`` extra runs per arm. The KL weight of GRPO is not tuned: it stays fixed for every arm.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from icmlrepro.core.tuning import at_grid_edge, pick_with_ties

from .model import predict


def val_errors(model, arrays: dict, split: str = "val") -> np.ndarray:
    """Absolute errors of greedy answers on a validation split (``val``: balanced, ``val_lt``: the training
    law), a malformed answer scored as the training median (the test-time rule of ``evaluate``)."""
    p = predict(model, arrays[f"{split}_x"])
    p = np.where(np.isfinite(p), p, float(np.median(arrays["train_y"])))
    return np.abs(p - arrays[f"{split}_y"])


def val_mae(model, arrays: dict) -> float:
    return float(val_errors(model, arrays).mean())


def pick(grid: list[float], errors: list[np.ndarray], default: float) -> tuple[int, float, bool]:
    """(index of the chosen rate, standard error of the default-minus-best paired difference, whether the default
    won by the tie rule). Lowest mean error wins (exact ties: the smaller rate); the default wins a tie within one
    standard error."""
    means = [float(np.mean(e)) for e in errors]
    best = min(range(len(grid)), key=lambda i: (means[i], grid[i]))
    d = int(np.argmin([abs(np.log(g / default)) for g in grid]))
    if d == best:
        return best, 0.0, False
    diff = np.asarray(errors[d], float) - np.asarray(errors[best], float)
    se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
    chosen = pick_with_ties(grid, means, grid[d], higher_is_better=False, tolerance=se)
    return chosen.index, se, chosen.moved_by_tie


def tune_then_train(seeds: list[int], grid: list[float], fit: Callable, score: Callable, save: Callable,
                    default: float | None = None) -> dict:
    """Grid on ``seeds[0]``, then the chosen rate for the other seeds; ``save(seed, model, extra)`` is called
    once per seed as soon as its model exists. ``fit(seed, lr) -> (model, extra dict)``;
    ``score(seed, model) -> per-image validation errors``. Returns the tuning record (grid, scores, choice,
    selection standard error, tie flag, edge flag)."""
    grid = sorted(float(v) for v in grid)
    default = float(default) if default is not None else grid[len(grid) // 2]
    first, candidates = seeds[0], []
    for lr in grid:
        t0 = time.perf_counter()
        model, extra = fit(first, lr)
        candidates.append((model, {**extra, "lr": lr, "train_seconds": time.perf_counter() - t0},
                           score(first, model)))
    errors = [c[2] for c in candidates]
    scores = [float(np.mean(e)) for e in errors]
    best, se, tie = pick(grid, errors, default)
    lr, val_by_seed = grid[best], {first: scores[best]}
    save(first, candidates[best][0], candidates[best][1])
    del candidates
    for seed in seeds[1:]:
        t0 = time.perf_counter()
        model, extra = fit(seed, lr)
        save(seed, model, {**extra, "lr": lr, "train_seconds": time.perf_counter() - t0})
        val_by_seed[seed] = float(np.mean(score(seed, model)))
    return {"grid": grid, "val_mae": scores, "chosen_lr": lr, "chosen_index": best, "default_lr": default,
            "selection_se": se, "tie_to_default": tie, "at_grid_edge": at_grid_edge(lr, grid),
            "tuned_on_seed": first, "val_mae_by_seed": {str(k): v for k, v in val_by_seed.items()}}
