"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def mlembed_model_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``mlembed_eval``: one file per arm (its tuning record and every seed's encoder)."""
    scale = settings["scale"]
    return {a: f"results/{scale}/mlembed/train/{a}/models.pt" for a in settings["arms"]}
