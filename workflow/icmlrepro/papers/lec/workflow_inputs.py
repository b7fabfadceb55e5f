"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def lec_prediction_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``lec_eval``: one predictions file per base model and seed."""
    scale = settings["scale"]
    return {
        f"{m}_seed{s}": f"results/{scale}/lec/train/{m}/seed{s}/predictions.parquet"
        for m in settings["models"]
        for s in settings["seeds"]
    }
