"""Pretrain the backbone of each seed, supervised, on the pretraining domain (clean primitive solids).

Supervised rather than Point-MAE's masked patch reconstruction: at miniature scale and a CPU budget of
seconds it gives a backbone whose features transfer (stated in the claims file's assumptions). The
downstream classes are never seen here.
"""

from __future__ import annotations

import time

from icmlrepro.core.io import read_torch
from icmlrepro.core.seeding import derive_seed, seed_everything

from .backbone import new_backbone
from .data import save_torch
from .fitting import Classifier, accuracy, fit
from .peft_baselines import NoAdapter
from icmlrepro.core.io import read_torch


def pretrain(data: dict, s: dict, seed: int):
    rng = seed_everything(derive_seed(seed, "topadapter", "pretrain"))
    model = Classifier(new_backbone(s), NoAdapter(), len(data["classes"]))
    t0 = time.perf_counter()
    losses = fit(model, data["train"], s["pretrain_epochs"], s["batch"], s["pretrain_lr"], rng)
    return model, {"losses": losses, "train_acc": accuracy(model, data["train"]), "seconds": time.perf_counter() - t0}


def run(job) -> None:
    s = job.params
    data = read_torch(job.input.pretrain)
    out = {}
    for seed in s["seeds"]:
        model, info = pretrain(data, s, seed)
        out[seed] = {"state": model.backbone.state_dict(), **info}
    save_torch(job.output.backbones, out)
