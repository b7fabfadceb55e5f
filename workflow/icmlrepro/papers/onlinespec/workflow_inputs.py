"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def tuning_seed(settings: dict) -> int:
    """The tuning stream's seed: apart from every evaluation seed."""
    return settings["seeds"][0] + settings["tuning_seed_offset"]


def onlinespec_tables(settings: dict) -> dict[str, list[str]]:
    scale, seeds = settings["scale"], settings["seeds"]
    return {
        "tables": [f"results/{scale}/onlinespec/online/seed{s}.parquet" for s in seeds],
        "costs": [f"results/{scale}/onlinespec/online/seed{s}_costs.json" for s in seeds],
    }


def onlinespec_tuned_rates(settings: dict) -> str:
    return f"results/{settings['scale']}/onlinespec/tune/seed{tuning_seed(settings)}.json"
