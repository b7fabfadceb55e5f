"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations

from icmlrepro.core.tuning import rate_source_input

#: Ablations train at their method's tuned rate: each is PixCLIP with one branch removed and nothing else changed
#: (the controls of three_branch_alignment). Tuned on their own they cost 3-4 trainings each on the first seed and
#: picked 0.002 / 0.001 / 0.002 against PixCLIP's 0.002 (5-seed default run of 9047d5c).
LR_FROM = {"pixclip_no_global": "pixclip", "pixclip_no_region": "pixclip", "pixclip_no_pixel": "pixclip"}


def pixclip_model_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``pixclip_eval``: one file per arm holding every seed's trained model."""
    scale = settings["scale"]
    return {f"models_{a}": f"results/{scale}/pixclip/train/{a}/models.pt" for a in settings["arms"]}


def pixclip_lr_source(settings: dict, arm: str) -> dict[str, str]:
    """``pixclip_train``'s input ``tuned``: the models file (with its tuning record) of the arm whose rate ``arm``
    trains at (LR_FROM), when that arm is run; else nothing (the arm tunes itself)."""
    return rate_source_input(LR_FROM, arm, settings["arms"],
                             lambda src: f"results/{settings['scale']}/pixclip/train/{src}/models.pt")
