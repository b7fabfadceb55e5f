"""One arm (a job runs a group of arms), tuned the same way in every arm: a learning-rate sweep that is the start
of the full run (every rate of the grid trains the first ``sweep_epochs`` of the ``epochs``-long cosine schedule),
one rate picked per arm on the validation accuracy pooled over the seeds (ties within the pooled selection's
standard error go to the default rate), the picked rate's runs carried on to ``epochs``; its test accuracy.

Arms: ``head`` (linear head on the frozen pretrained backbone), ``head_random`` (the same on a random-init
backbone: how much pretraining gives), ``full_ft`` (everything trained), ``lora`` (peft), ``idpt``, ``dapt``,
``point_peft`` (peft_baselines.py), ``topadapter`` and its ablations / control (method.py VARIANTS).
Every arm of a seed starts from that seed's pretrained backbone; the head and adapter initialisation
(``init_seed(seed, "topadapter", arm)``, the same at every rate) and the batch order are seeded per (seed, arm).

Parameter budgets: with ``match_params`` the width of each sized baseline (LoRA's rank; the bottleneck of the
IDPT-, DAPT- and Point-PEFT-style modules) is the one whose trainable-parameter count, counted on the built
model, is nearest TopAdapter's (``matched_widths``), so "beats the PEFT methods" compares equal budgets.

Seeds are trained ``seed_batch`` at a time as one vmapped model (``icmlrepro.core.seedbatch.SeedBatch``): the
same initialisation, batch order and AdamW steps as each seed alone, to float rounding (tests/test_topadapter.py).
"""

from __future__ import annotations

import functools
import time

import numpy as np
import torch

from icmlrepro.core.io import read_torch, write_json
from icmlrepro.core.seedbatch import SeedBatch, init_seed
from icmlrepro.core.seeding import derive_seed
from icmlrepro.core.tuning import accuracy_se, at_grid_edge, pick_with_ties

from .backbone import new_backbone
from .fitting import BatchedRun, Classifier, accuracy_batched, count_params, freeze_like
from .geometry import simplex_table
from .method import VARIANTS, TopAdapter
from .peft_baselines import DAPT, IDPT, NoAdapter, PointPEFT, add_lora

BASELINES = ("head", "head_random", "full_ft", "lora", "idpt", "dapt", "point_peft")
TOPADAPTER_ARMS = {"topadapter": "full", **{v: v for v in VARIANTS if v != "full"}}
ARMS = BASELINES + tuple(TOPADAPTER_ARMS)


WIDTH_ARMS = ("lora", "idpt", "dapt", "point_peft")  # baselines whose width is sized to TopAdapter's budget


def build(arm: str, state: dict | None, s: dict, n_classes: int, width: int | None = None) -> Classifier:
    """The arm's classifier: the pretrained backbone (frozen unless ``full_ft``), its adapter, a fresh head.
    ``width``: LoRA's rank or the baseline's bottleneck (default: ``lora_rank`` / ``adapter_dim``)."""
    bb = new_backbone(s)
    if arm != "head_random" and state is not None:
        bb.load_state_dict(state)
    d, depth, r, P = s["d"], s["depth"], s["adapter_dim"], s["n_prompts"]
    w = width if width is not None else (s["lora_rank"] if arm == "lora" else r)
    if arm in TOPADAPTER_ARMS:
        adapter = TopAdapter(d, depth, s["topo_dim"], r, s["scales"], TOPADAPTER_ARMS[arm])
    else:
        adapter = {"idpt": lambda: IDPT(d, depth, w, P), "dapt": lambda: DAPT(d, depth, w, P),
                   "point_peft": lambda: PointPEFT(d, depth, w, P, s["k_patches"])}.get(arm, NoAdapter)()
    for p in bb.parameters():
        p.requires_grad_(arm == "full_ft")
    if arm == "lora":
        bb = add_lora(bb, w, 2.0 * w)
        for name, p in bb.named_parameters():
            p.requires_grad_("lora_" in name)
    return Classifier(bb, adapter, n_classes)


def trainable_of(arm: str, s: dict, n_classes: int, width: int | None = None) -> int:
    """Trainable parameters of the arm as built (no pretrained weights needed to count them)."""
    return count_params(build(arm, None, s, n_classes, width))[0]


def matched_widths(s: dict, n_classes: int) -> dict[str, int]:
    """Each sized baseline's width: with ``match_params``, the width whose built trainable count is nearest
    TopAdapter's (ties: the smaller); else the configured ``lora_rank`` / ``adapter_dim``."""
    if not s.get("match_params", False):
        return {a: s["lora_rank"] if a == "lora" else s["adapter_dim"] for a in WIDTH_ARMS}
    target = trainable_of("topadapter", s, n_classes)
    out = {}
    for arm in WIDTH_ARMS:  # the count grows with the width: double, then bisect for the first width >= target
        count = functools.lru_cache(None)(lambda w, arm=arm: trainable_of(arm, s, n_classes, w))
        hi = 1
        while count(hi) < target and hi < 64 * s["d"]:
            hi *= 2
        lo = hi // 2 + 1 if hi > 1 else 1
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if count(mid) < target else (lo, mid)
        out[arm] = min((w for w in (hi - 1, hi) if w >= 1), key=lambda w: (abs(count(w) - target), w))
    return out


def build_seed_batch(arm: str, states: dict, s: dict, n_classes: int, seeds, width: int | None = None):
    """The arm's classifiers for ``seeds`` (seed k's built from its own backbone, under its own init seed) as one
    SeedBatch, frozen parameters kept frozen; returns (batch, one copy as built, for counting)."""
    queue = list(seeds)
    built = []

    def make():
        m = build(arm, states.get(queue.pop(0)) if states else None, s, n_classes, width)
        built.append(m)
        return m

    batch = SeedBatch(make, seeds, "topadapter", arm)
    freeze_like(batch, built[0])
    return batch, built[0]


def build_alone(arm: str, state: dict | None, s: dict, n_classes: int, seed: int, width: int | None = None):
    """One seed's classifier exactly as SeedBatch builds it (the reference of the batch-equals-alone test)."""
    torch.manual_seed(init_seed(seed, "topadapter", arm))
    return build(arm, state, s, n_classes, width)


def train_rngs(seeds, arm: str, lr: float) -> list[np.random.Generator]:
    return [np.random.default_rng(derive_seed(seed, "topadapter", "train", arm, lr)) for seed in seeds]


def _noise_seed(model, seeds, arm: str, lr: float, what: str) -> None:
    """The noise control draws its noise inside vmap (different per seed) from torch's global generator, seeded
    per (seeds of the batch, arm, rate, phase): reproducible, but a seed's noise depends on its batch-mates."""
    gen = getattr(model.adapter, "generator", None) if hasattr(model, "adapter") else None
    if gen is not None and gen.noise:
        torch.manual_seed(derive_seed(0, "topadapter", "noise", arm, lr, what, *seeds))


def add_simplex_tables(data: dict, scales) -> None:
    """Each split's simplex table (geometry.simplex_table), once: the simplex generator reads it instead of
    recomputing the kNN complexes at every step for every seed (rotated with the clouds during training)."""
    for split in ("train", "val", "test"):
        if "topo" not in data[split]:
            data[split]["topo"] = simplex_table(data[split]["rel"], scales)


def epoch_means(losses: np.ndarray, epochs: int) -> np.ndarray:
    """The mean training loss of each epoch (the convergence curve recorded per seed and rate)."""
    return np.asarray(losses, dtype=float).reshape(epochs, -1).mean(1)


def run_arm(arm: str, data: dict, states: dict, s: dict, widths: dict[str, int] | None = None) -> dict:
    """Every seed of one arm (``data[seed]``: that replicate's downstream splits), tuned by a learning-rate sweep
    that is the start of the full run: every rate of the grid trains ``sweep_epochs`` epochs of the
    ``epochs``-long cosine schedule; the rate is picked once per arm on the validation accuracy pooled over the
    seeds (ties within one standard error of the pooled accuracy go to ``lr_default`` or the tied rate nearest
    it); the picked rate's runs carry on to ``epochs`` (the same run as one uninterrupted ``epochs``-long run).
    Validation at the end, test accuracy at the picked rate only, the training loss curve per epoch."""
    seeds = [int(x) for x in s["seeds"]]
    n_classes = len(data[seeds[0]]["classes"])
    width = (widths or {}).get(arm)
    k = int(s.get("seed_batch", len(seeds)))
    chunks = [seeds[i:i + k] for i in range(0, len(seeds), k)]
    epochs = int(s["epochs"])
    sweep = min(int(s.get("sweep_epochs", epochs)), epochs)
    grid = {seed: [] for seed in seeds}
    ref = None
    topo = arm in TOPADAPTER_ARMS
    if topo:
        for seed in seeds:
            add_simplex_tables(data[seed], s["scales"])
    runs = {}
    for lr in s["lr_grid"]:
        for c, chunk in enumerate(chunks):
            batch, ref = build_seed_batch(arm, states, s, n_classes, chunk, width)
            _noise_seed(ref, chunk, arm, lr, "train")
            run = BatchedRun(batch, [data[sd]["train"] for sd in chunk], epochs, s["batch"], lr,
                             train_rngs(chunk, arm, lr), topo=topo)
            t0 = time.perf_counter()
            losses = run.train(sweep)
            seconds = time.perf_counter() - t0
            _noise_seed(ref, chunk, arm, lr, "val")
            val = accuracy_batched(batch, [data[sd]["val"] for sd in chunk], topo=topo)
            runs[lr, c] = (run, losses, seconds)
            for i, seed in enumerate(chunk):
                grid[seed].append({"lr": lr, "val_acc": val[i], "sweep_loss": float(epoch_means(losses[:, i], sweep)[-1]),
                                   "test_acc": None, "final_loss": None})
    trainable, total = count_params(ref)
    n_val = len(data[seeds[0]]["val"]["labels"])
    pooled = [float(np.mean([grid[sd][j]["val_acc"] for sd in seeds])) for j in range(len(s["lr_grid"]))]
    se = accuracy_se(max(pooled), n_val * len(seeds))
    pick = pick_with_ties(s["lr_grid"], pooled, s["lr_default"], tolerance=se)
    lr = pick.value
    out = {}
    for c, chunk in enumerate(chunks):  # the picked rate's runs carry on to the end of their schedule
        run, first, seconds = runs[lr, c]
        _noise_seed(ref, chunk, arm, lr, "continue")
        t0 = time.perf_counter()
        losses = np.concatenate([first, run.train(epochs - sweep)])
        seconds = (seconds + time.perf_counter() - t0) / len(chunk)
        fin = {}
        for split in ("val", "test", "train"):
            _noise_seed(ref, chunk, arm, lr, split)
            fin[split] = accuracy_batched(run.model, [data[sd][split] for sd in chunk], topo=topo)
        for i, seed in enumerate(chunk):
            curve = epoch_means(losses[:, i], epochs)
            fifth = max(1, epochs // 5)
            row = grid[seed][pick.index]
            row.update({"test_acc": fin["test"][i], "final_loss": float(curve[-1]), "train_seconds": seconds})
            out[str(seed)] = {"grid": grid[seed], "chosen": pick.index, "chosen_lr": lr, "test_acc": fin["test"][i],
                              "val_acc": row["val_acc"], "val_acc_final": fin["val"][i], "train_acc": fin["train"][i],
                              "pooled_val_acc": pooled, "selection_se": se, "tie": bool(pick.moved_by_tie),
                              "at_grid_edge": at_grid_edge(lr, s["lr_grid"]), "trainable": trainable, "total": total,
                              "width": width, "train_seconds": seconds, "final_loss": float(curve[-1]),
                              "loss_drop_last_fifth": float(curve[-fifth - 1] - curve[-1]) if epochs > fifth else 0.0,
                              "loss_curve": [float(x) for x in curve], "sweep_epochs": sweep, "epochs": epochs}
    return {"seeds": out}


def run(job) -> None:
    """One job per group of arms (config ``train_groups``): few jobs, each paying torch's start-up once."""
    s, group = job.params, job.wildcards.group
    data = {int(seed): d for seed, d in read_torch(job.input.downstream).items()}
    backbones = read_torch(job.input.backbones)
    states = {int(seed): b["state"] for seed, b in backbones.items()}
    widths = matched_widths(s, len(next(iter(data.values()))["classes"]))
    out = {"group": group, "widths": widths,
           "arms": {arm: run_arm(arm, data, states, s, widths) for arm in s["train_groups"][group]}}
    write_json(job.output.results, out)
