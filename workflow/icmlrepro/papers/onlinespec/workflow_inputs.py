"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations

# the arms with a step to tune, one tuning job each (= learners.TUNED; kept free of torch for the Snakefile)
onlinespec_tuned_arms = ("ogd", "osd", "optimistic", "ensemble", "optimistic_ogd", "hedge")
# settings of the stages that run the arms (tune and train read the same ones)
onlinespec_learning = ("gamma", "step_grid", "ensemble_factors", "momentum", "temperature", "steps_per_chunk",
                       "batch_size", "comparator_step", "comparator_steps", "n_timed", "max_new_tokens")


def tuning_seed(settings: dict) -> int:
    """The tuning stream's seed: apart from every evaluation seed."""
    return settings["seeds"][0] + settings["tuning_seed_offset"]


def onlinespec_tables(settings: dict) -> dict[str, list[str]]:
    scale, seeds = settings["scale"], settings["seeds"]
    return {
        "tables": [f"results/{scale}/onlinespec/online/seed{s}.parquet" for s in seeds],
        "costs": [f"results/{scale}/onlinespec/online/seed{s}_costs.json" for s in seeds],
        "tuning": onlinespec_tuned_steps(settings),
    }


def onlinespec_tuned_steps(settings: dict) -> list[str]:
    """The tuning record of every learning arm (one job each, on the tuning stream)."""
    return [f"results/{settings['scale']}/onlinespec/tune/seed{tuning_seed(settings)}_{arm}.json"
            for arm in onlinespec_tuned_arms]
