"""One arm, every seed: train on EMBHazard-style pairs, then predict the test pairs.

Arms (what each one removes), all with the same network size, pair budget, epochs, batch and learning rate:

- ``guard``: the action-conditioned guard on all four variants (base, hazard removal, hazard augmentation,
  action augmentation).
- ``guard_no_removal``: without hazard-removal pairs (the ablation of scene augmentation's safe twins).
- ``guard_no_action_aug``: without action-augmentation pairs (no safe action on a visible hazard).
- ``guard_shuffled``: the guard whose training actions are permuted across pairs (the action carries no
  information about the label: the control of action conditioning).
- ``observation_only``: the same network without the action (one learned query).
- ``guard_confounded``: the control of compositional variation. The same network and budget, trained on the
  risky pairs (base, hazard augmentation) and on ``confounded`` safe pairs that vary the hazard and the action
  at once (inert image + safe action, ``data.confounded_variants``): the data of both benign variants kept,
  the one-factor contrast (same image, other action; same action, other state) removed. The true rule still
  fits its labels, so it could learn it.
- ``salience``: the stand-in for large general models. The same network without the action, trained on
  pairs drawn from the same variants as the guard's, with the labels of generic hazard recognition (unsafe iff any hazard element is visibly active;
  hazard and type: the scenario's element), i.e. over-cautious by its training target but with learned,
  imperfect perception (the perfect-perception rule is kept as the reference ``salience_oracle``).

Every arm trains on ``train_pairs`` pairs drawn from the variants it may use, so the ablations differ in what
the data varies, not in how much data there is. Each seed trains and is tested on its own data set (drawn from
that seed by ``data.build_all``) and draws its own sample, initial weights and batch order.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from icmlrepro.core.io import read_npy, read_npz, read_parquet, write_parquet, write_torch
from icmlrepro.core.seeding import derive_seed, seed_everything

from .model import Guard, decode, guard_loss
from .taxonomy import ELEMENT, HAZARD_CLASSES, TYPE_CLASSES

ALL_VARIANTS = ("base", "hazard_removal", "hazard_aug", "action_aug")
ARMS = {  # arm: (variants used, sees the action, actions shuffled)
    "guard": (ALL_VARIANTS, True, False),
    "guard_no_removal": (("base", "hazard_aug", "action_aug"), True, False),
    "guard_no_action_aug": (("base", "hazard_removal", "hazard_aug"), True, False),
    "guard_shuffled": (ALL_VARIANTS, True, True),
    "observation_only": (ALL_VARIANTS, False, False),
    "guard_confounded": (("base", "hazard_aug", "confounded"), True, False),
    "salience": (ALL_VARIANTS, False, False),
}
PRESENCE_LABELS = ("salience",)  # arms trained on "any hazard visibly active" instead of the action-conditioned label


def presence_labels(tr: pd.DataFrame) -> pd.DataFrame:
    """Generic hazard-recognition labels: unsafe iff any hazard element is active in the image; the named hazard
    and type are the scenario's element (active in every such scene), ``none`` otherwise."""
    unsafe = tr["active"].fillna("") != ""
    return tr.assign(unsafe=unsafe, hazard=np.where(unsafe, tr["target"], "none"),
                     risk_type=np.where(unsafe, tr["target"].map(lambda h: ELEMENT[h].category), "none"))


def training_set(pairs: pd.DataFrame, arm: str, budget: int, rng: np.random.Generator) -> pd.DataFrame:
    """``budget`` training pairs drawn without replacement from the variants the arm may use; with
    shuffled actions, the action ids are permuted across the drawn pairs (labels and images kept); the
    salience stand-in gets presence labels on the same pairs."""
    allowed, _, shuffled = ARMS[arm]
    tr = pairs[(pairs["part"] == "train") & pairs["variant"].isin(allowed)].reset_index(drop=True)
    if budget > len(tr):
        raise ValueError(f"embguard arm {arm}: train_pairs={budget} > {len(tr)} pairs of its variants "
                         "(train_pairs must be <= 3 x n_train_base)")
    tr = tr.iloc[np.sort(rng.choice(len(tr), size=budget, replace=False))].reset_index(drop=True)
    if shuffled:
        tr["action_id"] = tr["action_id"].to_numpy()[rng.permutation(len(tr))]
    if arm in PRESENCE_LABELS:
        tr = presence_labels(tr)
    return tr


def tensors(df: pd.DataFrame, images: np.ndarray, actions: np.ndarray) -> dict[str, torch.Tensor]:
    return {"x": torch.as_tensor(np.ascontiguousarray(images[df["image"].to_numpy()]), dtype=torch.float32) / 255.0,
            "a": torch.as_tensor(actions[df["action_id"].to_numpy()]),
            "risk": torch.as_tensor(df["unsafe"].to_numpy().astype(np.int64)),
            "type": torch.as_tensor(df["risk_type"].map(TYPE_CLASSES.index).to_numpy(dtype=np.int64, copy=True)),
            "hazard": torch.as_tensor(df["hazard"].map(HAZARD_CLASSES.index).to_numpy(dtype=np.int64, copy=True))}


def new_model(s: dict, arm: str, action_dim: int, seed: int) -> Guard:
    torch.manual_seed(derive_seed(seed, "embguard", "init", arm))
    return Guard(action_dim, s["grid"], s["width"], s["hidden"], use_action=ARMS[arm][1])


def fit(model: Guard, data: dict, s: dict, rng: np.random.Generator) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"], weight_decay=1e-4)
    n, losses = len(data["risk"]), []
    model.train()
    for _ in range(s["epochs"]):
        order = rng.permutation(n)
        for i in range(0, n, s["batch"]):
            b = torch.as_tensor(order[i:i + s["batch"]])
            loss = guard_loss(model(data["x"][b], data["a"][b]), data["risk"][b], data["type"][b], data["hazard"][b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def predict(model: Guard, data: dict, chunk: int = 512) -> pd.DataFrame:
    model.eval()
    outs = [decode(model(data["x"][i:i + chunk], data["a"][i:i + chunk])) for i in range(0, len(data["x"]), chunk)]
    unsafe, rtype, hazard = (torch.cat([o[k] for o in outs]).numpy() for k in range(3))
    return pd.DataFrame({"pred_unsafe": unsafe.astype(bool), "pred_type": np.asarray(TYPE_CLASSES)[rtype],
                         "pred_hazard": np.asarray(HAZARD_CLASSES)[hazard]})


def train_arm(arm: str, pairs: pd.DataFrame, images: np.ndarray, actions: np.ndarray, s: dict, seed: int):
    """(model, test predictions, losses, seconds) of one arm and seed."""
    rng = seed_everything(derive_seed(seed, "embguard", "train", arm))
    tr = training_set(pairs, arm, s["train_pairs"], rng)
    model = new_model(s, arm, actions.shape[1], seed)
    t0 = time.perf_counter()
    losses = fit(model, tensors(tr, images, actions), s, rng)
    seconds = time.perf_counter() - t0
    te = pairs[pairs["part"] == "test"].reset_index(drop=True)
    pred = pd.concat([te[["image", "base", "split", "action_id"]], predict(model, tensors(te, images, actions))], axis=1)
    return model, pred, losses, seconds


def run(job) -> None:
    s, arm = job.params, job.wildcards.arm
    pairs = read_parquet(job.input.pairs)
    images, actions = read_npz(job.input.images)["images"], read_npy(job.input.actions)
    preds, states = [], {}
    for seed in s["seeds"]:
        own = pairs[pairs["seed"] == seed].reset_index(drop=True)  # this seed's own train and test sets
        if own.empty:
            raise ValueError(f"embguard: no pairs drawn for seed {seed} (rerun embguard_data)")
        model, pred, losses, seconds = train_arm(arm, own, images, actions, s, seed)
        preds.append(pred.assign(arm=arm, seed=seed, train_seconds=seconds, final_loss=float(np.mean(losses[-10:]))))
        states[seed] = model.state_dict()
    write_torch(job.output.model, {"arm": arm, "states": states})
    write_parquet(job.output.predictions, pd.concat(preds, ignore_index=True))
