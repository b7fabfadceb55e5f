"""Stage ``event2vec.data``: simulated event streams of the twelve classes, split train/val/test.

Backgrounds are crops of real photographs shipped with scikit-image; the test split uses photographs never
seen in training or validation (a held-out texture set), and every sample draws its own trajectory phase,
centre, size and speed. tonic's ``Denoise`` filter is applied to every stream, the same input for all arms;
the summary audits it against the simulator's own record of which events were noise.

Every seed draws its own train and test sets (``seed_base``: trajectories, crops, thresholds and noise of
every stream), so the seed-to-seed spread covers the data as well as the training. The validation set is
drawn once, with the first seed's sets: it serves only the learning-rate pick, which is made once on the
first seed and shared by every seed (train.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import write_json, write_parquet
from icmlrepro.core.seeding import derive_seed

from .simulator import CLASSES, EVENT_DTYPE, events_from_video, render

TRAIN_PHOTOS = ("astronaut", "chelsea", "coffee", "brick", "grass", "camera", "coins")
TEST_PHOTOS = ("rocket", "gravel", "hubble_deep_field", "moon")


def load_photos(names) -> list[np.ndarray]:
    """Grey-scale photographs in [0, 1] from scikit-image's bundled data (no download)."""
    from skimage import data as skdata
    from skimage.color import rgb2gray
    from skimage.util import img_as_float

    out = []
    for name in names:
        img = img_as_float(getattr(skdata, name)())
        out.append(rgb2gray(img) if img.ndim == 3 else img)
    return out


def background(photos: list[np.ndarray], size: int, rng: np.random.Generator) -> np.ndarray:
    """A random crop of a random photograph, resized to the sensor and mapped to a dim intensity range."""
    from skimage.transform import resize

    img = photos[rng.integers(len(photos))]
    side = int(rng.integers(min(img.shape) // 4, min(img.shape) // 2))
    y0, x0 = rng.integers(0, img.shape[0] - side), rng.integers(0, img.shape[1] - side)
    crop = resize(img[y0:y0 + side, x0:x0 + side], (size, size), anti_aliasing=True)
    lo, hi = crop.min(), crop.max()
    return 0.12 + 0.33 * (crop - lo) / max(hi - lo, 1e-6)


def simulate_split(split: str, n_per_class: int, s: dict, photos, seed: int):
    """Events and sample table of one split; sample ids are unique across splits via ``offset``."""
    import tonic.transforms as T

    denoise = T.Denoise(filter_time=s["denoise_us"])
    rows, streams, audit = [], [], {"noise": 0, "noise_removed": 0, "signal": 0, "signal_removed": 0}
    for label_idx, label in enumerate(CLASSES):
        for i in range(n_per_class):
            rng = np.random.default_rng(derive_seed(seed, "event2vec", split, label, i))
            video = render(label, background(photos, s["sensor"], rng), s["frames"], rng)
            ev, noise = events_from_video(video, rng, s["threshold"], s["threshold_sigma"], s["refractory_us"],
                                          s["noise_hz"])
            kept = denoise(ev)
            keep = np.isin(_key(ev), _key(kept))
            audit["noise"] += int(noise.sum()); audit["noise_removed"] += int((noise & ~keep).sum())
            audit["signal"] += int((~noise).sum()); audit["signal_removed"] += int((~noise & ~keep).sum())
            ev = ev[keep]
            rows.append({"split": split, "label": label_idx, "class": label, "n_events": len(ev)})
            streams.append(ev)
    return rows, streams, audit


def _key(ev: np.ndarray) -> np.ndarray:
    """One integer per event (events are unique in (x, y, t, p) up to simulator collisions)."""
    return ((ev["t"] * 4096 + ev["y"]) * 4096 + ev["x"]) * 2 + ev["p"]


def seed_base(data_seed: int, seed: int) -> int:
    """The base of every random stream of ``seed``'s own data set."""
    return derive_seed(data_seed, "event2vec", "data", seed)


def run(job) -> None:
    s = job.params
    seeds = list(s["seeds"])
    rows, streams, audits = [], [], {}
    photos = {"train": load_photos(TRAIN_PHOTOS), "test": load_photos(TEST_PHOTOS)}
    for seed in seeds:
        parts = [("train", "train", s["train_per_class"]), ("test", "test", s["test_per_class"])]
        if seed == seeds[0]:  # the validation set of the learning-rate pick (made once, on the first seed)
            parts.insert(1, ("val", "train", s["val_per_class"]))
        for split, kind, n in parts:
            r, st, audit = simulate_split(split, n, s, photos[kind], seed_base(s["data_seed"], seed))
            rows += [x | {"seed": seed} for x in r]
            streams += st
            for k, v in audit.items():
                audits.setdefault(split, {}).setdefault(k, 0)
                audits[split][k] += v
    samples = pd.DataFrame(rows)
    samples.insert(0, "sample", np.arange(len(samples)))
    ev = np.concatenate(streams) if streams else np.zeros(0, EVENT_DTYPE)
    events = pd.DataFrame({f: ev[f] for f in EVENT_DTYPE.names})
    events.insert(0, "sample", np.repeat(samples["sample"].to_numpy(), samples["n_events"].to_numpy()))
    write_parquet(job.output.events, events)
    write_parquet(job.output.samples, samples)
    write_json(job.output.summary, {
        "classes": list(CLASSES), "samples": samples.groupby("split").size().to_dict(),
        "samples_per_seed": {str(sd): g["split"].value_counts().sort_index().to_dict() for sd, g in samples.groupby("seed")},
        "events_per_sample": samples.groupby("split")["n_events"].describe().round(1).to_dict("index"),
        "denoise": audits, "train_photos": list(TRAIN_PHOTOS), "test_photos": list(TEST_PHOTOS)})
