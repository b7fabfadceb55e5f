"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def c2gmae_train_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``c2gmae_eval``: per graph its info file and the ladder tables of all its seeds
    (rungs with the retrain null, coverage bins, loss curves, raw-feature references)."""
    scale = settings["scale"]
    files = {f"info_{g}": f"results/{scale}/c2gmae/data/{g}.json" for g in settings["graphs"]}
    for g in settings["graphs"]:
        for table in ("rungs", "bins", "curves", "refs"):
            files[f"{table}_{g}"] = f"results/{scale}/c2gmae/train/{g}/{table}.parquet"
    return files
