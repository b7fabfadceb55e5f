"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def topadapter_result_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``topadapter_eval``: one results file per train group (each holds its arms x seeds)."""
    scale = settings["scale"]
    return {f"results_{g}": f"results/{scale}/topadapter/train/{g}/results.json" for g in settings["train_groups"]}
