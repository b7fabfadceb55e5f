"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def attribution_sgd_tables(settings: dict) -> dict[str, str]:
    """Named inputs of ``attribution_sgd_eval``: one measurement table per (model family, seed)."""
    scale = settings["scale"]
    return {f"{fam}_seed{s}": f"results/{scale}/attribution_sgd/train/{fam}/seed{s}/measurements.parquet"
            for fam in settings["datasets"] for s in settings["seeds"]}
