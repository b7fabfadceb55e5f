"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def rtr_seed_files(scale: str, seed: int) -> dict[str, str]:
    """One seed's demonstrations and VAE (what its policies and its evaluation read)."""
    root = f"results/{scale}/rtr"
    return {"steps": f"{root}/data/seed{seed}/steps.parquet", "episodes": f"{root}/data/seed{seed}/episodes.parquet",
            "vae": f"{root}/vae/seed{seed}/vae.pt"}


def rtr_policy_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``rtr_eval``: one trained policy per kind and seed, and each seed's data and VAE
    (``<name>_seed<k>``)."""
    scale = settings["scale"]
    files = {f"{p}_seed{s}": f"results/{scale}/rtr/train/{p}/seed{s}/policy.pt"
             for p in settings["policies"] for s in settings["seeds"]}
    for s in settings["seeds"]:
        files |= {f"{k}_seed{s}": v for k, v in rtr_seed_files(scale, s).items()}
    return files
