"""A benchmark as four tables (observations, docs, windows, context) and the window iterator.

Both the real and the synthetic-style benchmark use this layout, so every forecaster and every
score runs through the same code on both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from icmlrepro.core.io import read_parquet, write_parquet

from .context import audit, window_context
from .sources import load_real
from .windows import HORIZON, rolling_origins

TABLES = ("obs", "docs", "windows", "context")


@dataclass
class Window:
    series: str
    window: int
    freq: str
    season: int
    history: np.ndarray
    future: np.ndarray
    future_t: pd.DatetimeIndex
    text: str


def save(paths: dict, tables: tuple[pd.DataFrame, ...]) -> None:
    for name, df in zip(TABLES, tables):
        write_parquet(paths[name], df)


def load(paths: dict) -> tuple[pd.DataFrame, ...]:
    return tuple(read_parquet(paths[name]) for name in TABLES)


def windows_of(tables: tuple[pd.DataFrame, ...]) -> list[Window]:
    """Every (series, window) with its history, target and context text (items in time order)."""
    obs, docs, windows, context = tables
    by_series = {s: g.sort_values("t") for s, g in obs.groupby("series")}
    doc = docs.set_index("series")
    ctx = {k: g.sort_values(["issued_at", "kind"], kind="stable") for k, g in context.groupby(["series", "window"])}
    out = []
    for w in windows.itertuples(index=False):
        g = by_series[w.series]
        v, t = g["value"].to_numpy(), pd.DatetimeIndex(g["t"])
        items = ctx.get((w.series, w.window))
        text = " ".join(items["text"]) if items is not None else ""
        out.append(Window(w.series, int(w.window), doc.at[w.series, "freq"], int(doc.at[w.series, "season"]),
                          v[:w.origin], v[w.origin:w.origin + w.horizon], t[w.origin:w.origin + w.horizon], text))
    return out


def context_audit(docs: pd.DataFrame, windows: pd.DataFrame, context: pd.DataFrame) -> pd.DataFrame:
    """``context.audit`` of every item, with its window's start and its dataset's documented lag."""
    key = list(zip(context["series"], context["window"]))
    start = windows.set_index(["series", "window"])["window_start"].loc[key].reset_index(drop=True)
    doc = docs.set_index("series").loc[context["series"]].reset_index(drop=True)
    return audit(context, start, doc["freq"], doc["release_lag_days"], doc["published"])


def real_benchmark(settings: dict, release_dates: bool = True) -> tuple[pd.DataFrame, ...]:
    """The real benchmark: packaged series, rolling windows, and the automated context of each window.

    ``release_dates=False`` builds the context the way a pipeline blind to publication dates would
    (every value public the moment its period ends, the documentation dated at the series start): the
    audit's positive case, reported beside the real benchmark's audit."""
    obs, docs = load_real(settings["max_series"])
    values = {s: g.sort_values("t")["value"].to_numpy() for s, g in obs.groupby("series")}
    times = {s: pd.DatetimeIndex(g.sort_values("t")["t"]) for s, g in obs.groupby("series")}
    windows, context = [], []
    for doc in docs.to_dict("records"):
        sid, h = doc["series"], HORIZON[doc["freq"]]
        if not release_dates:
            doc = doc | {"release_lag_days": -1, "published": doc["start"]}
        related = {r["variable"]: (values[r["series"]], r["variable_note"])
                   for r in docs.to_dict("records") if r["dataset"] == doc["dataset"] and r["series"] != sid}
        origins = rolling_origins(len(values[sid]), h, settings["n_windows"], settings["min_history"])
        for k, o in enumerate(origins):
            windows.append({"series": sid, "window": k, "origin": o, "horizon": h, "window_start": times[sid][o]})
            for item in window_context(doc, values[sid], times[sid], o, h, related, settings):
                context.append({"series": sid, "window": k, **item})
    return obs, docs, pd.DataFrame(windows), pd.DataFrame(context)
