"""Arm names and the tuning records: what the figures read, in a module that does not import torch.

(The figures job used to import them from ``learners`` and ``evaluate``, which pulled in torch and
transformers: ~12-25 s of start-up on a loaded 2-core machine for a job that only draws.)
"""

from __future__ import annotations

from icmlrepro.core.io import read_json

PUBLISHED = ("offline", "ogd", "osd", "optimistic", "ensemble")
TEXTBOOK = ("optimistic_ogd", "hedge")
ARMS = PUBLISHED + TEXTBOOK
TUNED = tuple(a for a in ARMS if a != "offline")  # arms with a step to tune
MOMENTUM_ARMS = ("optimistic",)                   # the only arms whose SGD uses momentum


def read_tuning(paths) -> dict:
    """The per-arm tuning records merged: one grid table and per-arm best step, interior flag, edge, the pick's
    lead over the runner-up step and its standard error (absent from older records), and the offline draft's
    acceptance length on the tuning stream (the same in every record)."""
    required, optional = ("best_step", "interior", "edge"), ("runner_up_margin", "runner_up_se")
    out = {"grid": [], **{key: {} for key in required + optional}}
    for path in paths:
        rec = read_json(path)
        out["tuning_seed"] = rec["tuning_seed"]
        out["offline_acceptance_length"] = rec.get("offline_acceptance_length", float("nan"))
        out["grid"] += rec["grid"]
        for key in required:
            out[key].update(rec[key])
        for key in optional:
            out[key].update(rec.get(key, {}))
    return out
