"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def attribution_sgd_tables(settings: dict) -> dict[str, str]:
    """Named inputs of ``attribution_sgd_eval``: one measurement table per model family (every seed in it)."""
    scale = settings["scale"]
    return {fam: f"results/{scale}/attribution_sgd/train/{fam}/measurements.parquet" for fam in settings["datasets"]}
