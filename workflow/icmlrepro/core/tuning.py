"""Grid-edge flags of tuned settings, one definition for every paper (checklist item 12).

A setting tuned on a grid whose pick is the grid's smallest or largest value may have its optimum
outside the grid, so comparisons involving that arm are weaker than they look. Papers record a 0/1
flag per replicate in ``metrics.json`` under a name holding ``at_grid_edge`` (1 = edge; e.g.
``lr_at_grid_edge.<arm>``) or starting with ``tuned_interior.`` (1 = interior), and the report lists
every flagged setting. A one-value grid is no tuning, so its pick is never at an edge.
"""

from __future__ import annotations

from collections.abc import Iterable


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
