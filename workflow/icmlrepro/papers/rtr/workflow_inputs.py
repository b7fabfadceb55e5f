"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def rtr_policy_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``rtr_eval``: one trained policy per kind and seed."""
    scale = settings["scale"]
    return {f"{p}_seed{s}": f"results/{scale}/rtr/train/{p}/seed{s}/policy.pt"
            for p in settings["policies"] for s in settings["seeds"]}
