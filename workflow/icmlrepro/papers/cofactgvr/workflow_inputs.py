"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def cofactgvr_train_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``cofactgvr_eval``: every arm's policies (all seeds in one file), training log and
    learning-rate tuning record."""
    scale = settings["scale"]
    out = {a: f"results/{scale}/cofactgvr/train/{a}/policies.pt" for a in settings["arms"]}
    out |= {f"log_{a}": f"results/{scale}/cofactgvr/train/{a}/log.parquet" for a in settings["arms"]}
    out |= {f"tuning_{a}": f"results/{scale}/cofactgvr/train/{a}/tuning.json" for a in settings["arms"]}
    return out
