"""Learning-rate selection, the same rule for every arm (checklist 12: same grid and budget for baselines).

Each arm gets a 3-point learning-rate grid (one grid shared by the SFT arms, one shared by the GRPO arms: SFT
trains from scratch, GRPO fine-tunes, so their rates differ by an order of magnitude; both grids are a factor
~3 either side of the stage's base rate). On the **first seed** every rate of the grid is trained and scored
on the balanced **validation** split (never the test set); the rate with the lowest validation MAE wins (a tie
goes to the smaller rate) and is used for every other seed. The first seed's model at the chosen rate *is*
that seed's model (same seeds and data; only the rate differs between candidates), so tuning costs
``len(grid) - 1`` extra runs per arm. The KL weight of GRPO is not tuned: it stays fixed for every arm.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from icmlrepro.core.tuning import at_grid_edge

from .model import predict


def val_mae(model, arrays: dict) -> float:
    """MAE of greedy answers on the validation split, a malformed answer scored as the training median
    (the test-time rule of ``evaluate``)."""
    p = predict(model, arrays["val_x"])
    p = np.where(np.isfinite(p), p, float(np.median(arrays["train_y"])))
    return float(np.abs(p - arrays["val_y"]).mean())


def pick(grid: list[float], scores: list[float]) -> int:
    """Index of the lowest validation score; ties (and NaN-free order) go to the smaller rate."""
    order = sorted(range(len(grid)), key=lambda i: (scores[i], grid[i]))
    return order[0]


def tune_then_train(seeds: list[int], grid: list[float], fit: Callable, score: Callable, save: Callable) -> dict:
    """Grid on ``seeds[0]``, then the chosen rate for the other seeds; ``save(seed, model, extra)`` is called
    once per seed as soon as its model exists. ``fit(seed, lr) -> (model, extra dict)``;
    ``score(model) -> validation MAE``. Returns the tuning record (grid, scores, choice, edge flag)."""
    grid = sorted(float(v) for v in grid)
    first, candidates = seeds[0], []
    for lr in grid:
        t0 = time.perf_counter()
        model, extra = fit(first, lr)
        candidates.append((model, {**extra, "lr": lr, "train_seconds": time.perf_counter() - t0}, score(model)))
    scores = [c[2] for c in candidates]
    best = pick(grid, scores)
    lr, val_by_seed = grid[best], {first: scores[best]}
    save(first, candidates[best][0], candidates[best][1])
    del candidates
    for seed in seeds[1:]:
        t0 = time.perf_counter()
        model, extra = fit(seed, lr)
        save(seed, model, {**extra, "lr": lr, "train_seconds": time.perf_counter() - t0})
        val_by_seed[seed] = score(model)
    return {"grid": grid, "val_mae": scores, "chosen_lr": lr, "chosen_index": best,
            "at_grid_edge": at_grid_edge(lr, grid), "tuned_on_seed": first,
            "val_mae_by_seed": {str(k): v for k, v in val_by_seed.items()}}
