"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def mlembed_model_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``mlembed_eval``: one trained encoder per arm and seed."""
    scale = settings["scale"]
    return {f"{a}_seed{s}": f"results/{scale}/mlembed/train/{a}/seed{s}/model.pt"
            for a in settings["arms"] for s in settings["seeds"]}
