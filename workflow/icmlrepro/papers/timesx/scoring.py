"""Scores of the TimesX protocol: MASE normalised so that SeasonalNaive = 1, the geometric mean
over series, and the average rank of the methods over series.

The MASE of a method divides its mean absolute error by the in-sample seasonal-naive MAE of the
series; normalising by SeasonalNaive's own MASE on the same windows cancels that denominator, so
the normalised score is the ratio of out-of-sample MAEs (SeasonalNaive exactly 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

REFERENCE = "snaive"


def mase(y: np.ndarray, yhat: np.ndarray, history: np.ndarray, season: int) -> float:
    """Plain MASE: out-of-sample MAE over the in-sample MAE of the seasonal-naive one-step forecast."""
    m = max(int(season), 1)
    h = np.asarray(history, dtype=float)
    scale = np.mean(np.abs(h[m:] - h[:-m]))
    return float(np.mean(np.abs(np.asarray(y) - np.asarray(yhat))) / scale)


def scaled_mase(errors: pd.DataFrame) -> pd.DataFrame:
    """Per series and method: MASE / MASE of SeasonalNaive, windows pooled.

    ``errors`` has columns series, window, method, mase (plain MASE per window). Each window's
    MASE uses that window's history, so the ratio is of the window-averaged MASEs. A series on which
    SeasonalNaive is exact (MASE 0) cannot be normalised and is dropped.
    """
    per = errors.groupby(["series", "method"], sort=True)["mase"].mean().unstack("method")
    ref = per[REFERENCE]
    per = per[ref > 0]
    return per.div(per[REFERENCE], axis=0)


def geometric_mean(values) -> float:
    v = np.asarray(values, dtype=float)
    if (v <= 0).any():
        raise ValueError("geometric mean of non-positive scores")
    return float(np.exp(np.mean(np.log(v))))


def average_rank(scores: pd.DataFrame) -> pd.Series:
    """Mean over series (rows) of each method's rank (1 = best, ties share the average rank)."""
    ranks = scores.rank(axis=1, method="average", ascending=True)
    return ranks.mean(axis=0)


def kendall_tau(a: pd.Series, b: pd.Series) -> float:
    """Kendall tau-b between two scorings of the same methods (lower = better in both)."""
    common = a.index.intersection(b.index)
    return float(stats.kendalltau(a[common].to_numpy(), b[common].to_numpy()).statistic)
