"""One arm (a job runs a group of arms): for every seed, train on the downstream task at every learning rate of the grid (the same grid,
epochs and batch for every arm), pick the rate by validation accuracy, report its test accuracy.

Arms: ``head`` (linear head on the frozen pretrained backbone), ``head_random`` (the same on a random-init
backbone: how much pretraining gives), ``full_ft`` (everything trained), ``lora`` (peft), ``idpt``, ``dapt``,
``point_peft`` (peft_baselines.py), ``topadapter`` and its ablations / control (method.py VARIANTS).
Every arm of a seed starts from that seed's pretrained backbone; the head and adapter initialisation and the
batch order are seeded per (seed, arm).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from icmlrepro.core.io import read_torch, write_json
from icmlrepro.core.seeding import derive_seed, seed_everything
from icmlrepro.core.tuning import at_grid_edge

from .backbone import new_backbone
from .fitting import Classifier, accuracy, count_params, fit
from .method import VARIANTS, TopAdapter
from .peft_baselines import DAPT, IDPT, NoAdapter, PointPEFT, add_lora

BASELINES = ("head", "head_random", "full_ft", "lora", "idpt", "dapt", "point_peft")
TOPADAPTER_ARMS = {"topadapter": "full", **{v: v for v in VARIANTS if v != "full"}}
ARMS = BASELINES + tuple(TOPADAPTER_ARMS)


def build(arm: str, state: dict | None, s: dict, n_classes: int) -> Classifier:
    """The arm's classifier: the pretrained backbone (frozen unless ``full_ft``), its adapter, a fresh head."""
    bb = new_backbone(s)
    if arm != "head_random":
        bb.load_state_dict(state)
    d, depth, r, P = s["d"], s["depth"], s["adapter_dim"], s["n_prompts"]
    if arm in TOPADAPTER_ARMS:
        adapter = TopAdapter(d, depth, s["topo_dim"], r, s["scales"], TOPADAPTER_ARMS[arm])
    else:
        adapter = {"idpt": lambda: IDPT(d, depth, r, P), "dapt": lambda: DAPT(d, depth, r, P),
                   "point_peft": lambda: PointPEFT(d, depth, r, P, s["k_patches"])}.get(arm, NoAdapter)()
    for p in bb.parameters():
        p.requires_grad_(arm == "full_ft")
    if arm == "lora":
        bb = add_lora(bb, s["lora_rank"], 2.0 * s["lora_rank"])
        for name, p in bb.named_parameters():
            p.requires_grad_("lora_" in name)
    return Classifier(bb, adapter, n_classes)


def _fix_noise(model: Classifier, seed: int, arm: str, what: str) -> None:
    """The noise control draws its noise from a seeded generator (training and evaluation separately)."""
    gen = getattr(model.adapter, "generator", None)
    if gen is not None and gen.noise:
        gen.gen = torch.Generator().manual_seed(derive_seed(seed, "topadapter", "noise", arm, what))


def run_seed(arm: str, data: dict, state: dict, s: dict, seed: int) -> dict:
    n_classes = len(data["classes"])
    rows = []
    for lr in s["lr_grid"]:
        rng = seed_everything(derive_seed(seed, "topadapter", "train", arm, lr))
        torch.manual_seed(derive_seed(seed, "topadapter", "init", arm))  # same init at every rate
        model = build(arm, state, s, n_classes)
        _fix_noise(model, seed, arm, "train")
        t0 = time.perf_counter()
        losses = fit(model, data["train"], s["epochs"], s["batch"], lr, rng)
        seconds = time.perf_counter() - t0
        _fix_noise(model, seed, arm, "val")
        val = accuracy(model, data["val"])
        _fix_noise(model, seed, arm, "test")
        rows.append({"lr": lr, "val_acc": val, "test_acc": accuracy(model, data["test"]),
                     "train_seconds": seconds, "final_loss": float(np.mean(losses[-5:]))})
    trainable, total = count_params(model)
    best = max(range(len(rows)), key=lambda i: (rows[i]["val_acc"], -i))  # ties: the smaller rate
    return {"grid": rows, "chosen": best, "chosen_lr": rows[best]["lr"], "test_acc": rows[best]["test_acc"],
            "val_acc": rows[best]["val_acc"], "at_grid_edge": at_grid_edge(rows[best]["lr"], s["lr_grid"]),
            "trainable": trainable, "total": total,
            "train_seconds": float(np.mean([r["train_seconds"] for r in rows]))}


def run(job) -> None:
    """One job per group of arms (config ``train_groups``): few jobs, each paying torch's start-up once."""
    s, group = job.params, job.wildcards.group
    data = read_torch(job.input.downstream)
    backbones = read_torch(job.input.backbones)
    out = {"group": group, "arms": {arm: {"seeds": {str(seed): run_seed(arm, data, backbones[seed]["state"], s, seed)
                                                    for seed in s["seeds"]}}
                                    for arm in s["train_groups"][group]}}
    write_json(job.output.results, out)
