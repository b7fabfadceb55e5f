"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations

from .benchmark import TABLES

# the synthetic-style benchmark and an independent redraw of it (the rank-transfer control)
BENCHMARKS = ("real", "synthetic", "synthetic_redraw")
UNBOUNDED = "real_context_unbounded"  # the real context built without release dates: the audit's positive case


def timesx_data_files(scale: str) -> dict[str, str]:
    """Named tables of the benchmarks (outputs of ``timesx_data``, inputs downstream)."""
    files = {f"{b}_{t}": f"results/{scale}/timesx/data/{b}_{t}.parquet" for b in BENCHMARKS for t in TABLES}
    return files | {UNBOUNDED: f"results/{scale}/timesx/data/{UNBOUNDED}.parquet"}


def timesx_statistical_files(scale: str) -> dict[str, str]:
    """Statistical forecasts of each benchmark (outputs of ``timesx_statistical``)."""
    return {b: f"results/{scale}/timesx/statistical/{b}.parquet" for b in BENCHMARKS}


def timesx_eval_inputs(settings: dict) -> dict[str, str]:
    """Named inputs of ``timesx_eval``: the benchmarks, the statistical forecasts, one model file per seed."""
    scale = settings["scale"]
    files = timesx_data_files(scale)
    files.update({f"statistical_{b}": f for b, f in timesx_statistical_files(scale).items()})
    files.update({f"models_seed{s}": f"results/{scale}/timesx/train/seed{s}/models.pkl" for s in settings["seeds"]})
    return files
