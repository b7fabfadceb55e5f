"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def ccc_grpo_model_files(settings: dict) -> dict[str, str]:
    """Named inputs of ``ccc_grpo_eval``: both SFT arms and every RL reward, per seed."""
    base = f"results/{settings['scale']}/ccc_grpo"
    files = {}
    for s in settings["seeds"]:
        files |= {f"{arm}_seed{s}": f"{base}/sft/seed{s}/{arm}.pt" for arm in ("sft", "sft_balanced")}
        files |= {f"{r}_seed{s}": f"{base}/rl/{r}/seed{s}/model.pt" for r in settings["rewards"]}
    return files
