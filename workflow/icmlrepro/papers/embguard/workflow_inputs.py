"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def embguard_prediction_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``embguard_eval``: the test predictions of every trained arm (all seeds in one file)."""
    scale = settings["scale"]
    return {a: f"results/{scale}/embguard/train/{a}/predictions.parquet" for a in settings["arms"]}
