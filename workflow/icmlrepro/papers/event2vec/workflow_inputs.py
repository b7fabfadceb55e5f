"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def event2vec_model_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``event2vec_eval``: each arm's models (all seeds) and its tuning record."""
    base = f"results/{settings['scale']}/event2vec/train"
    files = {a: f"{base}/{a}/models.pt" for a in settings["arms"]}
    files |= {f"{a}_tuning": f"{base}/{a}/tuning.json" for a in settings["arms"]}
    return files
