"""Point clouds for pretraining (clean primitive solids) and for the shifted downstream task (other classes,
hard split), with their FPS + kNN patches computed once here (the grouping depends on the points only).

Every replicate (seed) draws its own dataset (pretraining and downstream clouds; the stream is named by
(data_seed, seed, domain, split, class)), so the spread across seeds covers the data as well as pretraining,
initialisation and batch order. Train, validation and test clouds are independent draws (new sizes, poses,
cuts, clutter), so no test cloud is a copy of a training cloud.
"""

from __future__ import annotations

import numpy as np
import torch

from icmlrepro.core.io import write_json, write_torch
from icmlrepro.core.seeding import derive_seed

from .geometry import patches
from .shapes import DOWNSTREAM_CLASSES, PRETRAIN_CLASSES, sample_cloud


def make_split(classes, per_class: int, split: str, domain: str, s: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """``per_class`` clouds of every class with their patches; the rng stream is named by (seed, domain, split, class)."""
    pts, labels = [], []
    for c, name in enumerate(classes):
        rng = np.random.default_rng(derive_seed(s["data_seed"], "topadapter", "replicate", seed, domain, split, name))
        pts += [sample_cloud(name, s["n_points"], rng, s, hard=domain == "downstream") for _ in range(per_class)]
        labels += [c] * per_class
    points = torch.as_tensor(np.stack(pts))
    centers, rel = patches(points, s["n_groups"], s["group_size"])
    return {"points": points, "centers": centers, "rel": rel, "labels": torch.as_tensor(labels)}


def build(s: dict, seed: int = 0) -> dict[str, dict]:
    """One replicate's datasets: the pretraining domain and the downstream train / val / test splits."""
    return {"pretrain": {"classes": list(PRETRAIN_CLASSES),
                         "train": make_split(PRETRAIN_CLASSES, s["pretrain_per_class"], "train", "pretrain", s, seed)},
            "downstream": {"classes": list(DOWNSTREAM_CLASSES),
                           **{sp: make_split(DOWNSTREAM_CLASSES, s[f"{sp}_per_class"], sp, "downstream", s, seed)
                              for sp in ("train", "val", "test")}}}


def shared_clouds(a: torch.Tensor, b: torch.Tensor) -> int:
    """How many clouds of ``b`` are (bit-for-bit) a cloud of ``a``: the split audit (must be 0 between splits)."""
    seen = {x.numpy().tobytes() for x in a}
    return sum(x.numpy().tobytes() in seen for x in b)


def save_torch(path, obj) -> None:
    write_torch(path, obj)


def run(job) -> None:
    """``pretrain.pt`` / ``downstream.pt``: {seed: that replicate's data}; the summary sums the split audits."""
    seeds = [int(x) for x in job.params["seeds"]]
    data = {seed: build(job.params, seed) for seed in seeds}
    save_torch(job.output.pretrain, {seed: d["pretrain"] for seed, d in data.items()})
    save_torch(job.output.downstream, {seed: d["downstream"] for seed, d in data.items()})
    per_seed = {}
    for seed, d in data.items():
        down = d["downstream"]
        per_seed[str(seed)] = {"test_in_train": shared_clouds(down["train"]["points"], down["test"]["points"]),
                               "val_in_train": shared_clouds(down["train"]["points"], down["val"]["points"])}
    first = data[seeds[0]]
    audit = {"test_in_train": sum(a["test_in_train"] for a in per_seed.values()),
             "val_in_train": sum(a["val_in_train"] for a in per_seed.values()),
             "classes_in_both_domains": sorted(set(first["pretrain"]["classes"]) & set(first["downstream"]["classes"])),
             "per_seed": per_seed}
    write_json(job.output.summary, {**{dom: {"classes": dd["classes"],
                                             **{sp: int(len(v["labels"])) for sp, v in dd.items() if sp != "classes"}}
                                           for dom, dd in first.items()}, "audit": audit})
