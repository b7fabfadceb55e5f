"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def asyncspade_tables(settings: dict) -> dict[str, list[str]]:
    """Named inputs of ``asyncspade_eval`` and ``asyncspade_figures``: the per-seed tables."""
    scale, seeds = settings["scale"], settings["seeds"]
    return {
        "accuracy": [f"results/{scale}/asyncspade/accuracy/seed{s}.parquet" for s in seeds],
        "prediction": [f"results/{scale}/asyncspade/prediction/seed{s}.parquet" for s in seeds],
    }


def asyncspade_tpot_runtime(settings: dict) -> int:
    """Minutes of ``asyncspade_tpot`` (first attempt): the memory-bound step-time model of ``memory.py``."""
    from .memory import runtime_minutes

    return runtime_minutes(settings["tpot"])
