"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations

from .benchmark import TABLES

BENCHMARKS = ("real", "synthetic")


def timesx_data_files(scale: str) -> dict[str, str]:
    """Named tables of both benchmarks (outputs of ``timesx_data``, inputs downstream)."""
    return {f"{b}_{t}": f"results/{scale}/timesx/data/{b}_{t}.parquet" for b in BENCHMARKS for t in TABLES}


def timesx_eval_inputs(settings: dict) -> dict[str, str]:
    """Named inputs of ``timesx_eval``: both benchmarks, the statistical forecasts, one model file per seed."""
    scale = settings["scale"]
    files = timesx_data_files(scale)
    files.update({f"statistical_{b}": f"results/{scale}/timesx/statistical/{b}.parquet" for b in BENCHMARKS})
    files.update({f"models_seed{s}": f"results/{scale}/timesx/train/seed{s}/models.pkl" for s in settings["seeds"]})
    return files
