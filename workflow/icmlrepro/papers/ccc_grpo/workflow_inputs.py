"""File lists the Snakemake rules need, computed from the settings (never from the file system).

One job per arm loops over the seeds; each seed's model stays its own file (``<stage>/<arm>/seed<k>.pt``), so a
targeted rerun still names it (it reruns that arm's job), and ``tuning.json`` beside them records the grid.
"""

from __future__ import annotations

SFT_ARMS = ("sft", "sft_soft", "sft_balanced")


def ccc_grpo_seed_files(directory: str, seeds) -> dict[str, str]:
    """Per-seed model files of one arm's job, named ``seed<k>`` (``directory`` may hold wildcards such as
    ``{scale}``); named one by one because every stage output is a single path."""
    return {f"seed{s}": f"{directory}/seed{s}.pt" for s in seeds}


def ccc_grpo_sft_inputs(settings: dict) -> dict[str, str]:
    """Named inputs of a GRPO job: the long-tailed SFT model of every seed (each RL seed starts from it)."""
    base = f"results/{settings['scale']}/ccc_grpo/sft/sft"
    return {f"sft_{k}": f for k, f in ccc_grpo_seed_files(base, settings["seeds"]).items()}


def ccc_grpo_model_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``ccc_grpo_eval``: every arm's model per seed and its tuning record."""
    base = f"results/{settings['scale']}/ccc_grpo"
    files = {}
    for arm, stage in [(a, "sft") for a in SFT_ARMS] + [(r, "rl") for r in settings["rewards"]]:
        files |= {f"{arm}_{k}": f for k, f in ccc_grpo_seed_files(f"{base}/{stage}/{arm}", settings["seeds"]).items()}
        files[f"tuning_{arm}"] = f"{base}/{stage}/{arm}/tuning.json"
    return files
