"""Tuned settings: the pick with ties to the default, and grid-edge flags, one definition for every paper
(checklist items 12 and 18).

A pick on a grid is decided by a validation score that has its own noise. Scores within that noise of the best
are a tie, and a tie goes to the arm's default setting (else to the tied value nearest the default on the log
scale, then the smaller), never to an edge of the grid by accident of order: :func:`pick_with_ties`. Papers
record per replicate the tie (``tuning_tie.<arm>``: 1 when the default won by the tie rule) and the selection's
standard error beside the pick.

A setting tuned on a grid whose pick is the grid's smallest or largest value may have its optimum
outside the grid, so comparisons involving that arm are weaker than they look. Papers record a 0/1
flag per replicate in ``metrics.json`` under a name holding ``at_grid_edge`` (1 = edge; e.g.
``lr_at_grid_edge.<arm>``) or starting with ``tuned_interior.`` (1 = interior), and the report lists
every flagged setting. A one-value grid is no tuning, so its pick is never at an edge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple


class Pick(NamedTuple):
    """A tuned setting: ``value`` (= ``grid[index]``), the grid values tied with the best score, the best by
    score alone, and whether the tie rule moved the pick away from that best."""

    value: float
    index: int
    tied: list[float]
    best: float
    moved_by_tie: bool


def pick_with_ties(grid: Sequence[float], scores: Sequence[float], default: float, *,
                   higher_is_better: bool = True, tolerance: float = 0.0, relative: bool = False) -> Pick:
    """The grid value with the best score, where every value within ``tolerance`` of the best score is a tie
    (``relative``: within ``tolerance`` times the best's magnitude; 0 = exact ties only). Among tied values the
    default wins, else the one nearest the default on the log scale (linear scale if any value is not
    positive), then the smaller. The score's noise (one standard error of the selection) is the natural
    tolerance: a difference smaller than it says nothing about which setting is better."""
    grid = [float(g) for g in grid]
    scores = [float(v) for v in scores]
    if len(grid) != len(scores) or not grid:
        raise ValueError(f"pick_with_ties: {len(grid)} grid values and {len(scores)} scores")
    sign = 1.0 if higher_is_better else -1.0
    best_i = max(range(len(grid)), key=lambda i: (sign * scores[i], -grid[i]))
    top = scores[best_i]
    margin = abs(top) * tolerance if relative else tolerance
    tied = sorted(g for g, v in zip(grid, scores) if sign * (top - v) <= margin)
    log = all(g > 0 for g in grid) and float(default) > 0

    def distance(g: float) -> float:
        return abs(math.log(g / float(default))) if log else abs(g - float(default))

    value = min(tied, key=lambda g: (distance(g), g))
    return Pick(value, grid.index(value), tied, grid[best_i], value != grid[best_i])


def accuracy_se(accuracy: float, n: int) -> float:
    """Standard error of an accuracy measured on ``n`` items: the noise of a pick made on it."""
    p = float(accuracy)
    return math.sqrt(max(p * (1.0 - p), 0.0) / n) if n > 0 else float("inf")


def at_grid_edge(value: float, grid: Iterable[float]) -> bool:
    """Whether ``value`` is the smallest or largest of a grid of more than one distinct value."""
    values = sorted(set(float(g) for g in grid))
    return len(values) > 1 and float(value) in (values[0], values[-1])


def edge_flag(metric_name: str, value: float) -> float | None:
    """A metric's value read as 1 = at an edge, 0 = interior; None when the metric is no edge flag."""
    if "at_grid_edge" in metric_name:
        return value
    if metric_name.startswith("tuned_interior."):
        return 1.0 - value
    return None


def rate_source_input(lr_from: dict[str, str], arm: str, arms: Iterable[str], path_of) -> dict[str, str]:
    """Named rule input ``{"tuned": path}`` of an arm that trains at another arm's tuned rate instead of its own
    pick (an ablation or control that differs from its method in one component only: ``lr_from[arm]`` names
    the method), when that method is run; else ``{}`` and the arm tunes itself. ``path_of(method)`` is the file
    holding the method's tuning record. Use with ``unpack(...)`` in the rule and read ``job.input.get("tuned")``."""
    source = lr_from.get(arm)
    return {"tuned": path_of(source)} if source is not None and source in set(arms) else {}
