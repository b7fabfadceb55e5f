"""Point clouds for pretraining (clean primitive solids) and for the shifted downstream task (other classes,
hard split), with their FPS + kNN patches computed once here (the grouping depends on the points only).

The dataset is fixed by the scale's settings (its own seed stream), not by the training seed: replicates differ
in backbone pretraining, adapter initialisation and data order. Train, validation and test clouds are
independent draws (new sizes, poses, cuts, clutter), so no test cloud is a copy of a training cloud.
"""

from __future__ import annotations

import numpy as np
import torch

from icmlrepro.core.io import write_json, write_torch
from icmlrepro.core.seeding import derive_seed

from .geometry import patches
from .shapes import DOWNSTREAM_CLASSES, PRETRAIN_CLASSES, sample_cloud


def make_split(classes, per_class: int, split: str, domain: str, s: dict) -> dict[str, torch.Tensor]:
    """``per_class`` clouds of every class with their patches; the rng stream is named by (domain, split, class)."""
    pts, labels = [], []
    for c, name in enumerate(classes):
        rng = np.random.default_rng(derive_seed(s["data_seed"], "topadapter", domain, split, name))
        pts += [sample_cloud(name, s["n_points"], rng, s, hard=domain == "downstream") for _ in range(per_class)]
        labels += [c] * per_class
    points = torch.as_tensor(np.stack(pts))
    centers, rel = patches(points, s["n_groups"], s["group_size"])
    return {"points": points, "centers": centers, "rel": rel, "labels": torch.as_tensor(labels)}


def build(s: dict) -> dict[str, dict]:
    return {"pretrain": {"classes": list(PRETRAIN_CLASSES),
                         "train": make_split(PRETRAIN_CLASSES, s["pretrain_per_class"], "train", "pretrain", s)},
            "downstream": {"classes": list(DOWNSTREAM_CLASSES),
                           **{sp: make_split(DOWNSTREAM_CLASSES, s[f"{sp}_per_class"], sp, "downstream", s)
                              for sp in ("train", "val", "test")}}}


def shared_clouds(a: torch.Tensor, b: torch.Tensor) -> int:
    """How many clouds of ``b`` are (bit-for-bit) a cloud of ``a``: the split audit (must be 0 between splits)."""
    seen = {x.numpy().tobytes() for x in a}
    return sum(x.numpy().tobytes() in seen for x in b)


def save_torch(path, obj) -> None:
    write_torch(path, obj)


def run(job) -> None:
    data = build(job.params)
    save_torch(job.output.pretrain, data["pretrain"])
    save_torch(job.output.downstream, data["downstream"])
    down = data["downstream"]
    audit = {"test_in_train": shared_clouds(down["train"]["points"], down["test"]["points"]),
             "val_in_train": shared_clouds(down["train"]["points"], down["val"]["points"]),
             "classes_in_both_domains": sorted(set(data["pretrain"]["classes"]) & set(down["classes"]))}
    write_json(job.output.summary, {**{dom: {"classes": d["classes"],
                                             **{sp: int(len(v["labels"])) for sp, v in d.items() if sp != "classes"}}
                                           for dom, d in data.items()}, "audit": audit})
