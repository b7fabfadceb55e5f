"""Real labelled data that ships inside an installed package: scikit-learn's handwritten digits.

1,797 8x8 images in 10 classes (UCI optical recognition of handwritten digits). Nothing is
downloaded; the file is part of the scikit-learn wheel.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits

from icmlrepro.core.io import write_parquet


def load_table() -> pd.DataFrame:
    ds = load_digits()
    df = pd.DataFrame(ds.data.astype(np.float32) / 16.0, columns=[f"px{i}" for i in range(ds.data.shape[1])])
    df.insert(0, "label", ds.target.astype(np.int64))
    df.insert(0, "idx", np.arange(len(df), dtype=np.int64))
    return df


def synthetic_scores(n: int, rng: np.random.Generator):
    """Exchangeable (i.i.d.) uncertainty scores with known error law P(err | u) = 0.6 u^2.

    Used for the exact check of the finite-sample guarantee, where the true risk is computable.
    """
    u = rng.random(n)
    err = (rng.random(n) < 0.6 * u**2).astype(np.float64)
    return u, err


def run(job) -> None:
    write_parquet(job.output.table, load_table())
