"""Real labelled images that ship inside installed packages; nothing is downloaded.

* ``digits``: scikit-learn's 1,797 8x8 handwritten digits, 10 classes, scaled to [0, 1].
* ``lfw``: scikit-image's ``lfw_subset``: 200 25x25 grey images, 100 faces then 100 non-faces
  (label 1 = face). Averaged over 2x2 blocks to 12x12 (last row/column dropped) so that the same
  small models and 16-token transformers (3x3 patches) fit both data sets.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from icmlrepro.core.io import write_parquet

SHAPES = {"digits": (8, 8), "lfw": (12, 12)}
N_CLASSES = {"digits": 10, "lfw": 2}
PATCH = {"digits": 2, "lfw": 3}  # transformer patch side: 16 tokens on both data sets


def load_images(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(images [n, h, w] float32 in [0, 1], labels int64)."""
    if name == "digits":
        from sklearn.datasets import load_digits

        ds = load_digits()
        return (ds.images / 16.0).astype(np.float32), ds.target.astype(np.int64)
    if name == "lfw":
        from skimage.data import lfw_subset

        x = lfw_subset()[:, :24, :24]
        x = x.reshape(-1, 12, 2, 12, 2).mean(axis=(2, 4))
        y = np.r_[np.ones(100), np.zeros(100)].astype(np.int64)
        return x.astype(np.float32), y
    raise ValueError(f"unknown data set {name!r} (known: {', '.join(SHAPES)})")


def to_table(x: np.ndarray, y: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame(x.reshape(len(x), -1), columns=[f"px{i}" for i in range(x[0].size)])
    df.insert(0, "label", y)
    return df


def from_table(df: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    x = df.filter(like="px").to_numpy(np.float32).reshape(-1, 1, *SHAPES[name])
    return x, df["label"].to_numpy(np.int64)


def run(job) -> None:
    for name in SHAPES:
        write_parquet(job.output[name], to_table(*load_images(name)))
