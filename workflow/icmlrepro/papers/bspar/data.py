"""Retouching tasks on real photographs shipped with scikit-image and scikit-learn (nothing is downloaded).

A task is (source, instruction, hidden expert target). Random square crops of the photos are resized to
``size`` pixels and brought to a house style (``normalise``); a crop is degraded by a random parametric edit
``d`` (the capture we are handed), and the
instruction names 2 aspects to fix with their direction only ("increase exposure", "decrease temperature"),
never the amount. The expert target applies ``-d`` on the instructed aspects to the source with the same tools
(so it is reachable) and leaves the other, milder degradations alone: an agent that "fixes" an aspect nobody
asked for moves away from the target. Photos are split by photo: the test photos are never trained on, and
validation tasks (training curves) are other crops of the training photos.

Every seed draws its own tasks (crops, degradations, instructions); one more draw, ``tune``, holds the training
and validation tasks on which every arm's learning rate and the prompt recipe are tuned (no test photo in it).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from icmlrepro.core.io import read_npz, write_json, write_npz
from icmlrepro.core.seeding import derive_seed

from .tools import STEPS, TOOLS, apply_params, apply_tool, delta_e, lab

TRAIN_PHOTOS = ("astronaut", "chelsea", "rocket", "motorcycle_left", "retina", "immunohistochemistry")
TEST_PHOTOS = ("coffee", "china", "flower")
N_INSTR = 2 * len(TOOLS)


TUNE_SEED = -1  # the seed index of the tuning draw


@functools.lru_cache(maxsize=None)
def load_photo(name: str, short_edge: int | None = None) -> np.ndarray:
    """RGB float image in [0, 1] from the files inside the installed packages; with ``short_edge``, first
    resized (anti-aliased) so that its short edge has that many pixels (crops are then cheap to resize)."""
    if short_edge is not None:
        from skimage.transform import resize

        photo = load_photo(name)
        k = short_edge / min(photo.shape[:2])
        if k >= 1:
            return photo
        return resize(photo, (round(photo.shape[0] * k), round(photo.shape[1] * k)), anti_aliasing=True
                      ).astype(np.float32)
    if name in ("china", "flower"):
        from sklearn.datasets import load_sample_image

        img = load_sample_image(f"{name}.jpg")
    else:
        from skimage import data

        img = data.stereo_motorcycle()[0] if name == "motorcycle_left" else getattr(data, name)()
    return np.asarray(img[..., :3], dtype=np.float32) / 255.0


def crops(photo: np.ndarray, n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` random square crops (side 35-80% of the short edge) resized to size x size, (n, 3, size, size)."""
    from skimage.transform import resize

    h, w = photo.shape[:2]
    out = []
    for _ in range(n):
        side = int(rng.uniform(0.35, 0.8) * min(h, w))
        y, x = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        out.append(resize(photo[y:y + side, x:x + side], (size, size), anti_aliasing=True).transpose(2, 0, 1))
    return np.stack(out).astype(np.float32)


NORMS = {"exposure": 50.0, "contrast": 20.0, "saturation": 22.0, "temperature": 4.0}  # mean L*, std L*, chroma, b*


def normalise(x: torch.Tensor, rounds: int = 3) -> torch.Tensor:
    """Bring each crop's mean lightness, lightness spread, chroma and b* to fixed norms (a house style).

    Photos differ in these statistics for reasons nobody asked to fix; after this step a degraded source's
    deviation from the norm reveals how strong its degradation is, so the right edit amount depends on the
    image (as an expert's would), and a fixed recipe cannot match it.
    """
    for _ in range(rounds):
        L = lab(x)
        lum, a, b = L[:, 0].flatten(1), L[:, 1].flatten(1), L[:, 2].flatten(1)
        x = apply_tool(x, "exposure", torch.log2(NORMS["exposure"] / lum.mean(1).clamp(min=5)).clamp(-1, 1))
        x = apply_tool(x, "contrast", (NORMS["contrast"] / lum.std(1).clamp(min=3) - 1).clamp(-0.5, 1))
        x = apply_tool(x, "saturation", (NORMS["saturation"] / torch.sqrt(a**2 + b**2).mean(1).clamp(min=3) - 1)
                       .clamp(-0.6, 1))
        x = apply_tool(x, "temperature", (NORMS["temperature"] - lab(x)[:, 2].flatten(1).mean(1)).clamp(-15, 15))
    return x


def instruction_vector(theta: np.ndarray) -> np.ndarray:
    """Multi-hot (tool, direction) of the instructed edits: index 2k = decrease tool k, 2k+1 = increase."""
    v = np.zeros(N_INSTR, np.float32)
    for k in np.flatnonzero(theta):
        v[2 * k + int(theta[k] > 0)] = 1.0
    return v


def instruction_text(vec: np.ndarray) -> str:
    return ", ".join(f"{('decrease', 'increase')[i % 2]} {TOOLS[i // 2]}" for i in np.flatnonzero(vec))


N_INSTRUCTED = 2  # aspects each instruction names


def draw_edits(n: int, rng: np.random.Generator, p_extra: float) -> tuple[np.ndarray, np.ndarray]:
    """Degradations d (n, tools) and the expert's edits theta (n, tools): 2 instructed aspects of 0.5-4 small
    steps each (theta = -d there), plus milder uninstructed degradations that the expert leaves in place."""
    small = np.array([STEPS[t][0] for t in TOOLS])
    d = np.zeros((n, len(TOOLS)))
    theta = np.zeros_like(d)
    for i in range(n):
        k = rng.choice(len(TOOLS), N_INSTRUCTED, replace=False)
        d[i, k] = rng.choice([-1, 1], N_INSTRUCTED) * rng.uniform(0.5, 4.0, N_INSTRUCTED) * small[k]
        theta[i, k] = -d[i, k]
        others = np.setdiff1d(np.arange(len(TOOLS)), k)
        extra = others[rng.random(len(others)) < p_extra]
        d[i, extra] = rng.choice([-1, 1], len(extra)) * rng.uniform(0.5, 1.5, len(extra)) * small[extra]
    return d, theta


def build_split(photos, n: int, s: dict, rng: np.random.Generator, split: str) -> dict[str, np.ndarray]:
    per = np.diff(np.linspace(0, n, len(photos) + 1).round().astype(int))
    clean = normalise(torch.from_numpy(np.concatenate([crops(load_photo(p, 4 * s["size"]), k, s["size"], rng)
                                                       for p, k in zip(photos, per)])))
    d, theta = draw_edits(n, rng, s["p_extra_degradation"])
    src = apply_params(clean, torch.from_numpy(d).float())
    tgt = apply_params(src, torch.from_numpy(theta).float())
    return {f"{split}_source": src.numpy(), f"{split}_target": tgt.numpy(), f"{split}_theta": theta.astype(np.float32),
            f"{split}_instr": np.stack([instruction_vector(t) for t in theta]),
            f"{split}_photo": np.repeat(np.arange(len(photos)), per)}


def build(s: dict, seed: int, test: bool = True) -> dict[str, np.ndarray]:
    """One draw: train, val (and test) splits of seed ``seed``."""
    rng = np.random.default_rng(derive_seed(seed, "bspar", "data"))
    out = {}
    out |= build_split(TRAIN_PHOTOS, s["n_train"], s, rng, "train")
    out |= build_split(TRAIN_PHOTOS, s["n_val"], s, rng, "val")
    if test:
        out |= build_split(TEST_PHOTOS, s["n_test"], s, rng, "test")
    return out


def draw_key(seed) -> str:
    return "tune" if seed == "tune" else f"seed{int(seed)}"


def build_all(s: dict) -> dict[str, np.ndarray]:
    """Every seed's draw plus the tuning draw, keys ``<draw>/<split>_<field>``."""
    out = {f"tune/{k}": v for k, v in build(s, TUNE_SEED, test=False).items()}
    for seed in s["seeds"]:
        out |= {f"{draw_key(seed)}/{k}": v for k, v in build(s, seed).items()}
    return out


def load(path) -> dict[str, np.ndarray]:
    return read_npz(path)


def split(data: dict, name: str) -> dict[str, torch.Tensor]:
    """One split's tensors, keys without the split prefix."""
    return {k[len(name) + 1:]: torch.from_numpy(v) for k, v in data.items() if k.startswith(name + "_")}


def draw(data: dict, seed) -> dict[str, dict[str, torch.Tensor]]:
    """One draw's splits (``seed`` an int or "tune"): {"train": {...}, "val": {...}[, "test": {...}]}."""
    pre = draw_key(seed) + "/"
    mine = {k[len(pre):]: v for k, v in data.items() if k.startswith(pre)}
    return {name: split(mine, name) for name in ("train", "val", "test") if any(k.startswith(name + "_") for k in mine)}


def run(job) -> None:
    s = job.params
    tasks = build_all(s)
    write_npz(job.output.tasks, tasks)
    summary = {"train_photos": list(TRAIN_PHOTOS), "test_photos": list(TEST_PHOTOS), "size": s["size"]}
    for seed in ["tune", *s["seeds"]]:
        for name, sp in draw(tasks, seed).items():
            de = delta_e(sp["source"], sp["target"])
            summary[f"{draw_key(seed)}/{name}"] = {
                "n": int(len(de)), "source_delta_e_mean": float(de.mean()),
                "source_accepted_share": float((de < s["judge_threshold"]).mean()),
                "example_instructions": [instruction_text(v) for v in sp["instr"][:3].numpy()]}
    write_json(job.output.summary, summary)
