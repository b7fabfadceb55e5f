"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def bspar_run_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``bspar_eval``: one training file (all seeds) per trained arm."""
    scale = settings["scale"]
    return {a: f"results/{scale}/bspar/train/{a}/runs.pt" for a in settings["arms"]}
