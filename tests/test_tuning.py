"""Grid-edge flags (core.tuning): ends of the grid in any order, a one-value grid never at an edge,
and both metric polarities read the same way."""

from __future__ import annotations

from icmlrepro.core.tuning import at_grid_edge, edge_flag


def test_ends_of_the_grid_are_edges_whatever_its_order():
    grid = [1e-3, 3e-3, 1e-2, 3e-2]
    assert [at_grid_edge(lr, grid) for lr in grid] == [True, False, False, True]
    assert [at_grid_edge(lr, grid[::-1]) for lr in grid] == [True, False, False, True]
    assert not at_grid_edge(3e-3, [3e-3])  # one rate: no tuning, no edge to report
    assert not at_grid_edge(3e-3, [3e-3, 3e-3])


def test_edge_flag_polarities():
    assert edge_flag("lr_at_grid_edge.sft", 1.0) == 1.0 and edge_flag("prompt_recipe_at_grid_edge", 0.0) == 0.0
    assert edge_flag("tuned_interior.ogd", 1.0) == 0.0 and edge_flag("tuned_interior.ogd", 0.0) == 1.0
    assert edge_flag("lr.sft", 0.01) is None and edge_flag("accuracy.tuned_interior", 1.0) is None
