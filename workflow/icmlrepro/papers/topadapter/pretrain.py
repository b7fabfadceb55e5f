"""Pretrain the backbone of each seed, supervised, on the pretraining domain (clean primitive solids).

Supervised rather than Point-MAE's masked patch reconstruction: at miniature scale and a CPU budget of
seconds it gives a backbone whose features transfer (stated in the claims file's assumptions). The
downstream classes are never seen here. The seeds are trained ``seed_batch`` at a time as one vmapped model
(``icmlrepro.core.seedbatch.SeedBatch``; each seed's own initialisation, batch order and AdamW steps).
"""

from __future__ import annotations

import time

import numpy as np

from icmlrepro.core.io import read_torch
from icmlrepro.core.seedbatch import SeedBatch
from icmlrepro.core.seeding import derive_seed

from .backbone import new_backbone
from .data import save_torch
from .fitting import Classifier, accuracy_batched, fit_batched
from .peft_baselines import NoAdapter


def pretrain(data: dict, s: dict, seeds) -> dict[int, dict]:
    """Every seed's backbone state (trained on ``data[seed]``, that replicate's pretraining clouds), its training
    losses, training accuracy and (batch-shared) seconds."""
    seeds = [int(x) for x in seeds]
    datas = [data[seed]["train"] for seed in seeds]
    n_classes = len(data[seeds[0]]["classes"])
    batch = SeedBatch(lambda: Classifier(new_backbone(s), NoAdapter(), n_classes), seeds, "topadapter", "pretrain")
    rngs = [np.random.default_rng(derive_seed(seed, "topadapter", "pretrain")) for seed in seeds]
    t0 = time.perf_counter()
    losses = fit_batched(batch, datas, s["pretrain_epochs"], s["batch"], s["pretrain_lr"], rngs)
    seconds = (time.perf_counter() - t0) / len(seeds)
    acc = accuracy_batched(batch, datas)
    states = batch.state_dicts()
    return {seed: {"state": {k[len("backbone."):]: v for k, v in states[seed].items() if k.startswith("backbone.")},
                   "losses": losses[:, i].tolist(), "train_acc": acc[i], "seconds": seconds}
            for i, seed in enumerate(seeds)}


def run(job) -> None:
    s = job.params
    data = {int(seed): d for seed, d in read_torch(job.input.pretrain).items()}
    k = int(s.get("seed_batch", len(s["seeds"])))
    out = {}
    for i in range(0, len(s["seeds"]), k):
        out.update(pretrain(data, s, s["seeds"][i:i + k]))
    save_torch(job.output.backbones, out)
