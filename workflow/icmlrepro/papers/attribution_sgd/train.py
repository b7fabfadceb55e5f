"""Train every arm of one model family on every data set for every seed, and measure each model.

One job per family loops over seeds, data sets, the family's models and the arms, so that the
start-up cost is paid once. All arms of a (data set, model, seed) start from the same
initialisation and run the same number of steps, so they differ only in the training dynamics:

* the SGD sweep: plain SGD (no momentum, no weight decay) at each (learning rate, batch size) of
  ``sweep``; the noise scale is lr / batch. ``sweep[0]`` is the high-noise arm of the claims
  (fixed in the config before any run);
* ``gd``: full-batch gradient descent at sweep[0]'s learning rate, the same number of steps (the
  control without SGD noise);
* on the headline (data set, model) only: the label-shuffled arms (sweep[0] and gd on training
  labels permuted once per seed: the control that the gain comes from learning the task) and the
  explicit regulariser, full-batch GD + lam * mean ||d loss / d x||^2 (input-gradient
  regularisation, Ross & Doshi-Velez 2018) for each lam of ``reg_lams``, with its training time.

Every arm runs the same schedule: a linear learning-rate warm-up over the first ``warmup_steps``
steps and the gradient's global norm clipped at ``clip_norm`` (a safeguard against loss spikes: plain
SGD at lr 0.3 without it diverged or collapsed in some seeds of the lfw CNN at batch 8, the kernel ViT
under GD and the lam = 1 regulariser; the share of clipped steps is recorded per arm).

Each model is then measured (``measure``): test and training accuracy, sharpness, input-Hessian norm,
and the robustness of every attribution method under random sign noise and the top-k attack. On the
headline workload the FLOPs per training example of one step of each arm are counted (torch's
profiler): the computational overhead of an arm relative to GD.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as F

from icmlrepro.core.io import read_parquet, write_parquet
from icmlrepro.core.seeding import derive_seed, seed_everything

from . import curvature, robustness
from .data import N_CLASSES, PATCH, SHAPES, from_table
from .models import FAMILIES, build


def split(n: int, seed: int, dataset: str, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(derive_seed(seed, "attribution_sgd", dataset, "split")).permutation(n)
    k = int(round(test_fraction * n))
    return np.sort(perm[k:]), np.sort(perm[:k])


def arms(p: dict, headline: bool) -> list[dict]:
    """The training arms of one (data set, model); see the module docstring."""
    lr0 = p["sweep"][0]["lr"]
    out = [{"arm": f"sgd_lr{s['lr']:g}_b{s['batch']}", "lr": s["lr"], "batch": s["batch"], "labels": "true",
            "reg": 0.0} for s in p["sweep"]]
    out.append({"arm": "gd", "lr": lr0, "batch": 0, "labels": "true", "reg": 0.0})
    if headline:
        out += [{**out[0], "arm": "shuffled_sgd", "labels": "shuffled"},
                {**out[-1], "arm": "shuffled_gd", "labels": "shuffled"}]
        out += [{"arm": f"gd_reg{lam:g}", "lr": lr0, "batch": 0, "labels": "true", "reg": lam} for lam in p["reg_lams"]]
    return out


def input_gradient_penalty(model, x, y) -> torch.Tensor:
    xi = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(F.cross_entropy(model(xi), y, reduction="sum"), xi, create_graph=True)
    return (g**2).reshape(len(x), -1).sum(1).mean()


def lr_at(step: int, lr: float, warmup: int) -> float:
    """Linear warm-up to ``lr`` over the first ``warmup`` steps (step counted from 0), then constant."""
    return lr * min(1.0, (step + 1) / warmup) if warmup > 0 else lr


def arm_loss(model, xb, yb, arm: dict) -> torch.Tensor:
    loss = F.cross_entropy(model(xb), yb)
    if arm["reg"]:
        loss = loss + arm["reg"] * input_gradient_penalty(model, xb, yb)
    return loss


def train_arm(model, x, y, arm: dict, steps: int, seed: int, warmup: int = 0,
              clip: float = 0.0) -> tuple[float, float]:
    """Plain SGD / GD for ``steps`` steps (warm-up, global-norm clipping at ``clip`` when > 0); returns the
    training wall time in seconds and the share of steps whose gradient was clipped."""
    opt = torch.optim.SGD(model.parameters(), lr=arm["lr"])
    gen = np.random.default_rng(derive_seed(seed, "attribution_sgd", "batches", arm["arm"]))
    n, b = len(x), arm["batch"] or len(x)
    clipped = 0
    t0 = time.perf_counter()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, arm["lr"], warmup)
        idx = torch.as_tensor(gen.choice(n, size=min(b, n), replace=False)) if b < n else slice(None)
        loss = arm_loss(model, x[idx], y[idx], arm)
        opt.zero_grad()
        loss.backward()
        if clip > 0:
            clipped += int(float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip)) > clip)
        opt.step()
    return time.perf_counter() - t0, clipped / max(steps, 1)


def flops_per_example(model, x, y, arm: dict) -> float:
    """FLOPs of one training step (forward, penalty, backward) of ``arm`` per example of its batch, counted
    by torch's profiler (``with_flops``: matrix products and convolutions, from their shapes) on a copy of
    the model, which is not touched. (FlopCounterMode's module hooks refuse the penalty's autograd.grad.)"""
    from torch.profiler import ProfilerActivity, profile

    m = copy.deepcopy(model)
    b = min(arm["batch"] or len(x), len(x))
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        arm_loss(m, x[:b], y[:b], arm).backward()
    return float(sum(e.flops for e in prof.key_averages())) / b


def measure(model, name: str, data: dict, p: dict, seed: int, y_fit: torch.Tensor) -> list[dict]:
    """Rows (perturbation, method, topk, spearman, kendall) plus the model's scalars; ``y_fit`` are the
    training labels the model was fitted to (permuted for the label-shuffled arms)."""
    model.eval()
    xe, ye = data["x_eval"], data["y_eval"]
    with torch.no_grad():
        acc = float((model(data["x_test"]).argmax(1) == data["y_test"]).float().mean())
        train_acc = float((model(data["x_train"]).argmax(1) == y_fit).float().mean())
        target = model(xe).argmax(1)
    scalars = {
        "accuracy": acc,
        "train_accuracy": train_acc,
        "sharpness": curvature.sharpness(model, data["x_hess"], data["y_hess"], p["power_iters"],
                                         derive_seed(seed, "attribution_sgd", "power")),
        "input_curvature": curvature.input_hessian_norm(model, xe, ye, p["hutchinson_probes"],
                                                        derive_seed(seed, "attribution_sgd", "hutchinson")),
    }
    perturbed = {"noise": data["x_noise"], "attack": robustness.topk_attack(model, xe, target, p["eps"], p["k"],
                                                                            p["attack_steps"])}
    scalars["attack_linf"] = float((perturbed["attack"] - xe).abs().max())
    rows = []
    for method in robustness.METHODS:
        sd = derive_seed(seed, "attribution_sgd", "smoothgrad")
        clean = robustness.attributions(model, xe, target, method, p, sd)
        for pert, xp in perturbed.items():
            r = robustness.compare(clean, robustness.attributions(model, xp, target, method, p, sd), p["k"])
            rows.append({"perturbation": pert, "method": method, **r})
    if name.startswith("vit"):
        clean = model.rollout(xe).numpy()
        for pert, xp in perturbed.items():
            r = robustness.compare(clean, model.rollout(xp).numpy(), p["k_tokens"])
            rows.append({"perturbation": pert, "method": "rollout", **r})
    return [{**row, **scalars} for row in rows]


def dataset_tensors(table: pd.DataFrame, dataset: str, seed: int, p: dict) -> dict:
    x, y = from_table(table, dataset)
    tr, te = split(len(y), seed, dataset, p["test_fraction"])
    tr = tr[: p["n_train"]]  # full-batch GD sees all of these at every step
    x, y = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
    ev = te[: p["n_eval"]]
    gen = torch.Generator().manual_seed(derive_seed(seed, "attribution_sgd", dataset, "noise"))
    shuffled = y[tr][torch.as_tensor(np.random.default_rng(derive_seed(seed, "attribution_sgd", dataset, "shuffle"))
                                     .permutation(len(tr)))]
    return {"x_train": x[tr], "y_train": y[tr], "y_shuffled": shuffled, "x_test": x[te], "y_test": y[te],
            "x_eval": x[ev], "y_eval": y[ev], "x_noise": robustness.sign_noise(x[ev], p["eps"], gen),
            "x_hess": x[tr][: p["n_hess"]], "y_hess": y[tr][: p["n_hess"]],
            "majority_rate": float((y[te] == torch.bincount(y[tr]).argmax()).float().mean()),
            "train_majority_rate": float(torch.bincount(y[tr]).max()) / len(tr)}


def train_family(tables: dict[str, pd.DataFrame], family: str, seed: int, p: dict) -> pd.DataFrame:
    rows = []
    for dataset in p["datasets"][family]:
        data = dataset_tensors(tables[dataset], dataset, seed, p)
        for name in FAMILIES[family]:
            headline = (dataset, name) == (p["headline"]["dataset"], p["headline"]["model"])
            for arm in arms(p, headline):
                seed_everything(derive_seed(seed, "attribution_sgd", dataset, name, "init"))
                model = build(name, SHAPES[dataset], N_CLASSES[dataset], p["width"], PATCH[dataset])
                y = data["y_shuffled"] if arm["labels"] == "shuffled" else data["y_train"]
                flops = flops_per_example(model, data["x_train"], y, arm) if headline else float("nan")
                seconds, clipped = train_arm(model, data["x_train"], y, arm, p["steps"], seed, p["warmup_steps"],
                                             p["clip_norm"])
                batch = arm["batch"] or len(y)
                info = {"dataset": dataset, "model": name, **arm, "batch": batch, "noise_scale": arm["lr"] / batch,
                        "train_seconds": seconds, "clipped_share": clipped, "flops_per_example": flops,
                        "majority_rate": data["majority_rate"], "train_majority_rate": data["train_majority_rate"]}
                rows += [{**info, **r} for r in measure(model, name, data, p, seed, y)]
    df = pd.DataFrame(rows)
    df.insert(0, "seed", seed)
    return df


def run(job) -> None:
    """Every seed of one family in one job (start-up, imports and data paid once; each seed's arms start from
    ``seed_everything`` of their own derived seed, so a seed's rows do not depend on the other seeds)."""
    p = job.params
    family = job.wildcards.family
    tables = {d: read_parquet(job.input[d]) for d in p["datasets"][family]}
    write_parquet(job.output.table, pd.concat([train_family(tables, family, int(s), p) for s in p["seeds"]],
                                              ignore_index=True))
