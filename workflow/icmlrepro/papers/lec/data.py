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


# P(err | u) = c u^k with u ~ U(0, 1): worst-case risk (accept everything) c / (k + 1).
# quadratic: 0.2, below the larger alphas, so those cannot fail; linear: 0.45 and flat: 0.4, above
# every alpha of the grid (<= 0.3), so a rule that accepts too much shows it.
ERROR_LAWS = {"quadratic": (0.6, 2), "linear": (0.9, 1), "flat": (0.4, 0)}


def synthetic_scores(n: int, rng: np.random.Generator, law: str = "quadratic"):
    """Exchangeable (i.i.d.) uncertainty scores with a known error law P(err | u) = c u^k.

    Used for the exact check of the finite-sample guarantee, where the true risk is computable.
    """
    c, k = ERROR_LAWS[law]
    u = rng.random(n)
    err = (rng.random(n) < c * u**k).astype(np.float64)
    return u, err


def exact_risk(lams, law: str) -> float:
    """Risk among accepted over calibration draws of thresholds ``lams`` (clipped to [0, 1]):
    E[P(accept, err | lam)] / E[P(accept | lam)] = E[c lam^(k+1) / (k+1)] / E[lam]; NaN if nothing
    is ever accepted."""
    c, k = ERROR_LAWS[law]
    lams = np.clip(np.asarray(lams, dtype=float), 0.0, 1.0)
    return float(np.sum(c * lams ** (k + 1) / (k + 1)) / np.sum(lams)) if lams.sum() > 0 else float("nan")


def run(job) -> None:
    write_parquet(job.output.table, load_table())
