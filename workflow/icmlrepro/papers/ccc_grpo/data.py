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
Training, validation and test images are drawn from independent seeded streams.
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
    """All arrays of the data stage from independent streams (train, balanced train, test)."""
    out = {}
    for split, balanced in (("train", False), ("balanced", True)):
        rng = np.random.default_rng(derive_seed(seed, "ccc_grpo", split))
        y = sample_targets(s, s["n_train"], balanced, rng)
        out[f"{split}_y"], out[f"{split}_x"] = y, render(y, s, rng)
    for split in ("val", "test"):   # balanced; validation picks learning rates, test is only evaluated
        rng = np.random.default_rng(derive_seed(seed, "ccc_grpo", split))
        y = np.repeat(np.arange(s["y_max"] + 1), s[f"n_{split}_per_value"])
        out[f"{split}_y"], out[f"{split}_x"] = y, render(y, s, rng)
    return out


def seen_images(arrays: dict) -> np.ndarray:
    """Every image a model or its tuning saw: both training sets and the validation split."""
    return np.concatenate([arrays["train_x"], arrays["balanced_x"], arrays["val_x"]])


def shared_images(train_x: np.ndarray, test_x: np.ndarray) -> int:
    """Test images that also occur, byte for byte, in the training set (the split's audit: must be 0)."""
    seen = {img.tobytes() for img in train_x}
    return int(sum(img.tobytes() in seen for img in test_x))


def run(job) -> None:
    s = job.params
    arrays = build(s)
    regions = shot_regions(arrays["train_y"], s)
    write_npz(job.output.images, arrays)
    write_parquet(job.output.regions, regions)
    test_region = regions.set_index("y").loc[arrays["test_y"], "region"]
    write_json(job.output.summary, {
        "n_train": int(len(arrays["train_y"])), "n_test": int(len(arrays["test_y"])),
        "n_val": int(len(arrays["val_y"])),
        "test_images_in_training": shared_images(seen_images(arrays), arrays["test_x"]),
        "values_per_region": regions["region"].value_counts().to_dict(),
        "test_images_per_region": test_region.value_counts().to_dict(),
        "train_images_per_region": regions.groupby("region")["train_count"].sum().to_dict()})
