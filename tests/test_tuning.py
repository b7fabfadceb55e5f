"""Grid-edge flags (core.tuning): ends of the grid in any order, a one-value grid never at an edge,
and both metric polarities read the same way."""

from __future__ import annotations

import pytest

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


def test_pick_with_ties_prefers_the_default_within_the_tolerance_and_the_best_outside_it():
    from icmlrepro.core.tuning import pick_with_ties

    grid, acc = [1e-4, 1e-3, 1e-2], [0.50, 0.58, 0.60]
    exact = pick_with_ties(grid, acc, default=1e-3)
    assert exact.value == 1e-2 and not exact.moved_by_tie and exact.tied == [1e-2]
    noisy = pick_with_ties(grid, acc, default=1e-3, tolerance=0.05)
    assert noisy.value == 1e-3 and noisy.moved_by_tie and noisy.tied == [1e-3, 1e-2] and noisy.best == 1e-2


def test_pick_with_ties_lower_is_better_relative_tolerance_and_nearest_to_default():
    from icmlrepro.core.tuning import pick_with_ties

    # losses: 1e-3 and 3e-3 tie within 1% of the best; the default 1e-2 is not tied, so the tied value nearest
    # to it on the log scale (3e-3) wins
    pick = pick_with_ties([1e-3, 3e-3, 1e-2], [1.000, 1.009, 1.2], default=1e-2, higher_is_better=False,
                          tolerance=0.01, relative=True)
    assert pick.value == 3e-3 and pick.index == 1 and pick.moved_by_tie
    # exact ties with the default absent go to the smaller of two equidistant values
    assert pick_with_ties([1.0, 4.0], [0.7, 0.7], default=2.0).value == 1.0
    with pytest.raises(ValueError):
        pick_with_ties([1.0, 2.0], [0.5], default=1.0)


def test_accuracy_se_is_the_binomial_standard_error():
    from icmlrepro.core.tuning import accuracy_se

    assert accuracy_se(0.5, 100) == pytest.approx(0.05)
    assert accuracy_se(0.0, 10) == 0.0


def test_rate_source_input_names_the_methods_file_only_when_the_method_runs():
    from icmlrepro.core.tuning import rate_source_input

    lr_from = {"ablation": "method"}
    path_of = lambda arm: f"results/x/{arm}/tuning.json"  # noqa: E731
    assert rate_source_input(lr_from, "ablation", ["method", "ablation"], path_of) == {"tuned": "results/x/method/tuning.json"}
    assert rate_source_input(lr_from, "ablation", ["ablation"], path_of) == {}  # the method is not run: tune alone
    assert rate_source_input(lr_from, "method", ["method", "ablation"], path_of) == {}
