"""Statistical forecasters: SeasonalNaive (the MASE reference), Naive (copy-last, the trivial
reference), and ETS / ARIMA from statsmodels.

ETS and ARIMA each pick their specification by AIC from a small grid on the window's history;
that is their whole tuning budget, as the neural forecasters get one fixed configuration.
"""

from __future__ import annotations

import warnings

import numpy as np


def seasonal_naive(history: np.ndarray, horizon: int, season: int) -> np.ndarray:
    """Repeat the last observed season (the last value when ``season`` is 1)."""
    m = max(int(season), 1)
    last = np.asarray(history, dtype=float)[-m:]
    return np.array([last[k % m] for k in range(horizon)])


def naive(history: np.ndarray, horizon: int) -> np.ndarray:
    """The last observed value, repeated."""
    return np.full(horizon, float(np.asarray(history, dtype=float)[-1]))


def _quiet(fn):
    def wrapped(*a, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                return fn(*a, **kw)
    return wrapped


@_quiet
def ets(history: np.ndarray, horizon: int, season: int) -> np.ndarray:
    """Additive ETS: no trend vs damped trend, seasonal when two full seasons are seen; AIC picks."""
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    y = np.asarray(history, dtype=float)
    seasonal = "add" if season > 1 and y.size >= 2 * season + 2 else None
    fits = [lambda trend=trend: ExponentialSmoothing(
        y, trend=trend, damped_trend=trend is not None, seasonal=seasonal,
        seasonal_periods=season if seasonal else None, initialization_method="estimated").fit()
        for trend in (None, "add")]
    return _best_by_aic(fits, y, horizon, season)


def _best_by_aic(fits, y: np.ndarray, horizon: int, season: int) -> np.ndarray:
    """Forecast of the candidate fit (zero-argument callables) with the lowest finite AIC; SeasonalNaive
    when none fits or the forecast is not finite."""
    best, best_aic = None, np.inf
    for make in fits:
        try:
            fit = make()
        except (ValueError, np.linalg.LinAlgError):
            continue
        if np.isfinite(fit.aic) and fit.aic < best_aic:
            best, best_aic = fit, fit.aic
    if best is None:
        return seasonal_naive(y, horizon, season)
    f = np.asarray(best.forecast(horizon), dtype=float)
    return f if np.isfinite(f).all() else seasonal_naive(y, horizon, season)


@_quiet
def arima(history: np.ndarray, horizon: int, season: int, orders: list[list[int]]) -> np.ndarray:
    """ARIMA(p,1,q) (+ seasonal (0,1,1) when two seasons are seen) with (p, q) chosen by AIC."""
    from statsmodels.tsa.arima.model import ARIMA

    y = np.asarray(history, dtype=float)
    seasonal = (0, 1, 1, season) if season > 1 and y.size >= 3 * season else (0, 0, 0, 0)
    fits = [lambda p=p, q=q: ARIMA(y, order=(p, 1, q), seasonal_order=seasonal).fit() for p, q in orders]
    return _best_by_aic(fits, y, horizon, season)


def forecast_table(windows, orders: list[list[int]], history_limit: int) -> "pd.DataFrame":
    """SeasonalNaive, Naive, ETS and ARIMA forecasts of every window, one row per step."""
    import pandas as pd

    rows = []
    for w in windows:
        h = w.future.size
        hist = w.history[-history_limit:]
        preds = {"snaive": seasonal_naive(w.history, h, w.season), "naive": naive(w.history, h),
                 "ets": ets(hist, h, w.season),
                 "arima": arima(hist, h, w.season, orders)}
        for method, f in preds.items():
            rows += [{"series": w.series, "window": w.window, "method": method, "step": k, "yhat": float(f[k])}
                     for k in range(h)]
    return pd.DataFrame(rows)


def run(job) -> None:
    """Stage ``timesx.statistical``: deterministic forecasts of both benchmarks (fitted once, not per seed)."""
    from icmlrepro.core.io import write_parquet

    from . import benchmark
    from .workflow_inputs import BENCHMARKS

    s = job.params
    inp = dict(job.input.items())
    for bench in BENCHMARKS:
        tables = benchmark.load({k: inp[f"{bench}_{k}"] for k in benchmark.TABLES})
        table = forecast_table(benchmark.windows_of(tables), s["arima_orders"], s["stat_history"])
        write_parquet(getattr(job.output, bench), table)
