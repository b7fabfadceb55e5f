"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations

from .encodings import ENCODINGS


def collapsed_ops_stage_files(scale: str) -> dict[str, str]:
    """Named inputs of ``collapsed_ops_eval`` (and figures): the stage tables and one result per encoding."""
    base = f"results/{scale}/collapsed_ops"
    files = {"properties": f"{base}/properties/properties.parquet",
             "clustering": f"{base}/clustering/clustering.parquet",
             "smoothing": f"{base}/smoothing/smoothing.parquet",
             "validation": f"{base}/smoothing/validation.parquet"}
    for e in ENCODINGS:
        files[f"results_{e}"] = f"{base}/train/{e}/results.parquet"
        files[f"curves_{e}"] = f"{base}/train/{e}/curves.parquet"
    return files
