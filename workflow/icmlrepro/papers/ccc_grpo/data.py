"""Rendered images whose numeric target follows a long-tailed law; a balanced test set; shot regions.

Why rendered: no image set that ships offline carries a continuous numeric target with a long tail (digits
and lfw_subset are class labels; DATA.md). The miniature of age estimation: an integer target y in
[0, y_max] (two digit tokens) is shown as the size of a disk whose radius encodes a *latent* value
y + N(0, latent_noise^2), at a random position and brightness, over pixel noise. The latent jitter makes the
cue ambiguous, as apparent age is: the posterior over y given the image is a few units wide, so a predictor
trained on the long-tailed set shrinks towards its dense region (regression to the mean).

Target law (training set): an asymmetric Laplace over the integers with its mode at ``mode``, scale
``scale_left`` below and ``scale_right`` above (a right-skewed age-like histogram with a long tail).
The test set is balanced (``n_test_per_value`` images per target value, as AgeDB-DIR's test set), so the
tail counts as much as the head; so is the validation split (``n_val_per_value``) that picks learning rates. Shot regions (the paper's): a target value is many-shot with more than
``many_above`` training images, few-shot with fewer than ``few_below``, else medium-shot.
A second training set of the same size with uniform targets trains the density control (``sft_balanced``).
A held-out split from the training law (``n_val_lt``, long-tailed like the training set) measures whether an arm
improved on its training objective (the point-wise arm's gate). Training, validation and test images are drawn
from independent seeded streams, and every seed redraws all of them (``build(s, seed)``; one file holds every
seed's arrays under ``seed<k>.<name>``, and the shot regions are each seed's own).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import write_json, write_npz, write_parquet
from icmlrepro.core.seeding import derive_seed

REGIONS = ("many", "medium", "few")


def target_probabilities(s: dict) -> np.ndarray:
    """P(y) for y = 0..y_max: asymmetric Laplace around ``mode``."""
    y = np.arange(s["y_max"] + 1, dtype=float)
    d = y - s["mode"]
    logp = np.where(d < 0, d / s["scale_left"], -d / s["scale_right"])
    p = np.exp(logp)
    return p / p.sum()


def sample_targets(s: dict, n: int, balanced: bool, rng: np.random.Generator) -> np.ndarray:
    p = None if balanced else target_probabilities(s)
    return rng.choice(s["y_max"] + 1, size=n, p=p).astype(np.int64)


def render(y: np.ndarray, s: dict, rng: np.random.Generator) -> np.ndarray:
    """(n, S, S) float32 images: an anti-aliased disk of radius linear in the latent value, random centre and
    brightness, plus Gaussian pixel noise."""
    S, n = s["image_size"], len(y)
    latent = y + rng.normal(0.0, s["latent_noise"], n)
    r_min, r_max = 1.5, 0.42 * S
    radius = np.clip(r_min + (r_max - r_min) * latent / s["y_max"], 0.75, 0.5 * S)
    slack = np.maximum(S / 2 - radius - 0.5, 0.0)
    cx = S / 2 + rng.uniform(-1, 1, n) * np.minimum(slack, 3.0)
    cy = S / 2 + rng.uniform(-1, 1, n) * np.minimum(slack, 3.0)
    bright = rng.uniform(0.6, 1.0, n)
    g = np.arange(S) + 0.5
    dist = np.sqrt((g[None, :, None] - cy[:, None, None]) ** 2 + (g[None, None, :] - cx[:, None, None]) ** 2)
    img = bright[:, None, None] * np.clip(radius[:, None, None] - dist + 0.5, 0.0, 1.0)
    img += rng.normal(0.0, s["pixel_noise"], img.shape)
    return img.astype(np.float32)


def shot_regions(train_y: np.ndarray, s: dict) -> pd.DataFrame:
    """Per target value: its training count and shot region (many > many_above, few < few_below)."""
    counts = np.bincount(train_y, minlength=s["y_max"] + 1)
    region = np.where(counts > s["many_above"], "many", np.where(counts < s["few_below"], "few", "medium"))
    return pd.DataFrame({"y": np.arange(s["y_max"] + 1), "train_count": counts, "region": region})


def build(s: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """All arrays of one seed's data from independent streams (train, balanced train, long-tailed validation,
    balanced validation, test)."""
    out = {}
    for split, balanced, n in (("train", False, s["n_train"]), ("balanced", True, s["n_train"]),
                               ("val_lt", False, s["n_val_lt"])):
        rng = np.random.default_rng(derive_seed(seed, "ccc_grpo", split))
        y = sample_targets(s, n, balanced, rng)
        out[f"{split}_y"], out[f"{split}_x"] = y, render(y, s, rng)
    for split in ("val", "test"):   # balanced; validation picks learning rates, test is only evaluated
        rng = np.random.default_rng(derive_seed(seed, "ccc_grpo", split))
        y = np.repeat(np.arange(s["y_max"] + 1), s[f"n_{split}_per_value"])
        out[f"{split}_y"], out[f"{split}_x"] = y, render(y, s, rng)
    return out


def seen_images(arrays: dict) -> np.ndarray:
    """Every image a model or its tuning saw: both training sets and the validation splits."""
    return np.concatenate([arrays["train_x"], arrays["balanced_x"], arrays["val_x"], arrays["val_lt_x"]])


def pack(by_seed: dict[int, dict]) -> dict[str, np.ndarray]:
    """Every seed's arrays in one mapping, keyed ``seed<k>.<name>``."""
    return {f"seed{seed}.{k}": v for seed, arrays in by_seed.items() for k, v in arrays.items()}


def seed_arrays(packed: dict, seed: int) -> dict[str, np.ndarray]:
    """One seed's arrays out of :func:`pack`'s mapping (a clear error if the file lacks that seed)."""
    head = f"seed{seed}."
    out = {k[len(head):]: v for k, v in packed.items() if k.startswith(head)}
    if not out:
        raise KeyError(f"no data of seed {seed} (seeds in the file: "
                       f"{sorted({k.split('.')[0] for k in packed})}): rerun ccc_grpo_data")
    return out


def shared_images(train_x: np.ndarray, test_x: np.ndarray) -> int:
    """Test images that also occur, byte for byte, in the training set (the split's audit: must be 0)."""
    seen = {img.tobytes() for img in train_x}
    return int(sum(img.tobytes() in seen for img in test_x))


def run(job) -> None:
    s = job.params
    by_seed, tables, summary = {}, [], {}
    for seed in s["seeds"]:
        arrays = by_seed[seed] = build(s, seed)
        regions = shot_regions(arrays["train_y"], s)
        tables.append(regions.assign(seed=seed))
        test_region = regions.set_index("y").loc[arrays["test_y"], "region"]
        summary[f"seed{seed}"] = {
            "n_train": int(len(arrays["train_y"])), "n_test": int(len(arrays["test_y"])),
            "n_val": int(len(arrays["val_y"])), "n_val_lt": int(len(arrays["val_lt_y"])),
            "test_images_in_training": shared_images(seen_images(arrays), arrays["test_x"]),
            "values_per_region": regions["region"].value_counts().to_dict(),
            "test_images_per_region": test_region.value_counts().to_dict(),
            "train_images_per_region": regions.groupby("region")["train_count"].sum().to_dict()}
    write_npz(job.output.images, pack(by_seed))
    write_parquet(job.output.regions, pd.concat(tables, ignore_index=True))
    write_json(job.output.summary, summary)
