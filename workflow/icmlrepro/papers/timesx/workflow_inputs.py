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


def timesx_models_file(scale: str, seed: int) -> str:
    return f"results/{scale}/timesx/train/seed{seed}/models.pkl"


def timesx_tuning_input(settings: dict, seed: int) -> dict[str, str]:
    """``timesx_train``'s input: with ``tune_seeds`` 1 every seed but the first reads the first seed's rate choice
    (its models file); the first seed, and every seed when ``tune_seeds`` is null, tunes on its own."""
    first = int(settings["seeds"][0])
    if settings["tune_seeds"] is None or int(seed) == first:
        return {}
    return {"tuned": timesx_models_file(settings["scale"], first)}


def timesx_eval_inputs(settings: dict) -> dict[str, str]:
    """Named inputs of ``timesx_eval``: the benchmarks, the statistical forecasts, one model file per seed."""
    scale = settings["scale"]
    files = timesx_data_files(scale)
    files.update({f"statistical_{b}": f for b, f in timesx_statistical_files(scale).items()})
    files.update({f"models_seed{s}": timesx_models_file(scale, s) for s in settings["seeds"]})
    return files
