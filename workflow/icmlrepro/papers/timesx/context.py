"""The automated context pipeline: four kinds of time-stamped text per forecast window.

TimesX attaches metadata, dates/holidays, covariates and event notes to every window and bounds
the generation by date so that no text postdates the window. Here each item is produced from
(a) the dataset's own documentation, (b) the calendar (US federal holidays, working days), (c) the
history of related variables of the same dataset and (d) events detected in the series' own
history. Every generator receives only the history (values strictly before the window start), and
each item carries ``issued_at``: the period of the newest information it uses. Calendar items
describe the horizon's dates, which are known in advance; they are issued at the forecast origin.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd
from pandas.tseries.holiday import USFederalHolidayCalendar

from .sources import FREQ_WORD

KINDS = ("metadata", "calendar", "covariate", "event")
YEAR = re.compile(r"(?<!\d)(1[6-9]\d\d|20\d\d)(?!\d)")


def period_label(t: pd.Timestamp, freq: str) -> str:
    return str(pd.Timestamp(t).to_period(freq))


def _magnitude(z: float) -> str:
    a = abs(z)
    return "extreme" if a >= 6 else "sharp" if a >= 4 else "notable"


def _direction(x: float) -> str:
    return "rise" if x > 0 else "fall"


def date_bounded(text: str, last_year: int) -> str:
    """Remove what names a year after ``last_year``: first such parentheticals, then such sentences
    (date-bounded documentation: written later, it may describe the sample to its end)."""
    def later(s: str) -> bool:
        return any(int(y) > last_year for y in YEAR.findall(s))

    text = re.sub(r"\s*\([^()]*\)", lambda m: "" if later(m.group(0)) else m.group(0), text)
    sentences = re.split(r"(?<=[.;])\s+", text)
    return " ".join(s for s in sentences if not later(s)).strip()


def metadata_item(doc: dict, history_t: pd.DatetimeIndex) -> dict:
    """The dataset's documentation for this variable, cut to what was knowable at the origin."""
    last_year = pd.Timestamp(history_t[-1]).year
    text = (f"{doc['title'].rstrip('.')}. {doc['description'].rstrip('.')}. Variable {doc['variable']}: "
            f"{doc['variable_note'].rstrip('.')}. "
            f"Domain: {doc['domain']}; {FREQ_WORD[doc['freq']]} data.")
    return {"kind": "metadata", "issued_at": pd.Timestamp(history_t[0]), "text": date_bounded(text, last_year)}


@lru_cache(maxsize=1)
def _federal_holidays() -> pd.DatetimeIndex:
    """US federal holiday dates (pandas' rules) over every year the benchmarks can touch, once."""
    return USFederalHolidayCalendar().holidays("1850-01-01", "2040-12-31")


@lru_cache(maxsize=4096)
def _calendar_text(first: str, freq: str, horizon: int) -> str:
    periods = pd.period_range(pd.Period(first, freq), periods=horizon, freq=freq)
    allh = _federal_holidays()
    hol = allh[(allh >= periods[0].start_time) & (allh <= periods[-1].end_time)]
    per = [int(((hol >= p.start_time) & (hol <= p.end_time)).sum()) for p in periods]
    days = [int(np.busday_count(p.start_time.date(), (p.end_time + pd.Timedelta(days=1)).date())) - k
            for p, k in zip(periods, per)]
    return (f"Forecast horizon: {horizon} {FREQ_WORD[freq]} from {periods[0]} to {periods[-1]}. "
            f"{len(hol)} US federal holidays fall in it, most in {periods[int(np.argmax(per))]}; "
            f"working days per period range from {min(days)} to {max(days)}.")


def calendar_item(horizon_t: pd.DatetimeIndex, history_t: pd.DatetimeIndex, freq: str) -> dict:
    """Holidays and working days of the forecast periods (a calendar is known ahead of time)."""
    first = str(pd.Timestamp(horizon_t[0]).to_period(freq))
    return {"kind": "calendar", "issued_at": pd.Timestamp(history_t[-1]),
            "text": _calendar_text(first, freq, len(horizon_t))}


def _robust_z(x: np.ndarray) -> np.ndarray:
    med = np.median(x)
    mad = np.median(np.abs(x - med)) * 1.4826
    if mad <= 0:
        mad = np.std(x) or 1.0
    return (x - med) / mad


def event_items(values: np.ndarray, t: pd.DatetimeIndex, freq: str, season: int, variable: str,
                max_events: int, threshold: float) -> list[dict]:
    """Unusual moves detected in the history (robust z-scores of seasonal differences), newest last,
    plus a note on the most recent seasonal-cycle change. Uses only ``values`` (the history)."""
    lag = max(season, 1)
    items: list[dict] = []
    if values.size > lag + 2:
        d = values[lag:] - values[:-lag]
        z = _robust_z(d)
        hits = np.flatnonzero(np.abs(z) >= threshold)[-max_events:]
        for i in hits:
            when = t[i + lag]
            items.append({"kind": "event", "issued_at": pd.Timestamp(when),
                          "text": f"{period_label(when, freq)}: {_magnitude(z[i])} {_direction(d[i])} in "
                                  f"{variable} ({abs(z[i]):.1f} robust standard deviations)."})
        change = values[-1] - values[-1 - lag]
        scale = np.median(np.abs(d - np.median(d))) * 1.4826 or (np.std(d) or 1.0)
        zc = change / scale
        word = "steady" if abs(zc) < 1 else ("strong " if abs(zc) >= 2.5 else "moderate ") + _direction(change)
        items.append({"kind": "event", "issued_at": pd.Timestamp(t[-1]),
                      "text": f"Latest {lag}-period change of {variable} up to {period_label(t[-1], freq)}: "
                              f"{word} ({zc:+.1f} typical changes)."})
    return items


def covariate_items(related: dict[str, tuple[np.ndarray, str]], values: np.ndarray, t: pd.DatetimeIndex,
                    freq: str, season: int, max_covariates: int) -> list[dict]:
    """Recent movement of the related variables whose changes co-moved most with the target's
    over the history. ``related`` maps name -> (history values, description); only history is used."""
    lag = max(season, 1)
    if values.size <= lag + 3 or not related:
        return []
    dy = values[lag:] - values[:-lag]
    scored = []
    for name, (x, note) in related.items():
        dx = x[lag:] - x[:-lag]
        c = np.corrcoef(dx, dy)[0, 1] if np.std(dx) > 0 and np.std(dy) > 0 else 0.0
        scored.append((-abs(c), name, c, x, note))
    items = []
    last_year = pd.Timestamp(t[-1]).year
    for _, name, c, x, note in sorted(scored)[:max_covariates]:
        note = date_bounded(note, last_year).rstrip(".")
        name = f"{name} ({note})" if note else name
        change = x[-1] - x[-1 - lag]
        rel = change / (np.mean(np.abs(x)) or 1.0) * 100
        items.append({"kind": "covariate", "issued_at": pd.Timestamp(t[-1]),
                      "text": f"Related indicator {name}: {_direction(change)} of {abs(rel):.1f}% of its "
                              f"level over the last {lag} {FREQ_WORD[freq]} to {period_label(t[-1], freq)}; "
                              f"its changes have co-moved with the target at correlation {c:+.2f}."})
    return items


def window_context(doc: dict, values: np.ndarray, t: pd.DatetimeIndex, origin: int, horizon: int,
                   related: dict[str, tuple[np.ndarray, str]], settings: dict) -> list[dict]:
    """All context items of one window. Only ``values[:origin]`` and the related series' first
    ``origin`` values are passed on: the generators cannot see the window."""
    hist_t = pd.DatetimeIndex(t[:origin])
    hist = np.asarray(values[:origin], dtype=float)
    horizon_t = pd.period_range(pd.Timestamp(t[origin - 1]).to_period(doc["freq"]) + 1, periods=horizon,
                                freq=doc["freq"]).to_timestamp()
    rel_hist = {k: (np.asarray(x[:origin], dtype=float), note) for k, (x, note) in related.items()}
    items = [metadata_item(doc, hist_t), calendar_item(horizon_t, hist_t, doc["freq"])]
    items += covariate_items(rel_hist, hist, hist_t, doc["freq"], doc["season"], settings["max_covariates"])
    items += event_items(hist, hist_t, doc["freq"], doc["season"], doc["variable"],
                         settings["max_events"], settings["event_threshold"])
    return items


def leaking(items: pd.DataFrame, window_start: pd.Series) -> np.ndarray:
    """Items that postdate their window: issued at or after the window start, or (outside the
    calendar, whose subject is the horizon) naming a year after the year of the last history period."""
    issued = pd.to_datetime(items["issued_at"]).to_numpy() >= pd.to_datetime(window_start).to_numpy()
    last_year = (pd.to_datetime(window_start) - pd.Timedelta(days=1)).dt.year.to_numpy()
    named = np.array([kind != "calendar" and any(int(y) > ly for y in YEAR.findall(text))
                      for kind, text, ly in zip(items["kind"], items["text"], last_year)], dtype=bool)
    return issued | named
