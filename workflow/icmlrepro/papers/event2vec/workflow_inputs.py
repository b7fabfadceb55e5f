"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations

from icmlrepro.core.tuning import rate_source_input

#: arms trained at another arm's tuned learning rate instead of their own pick (train.py): the shuffled-timestamp
#: control is event2vec with the event order destroyed and nothing else changed. Tuning it on its own cost five
#: runs of the most expensive model; in the 8-seed run where it was tuned it tied at event2vec's rate (validation
#: 0.55 at 0.01 vs 0.56 at 0.003, within one standard error).
LR_FROM = {"event2vec_shuffled_t": "event2vec"}


def event2vec_model_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``event2vec_eval``: each arm's models (all seeds) and its tuning record."""
    base = f"results/{settings['scale']}/event2vec/train"
    files = {a: f"{base}/{a}/models.pt" for a in settings["arms"]}
    files |= {f"{a}_tuning": f"{base}/{a}/tuning.json" for a in settings["arms"]}
    return files


def event2vec_lr_source(settings: dict, arm: str) -> dict[str, str]:
    """``event2vec_train``'s input ``tuned``: the tuning record whose rate ``arm`` trains at (LR_FROM), when that
    arm is run; else nothing (the arm tunes itself)."""
    return rate_source_input(LR_FROM, arm, settings["arms"],
                             lambda src: f"results/{settings['scale']}/event2vec/train/{src}/tuning.json")
