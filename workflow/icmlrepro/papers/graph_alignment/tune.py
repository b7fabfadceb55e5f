"""Learning-rate tuning, the same grid and budget for every model and input.

On the tuning stream (its own seed and real-node split; ``data.tuning_set``), each model is trained
with every learning rate of ``lr_grid`` for the same epochs as in the benchmark and scored on the
stream's validation pairs. The rate with the lowest validation alignment loss is kept (the loss is
continuous, so top-1 ties between rates do not decide; a tie to 4 decimals, as for a model that
cannot tell nodes apart, goes to the grid's middle value). ``at_edge`` marks a choice at the end of the grid, where
the optimum may lie outside it; the evaluation reports those.
"""

from __future__ import annotations

import pandas as pd

from icmlrepro.core.io import read_torch, write_parquet
from icmlrepro.core.tuning import at_grid_edge

from .train import train_one

LOSS_DECIMALS = 4


def choose(table: pd.DataFrame, grid) -> pd.DataFrame:
    """Mark the chosen rate per model: lowest validation loss, ties (4 decimals) to the grid's middle."""
    grid = sorted(float(x) for x in grid)
    middle = (len(grid) - 1) / 2
    table = table.copy()
    table["grid_distance"] = [abs(grid.index(float(lr)) - middle) for lr in table.lr]
    table["rounded_loss"] = table.loss.round(LOSS_DECIMALS)  # float32 noise on equal losses is a tie
    best = table.sort_values(["model", "rounded_loss", "grid_distance"]).groupby("model").head(1).index
    table["chosen"] = table.index.isin(best)
    table["at_edge"] = table.chosen & table.lr.map(lambda lr: at_grid_edge(lr, grid))
    return table.drop(columns=["grid_distance", "rounded_loss"])


def tune(split: dict, inputs: str, p) -> pd.DataFrame:
    rows = []
    for kind in p["models"]:
        for lr in p["lr_grid"]:
            _, scores = train_one(kind, inputs, split, p, float(lr), 0, "tune")
            rows.append({"input": inputs, "model": kind, "lr": float(lr), **scores})
    return choose(pd.DataFrame(rows), p["lr_grid"])


def run(job) -> None:
    split = read_torch(job.input.datasets, weights_only=True)["tune"]
    write_parquet(job.output.table, tune(split, job.wildcards.inputs, job.params))
