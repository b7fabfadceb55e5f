"""File lists the Snakemake rules need, computed from the settings (never from the file system)."""

from __future__ import annotations


def _seed_files(settings: dict, name: str, prefix: str) -> dict[str, str]:
    scale = settings["scale"]
    return {f"{prefix}_seed{s}": f"results/{scale}/graph_alignment/train/seed{s}/{name}" for s in settings["seeds"]}


def graph_alignment_inputs(settings: dict) -> list[str]:
    """The headline input first, then the extra inputs (each tuned in its own job)."""
    return [settings["input"], *settings["extra_inputs"]]


def graph_alignment_tune_files(settings: dict) -> dict[str, str]:
    """Inputs of ``graph_alignment_train``: the datasets and the tuning table of every input."""
    scale = settings["scale"]
    return {"datasets": f"results/{scale}/graph_alignment/data/datasets.pt",
            **{f"tune_{x}": f"results/{scale}/graph_alignment/tune/{x}.parquet"
               for x in graph_alignment_inputs(settings)}}


def graph_alignment_encoder_files(settings: dict) -> dict[str, str]:
    """Inputs of ``graph_alignment_transfer``: the datasets and one pretrained encoder per seed."""
    return {"datasets": f"results/{settings['scale']}/graph_alignment/data/datasets.pt",
            **_seed_files(settings, "encoder.pt", "encoder")}


def graph_alignment_score_files(settings: dict) -> dict[str, str]:
    """Inputs of ``graph_alignment_eval``: the benchmark scores of every seed, the transfer table and
    the tuning tables (the chosen learning rates are reported)."""
    tune = graph_alignment_tune_files(settings)
    tune.pop("datasets")
    return {"transfer": f"results/{settings['scale']}/graph_alignment/transfer/transfer.parquet",
            **_seed_files(settings, "scores.parquet", "scores"), **tune}
