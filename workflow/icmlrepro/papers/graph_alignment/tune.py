"""Learning-rate tuning, the same grid, default and budget for every model and input.

On the tuning stream (its own seed and real-node split; ``data.tuning_set``), each model is trained
with every learning rate of ``lr_grid`` for the same epochs as in the benchmark and scored on the
stream's validation pairs by the mean alignment loss per pair (continuous, so top-1 ties between rates
do not decide). The pick is ``core.tuning.pick_with_ties``: rates within one standard error (over
validation pairs) of the lowest loss are a tie, and a tie goes to the default rate ``tune.lr_default``
(then to the tied rate nearest it), so a model that cannot tell nodes apart (every rate the same loss)
keeps the default. ``at_edge`` marks a pick at the end of the grid, where the optimum may lie outside
it, ``tie`` a pick the tie rule moved to the default side; both are reported per model in metrics.json.
"""

from __future__ import annotations

import pandas as pd

from icmlrepro.core.io import read_torch, write_parquet
from icmlrepro.core.tuning import at_grid_edge, pick_with_ties

from .train import train_one


def choose(table: pd.DataFrame, grid, default: float) -> pd.DataFrame:
    """Mark the chosen rate per model: lowest validation loss, ties within the best rate's standard error
    (column ``loss_se``) to ``default``. Adds ``chosen``, ``at_edge``, ``tie`` (the tie rule moved the
    pick off the best loss) and ``tolerance`` (the standard error used)."""
    grid = sorted(float(x) for x in grid)
    table = table.copy()
    table["chosen"] = False
    table["at_edge"] = False
    table["tie"] = False
    table["tolerance"] = float("nan")
    for model, d in table.groupby("model", sort=False):
        d = d.set_index("lr").loc[grid]
        best = d.loss.idxmin()
        tolerance = float(d.loc[best, "loss_se"])
        pick = pick_with_ties(grid, d.loss.tolist(), default, higher_is_better=False, tolerance=tolerance)
        row = (table.model == model) & (table.lr == pick.value)
        table.loc[row, "chosen"] = True
        table.loc[row, "at_edge"] = at_grid_edge(pick.value, grid)
        table.loc[row, "tie"] = bool(pick.moved_by_tie)
        table.loc[table.model == model, "tolerance"] = tolerance
    return table


def tune(split: dict, inputs: str, p) -> pd.DataFrame:
    rows = []
    for kind in p["models"]:
        for lr in p["lr_grid"]:
            _, scores = train_one(kind, inputs, split, p, float(lr), 0, "tune")
            rows.append({"input": inputs, "model": kind, "lr": float(lr), **scores})
    return choose(pd.DataFrame(rows), p["lr_grid"], float(p["tune"]["lr_default"]))


def run(job) -> None:
    split = read_torch(job.input.datasets, weights_only=True)["tune"]
    write_parquet(job.output.table, tune(split, job.wildcards.inputs, job.params))
