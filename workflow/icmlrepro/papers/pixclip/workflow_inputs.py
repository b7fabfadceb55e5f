"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def pixclip_model_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``pixclip_eval``: one file per arm holding every seed's trained model."""
    scale = settings["scale"]
    return {f"models_{a}": f"results/{scale}/pixclip/train/{a}/models.pt" for a in settings["arms"]}
