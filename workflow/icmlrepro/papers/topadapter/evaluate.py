"""metrics.json from every arm's per-seed results: downstream test accuracy (at the validation-picked
learning rate), trainable parameters, their share and their ratio to TopAdapter's (the matched budget), training
time and final training loss, the learning rates picked with their interior and tie flags.

References beside the arms: chance (1 / classes) and the head on a random-init backbone (what the
pretrained features are worth). Paired differences (TopAdapter minus an arm, per seed) are what the
claims' controls compare; ``acc_gap.topadapter_vs_full_ft`` is the margin of the comparability claim.
"""

from __future__ import annotations

import pandas as pd

from icmlrepro.core.io import read_json, write_parquet
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.core.tuning import at_grid_edge

from .train import ARMS

LABELS = {"head": "linear head only", "head_random": "head on a random-init backbone (floor)",
          "full_ft": "full fine-tuning", "lora": "LoRA (peft)", "idpt": "IDPT-style dynamic prompts",
          "dapt": "DAPT-style dynamic adapter + prompts", "point_peft": "Point-PEFT-style prompts + geometry adapter",
          "topadapter": "TopAdapter", "no_totransfer": "TopAdapter without ToTransfer",
          "no_2d": "TopAdapter without 2D simplices", "single_scale": "TopAdapter, single scale",
          "fixed_fusion": "TopAdapter, fixed fusion (no geometric controller)",
          "noise_topology": "TopAdapter fed noise of the same shape instead of simplex features (control)"}


def results_table(paths) -> pd.DataFrame:
    """One row per (arm, seed, learning rate) with the picked rate marked, from every group's results file."""
    rows = []
    for arm, res in ((a, r) for path in paths for a, r in read_json(path)["arms"].items()):
        for seed, r in res["seeds"].items():
            for i, g in enumerate(r["grid"]):
                end = {key: r[key] for key in ("train_acc", "loss_drop_last_fifth", "val_acc_final")
                       if key in r and i == r["chosen"]}
                rows.append({"arm": arm, "seed": int(seed), **g, **end, "chosen": i == r["chosen"],
                             "trainable": r["trainable"], "total": r["total"], "tie": bool(r.get("tie", False)),
                             "selection_se": float(r.get("selection_se", float("nan")))})
    return pd.DataFrame(rows)


def build_metrics(table: pd.DataFrame, s: dict, summary: dict) -> MetricsFile:
    seeds = list(s["seeds"])
    mf = MetricsFile("topadapter", s["scale"], replicate="seed", replicates=seeds)
    ch = table[table["chosen"]].set_index(["arm", "seed"]).sort_index()
    arms = [a for a in ARMS if a in set(table["arm"])]
    n_classes = len(summary["downstream"]["classes"])

    def col(arm, name):
        return [float(ch.loc[(arm, sd), name]) for sd in seeds]

    mf.add("acc.chance", [1.0 / n_classes] * len(seeds), unit="accuracy", direction="higher",
           description="chance accuracy (1 / downstream classes): the trivial reference")
    for arm in arms:
        mf.add(f"acc.{arm}", col(arm, "test_acc"), unit="accuracy", direction="higher",
               description=f"{LABELS[arm]}: downstream test accuracy at the learning rate picked on validation")
        mf.add(f"trainable_params.{arm}", col(arm, "trainable"), unit="parameters", direction="lower",
               description=f"{LABELS[arm]}: trainable parameters (adapter/prompts/LoRA + head, or all for full FT)")
        mf.add(f"trainable_share.{arm}", [t / n for t, n in zip(col(arm, "trainable"), col(arm, "total"))],
               unit="fraction", direction="lower", description=f"{LABELS[arm]}: trainable share of all parameters")
        mf.add(f"chosen_lr.{arm}", col(arm, "lr"), unit="learning rate", direction="none",
               description=f"{LABELS[arm]}: learning rate picked on validation (grid {s['lr_grid']}; one per arm, on "
                           f"the validation accuracy pooled over the seeds at the end of the sweep)")
        mf.add(f"train_seconds.{arm}", col(arm, "train_seconds"), unit="s", direction="lower", timing=True,
               description=f"{LABELS[arm]}: wall time of one training run per seed (equal epochs in every arm; seeds "
                           f"trained together as one vmapped batch, the batch's time divided by its seeds)")
        mf.add(f"final_loss.{arm}", col(arm, "final_loss"), unit="nats", direction="lower",
               description=f"{LABELS[arm]}: mean training loss (augmented batches) over the last epoch at the picked "
                           f"rate (convergence)")
        if "train_acc" in ch.columns:
            mf.add(f"train_acc.{arm}", col(arm, "train_acc"), unit="accuracy", direction="none",
                   description=f"{LABELS[arm]}: accuracy on its own (unrotated) training clouds at the end of training")
            mf.add(f"loss_drop_last_fifth.{arm}", col(arm, "loss_drop_last_fifth"), unit="nats", direction="none",
                   description=f"{LABELS[arm]}: epoch-mean training loss at 4/5 of training minus at the end (what the "
                               f"last fifth of the epochs still removed; small under a cosine schedule by design)")
        mf.add(f"tuning_tie.{arm}", [float(v) for v in col(arm, "tie")], unit="flag (1 = tie)", direction="none",
               description=f"{LABELS[arm]}: 1 where the validation pick was moved to the default rate "
                           f"{s['lr_default']} (or the tied rate nearest it) because the best rate beat it by less "
                           f"than one standard error of the pooled validation accuracy")
    if "topadapter" in arms:
        for arm in arms:
            mf.add(f"param_ratio.{arm}", [a / b for a, b in zip(col(arm, "trainable"), col("topadapter", "trainable"))],
                   unit="ratio", direction="none",
                   description=f"{LABELS[arm]}: trainable parameters / TopAdapter's (counted on the built models; "
                               f"1 = the same budget)")
    if "topadapter" in arms and "full_ft" in arms:
        mf.add("acc_gap.topadapter_vs_full_ft",
               [a - b for a, b in zip(col("topadapter", "test_acc"), col("full_ft", "test_acc"))],
               unit="accuracy", direction="higher",
               description="TopAdapter minus full fine-tuning, paired per seed (the comparability margin)")
    for arm in arms:
        mf.add(f"tuned_interior.{arm}", [float(not at_grid_edge(lr, s["lr_grid"])) for lr in col(arm, "lr")],
               unit="flag (1 = interior)", direction="none",
               description=f"{LABELS[arm]}: 1 where the seed's picked learning rate is an interior rate of the grid "
                           f"{s['lr_grid']}, 0 at its lowest or highest rate (the optimum may lie outside the grid)")
    audit = summary["audit"]
    per_seed = audit.get("per_seed")
    mf.add("test_clouds_in_train", [float(per_seed[str(sd)]["test_in_train"] + per_seed[str(sd)]["val_in_train"])
                                    for sd in seeds] if per_seed else
           [float(audit["test_in_train"] + audit["val_in_train"])] * len(seeds),
           unit="clouds", direction="lower",
           description="validation or test clouds identical to a training cloud (the split's audit: must be 0)")
    mf.add("classes_in_both_domains", [float(len(audit["classes_in_both_domains"]))] * len(seeds), unit="classes",
           direction="lower", description="downstream classes also seen in pretraining (the domain shift's audit: 0)")
    return mf


def run(job) -> None:
    s = job.params
    table = results_table([job.input[f"results_{g}"] for g in s["train_groups"]])
    missing = set(s["arms"]) - set(table["arm"])
    if missing:
        raise ValueError(f"arms in no train group: {sorted(missing)}")
    write_parquet(job.output.table, table)
    build_metrics(table, s, read_json(job.input.summary)).write(job.output.metrics)
