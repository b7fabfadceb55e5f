"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations

PRODUCTS = ("predictions", "grid", "corpus", "costs")


def onpolicy_sft_seed_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``onpolicy_sft_eval``: the train job's products of every seed."""
    scale = settings["scale"]
    ext = {"predictions": "parquet", "grid": "parquet", "corpus": "parquet", "costs": "json"}
    return {f"{k}_{s}": f"results/{scale}/onpolicy_sft/train/seed{s}/{k}.{ext[k]}"
            for s in settings["seeds"] for k in PRODUCTS}
