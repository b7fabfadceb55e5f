"""The automated context pipeline: four kinds of time-stamped text per forecast window.

TimesX attaches metadata, dates/holidays, covariates and event notes to every window and bounds
the generation by date so that no text postdates the window. Here each item is produced from
(a) the dataset's own documentation, (b) the calendar (US federal holidays, working days), (c) the
history of related variables of the same dataset and (d) events detected in the series' own
history. Dates are publication dates, not period labels:

* a value of period p is published ``release_lag_days`` after p ends (the dataset's documented lag);
  covariates and event notes see only the values published before the window starts, and carry
  ``data_through`` (the newest period used) and ``issued_at`` (its publication);
* the documentation was written at or after the series end (``published`` of the dataset); in a window
  before that date the metadata is reduced to what was knowable then (the variable's definition,
  domain and frequency, without any later year) and marked ``reduced``;
* calendar items describe the horizon's dates, known in advance; they are issued at the origin.

``audit`` recomputes every date from the documented lags and publication dates (not from what the
generators wrote), so a generator that forgets a lag or quotes the later documentation is caught.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd
from pandas.tseries.holiday import USFederalHolidayCalendar

from .sources import FREQ_WORD

KINDS = ("metadata", "calendar", "covariate", "event")
LEAK_RULES = ("issued_at_or_after_start", "data_not_yet_published", "document_not_yet_published",
              "names_a_later_year")
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


def published_at(period_start, freq: str, lag_days) -> pd.Timestamp:
    """First day on which the value of the period starting at ``period_start`` is public: the day after
    the period ends plus the release lag. A value with zero lag is public on the next period's first day,
    i.e. at the start of a window that begins right after it, which is too late for that window."""
    end = pd.Timestamp(period_start).to_period(freq).end_time.normalize()
    return end + pd.Timedelta(days=int(lag_days) + 1)


def n_published(t: pd.DatetimeIndex, freq: str, lag_days: int, window_start: pd.Timestamp) -> int:
    """How many leading periods of ``t`` are published before ``window_start`` (publication dates grow
    with the period, so count back from the newest)."""
    n = len(t)
    while n and published_at(t[n - 1], freq, lag_days) >= window_start:
        n -= 1
    return n


def _item(kind: str, issued_at, text: str, data_through=pd.NaT, reduced: bool = False) -> dict:
    return {"kind": kind, "issued_at": pd.Timestamp(issued_at), "data_through": pd.Timestamp(data_through),
            "reduced": bool(reduced), "text": text}


def metadata_item(doc: dict, history_t: pd.DatetimeIndex, window_start: pd.Timestamp) -> dict:
    """The dataset's documentation for this variable when it was published before the window; otherwise
    only what was knowable at the origin (definition, domain, frequency; later years removed)."""
    last_year = pd.Timestamp(history_t[-1]).year
    published = pd.Timestamp(doc["published"])
    definition = (f"Variable {doc['variable']}: {doc['variable_note'].rstrip('.')}. "
                  f"Domain: {doc['domain']}; {FREQ_WORD[doc['freq']]} data.")
    if published < window_start:
        text = f"{doc['title'].rstrip('.')}. {doc['description'].rstrip('.')}. {definition}"
        return _item("metadata", published, date_bounded(text, last_year))
    return _item("metadata", history_t[-1], date_bounded(definition, last_year), reduced=True)


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
    return _item("calendar", history_t[-1], _calendar_text(first, freq, len(horizon_t)))


def _robust_z(x: np.ndarray) -> np.ndarray:
    med = np.median(x)
    mad = np.median(np.abs(x - med)) * 1.4826
    if mad <= 0:
        mad = np.std(x) or 1.0
    return (x - med) / mad


def event_items(values: np.ndarray, t: pd.DatetimeIndex, freq: str, season: int, variable: str,
                max_events: int, threshold: float, lag_days: int) -> list[dict]:
    """Unusual moves detected in the history (robust z-scores of seasonal differences), newest last,
    plus a note on the most recent seasonal-cycle change. Uses only ``values`` (the published history:
    every note depends on all of it through the robust scale, so each is dated by its newest period)."""
    lag = max(season, 1)
    items: list[dict] = []
    if values.size == 0:
        return items
    through = pd.Timestamp(t[-1])
    issued = published_at(through, freq, lag_days)
    if values.size > lag + 2:
        d = values[lag:] - values[:-lag]
        z = _robust_z(d)
        hits = np.flatnonzero(np.abs(z) >= threshold)[-max_events:]
        for i in hits:
            when = t[i + lag]
            items.append(_item("event", issued, f"{period_label(when, freq)}: {_magnitude(z[i])} "
                               f"{_direction(d[i])} in {variable} ({abs(z[i]):.1f} robust standard deviations).",
                               data_through=through))
        change = values[-1] - values[-1 - lag]
        scale = np.median(np.abs(d - np.median(d))) * 1.4826 or (np.std(d) or 1.0)
        zc = change / scale
        word = "steady" if abs(zc) < 1 else ("strong " if abs(zc) >= 2.5 else "moderate ") + _direction(change)
        items.append(_item("event", issued, f"Latest {lag}-period change of {variable} up to "
                           f"{period_label(t[-1], freq)}: {word} ({zc:+.1f} typical changes).", data_through=through))
    return items


def covariate_items(related: dict[str, tuple[np.ndarray, str]], values: np.ndarray, t: pd.DatetimeIndex,
                    freq: str, season: int, max_covariates: int, lag_days: int) -> list[dict]:
    """Recent movement of the related variables whose changes co-moved most with the target's
    over the history. ``related`` maps name -> (published history values, description); ``values`` and
    ``t`` are the target's published history (same length)."""
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
        items.append(_item("covariate", published_at(t[-1], freq, lag_days),
                           f"Related indicator {name}: {_direction(change)} of {abs(rel):.1f}% of its "
                           f"level over the last {lag} {FREQ_WORD[freq]} to {period_label(t[-1], freq)}; "
                           f"its changes have co-moved with the target at correlation {c:+.2f}.",
                           data_through=t[-1]))
    return items


def window_context(doc: dict, values: np.ndarray, t: pd.DatetimeIndex, origin: int, horizon: int,
                   related: dict[str, tuple[np.ndarray, str]], settings: dict) -> list[dict]:
    """All context items of one window. Only the values published before the window start (the first
    ``n_published`` of the history, after the dataset's release lag) reach the covariate and event
    generators; the metadata generator gets the documentation's date. Nothing sees the window."""
    freq, lag_days = doc["freq"], int(doc["release_lag_days"])
    hist_t = pd.DatetimeIndex(t[:origin])
    horizon_t = pd.period_range(pd.Timestamp(t[origin - 1]).to_period(freq) + 1, periods=horizon,
                                freq=freq).to_timestamp()
    start = pd.Timestamp(horizon_t[0])
    n_pub = n_published(hist_t, freq, lag_days, start)
    pub = np.asarray(values[:n_pub], dtype=float)
    rel_pub = {k: (np.asarray(x[:n_pub], dtype=float), note) for k, (x, note) in related.items()}
    items = [metadata_item(doc, hist_t, start), calendar_item(horizon_t, hist_t, freq)]
    items += covariate_items(rel_pub, pub, hist_t[:n_pub], freq, doc["season"], settings["max_covariates"], lag_days)
    items += event_items(pub, hist_t[:n_pub], freq, doc["season"], doc["variable"], settings["max_events"],
                         settings["event_threshold"], lag_days)
    return items


def audit(items: pd.DataFrame, window_start: pd.Series, freq: pd.Series, lag_days: pd.Series,
          doc_published: pd.Series) -> pd.DataFrame:
    """One boolean column per leak rule (LEAK_RULES), one row per item. ``window_start``, ``freq``,
    ``lag_days`` (the dataset's documented release lag) and ``doc_published`` (its documentation's date)
    are aligned with ``items``. An item leaks when it is issued at or after its window start; when the
    newest period it uses is published (documented lag) at or after the window start, whatever lag its
    generator applied; when it is metadata not reduced to what was knowable while the documentation was
    unpublished at the window start, whatever date its generator wrote; or when (outside the calendar,
    whose subject is the horizon) it names a year after the year of the last history period."""
    start = pd.to_datetime(window_start).reset_index(drop=True)
    issued = pd.to_datetime(items["issued_at"]).reset_index(drop=True)
    through = pd.to_datetime(items["data_through"]).reset_index(drop=True)
    doc_date = pd.to_datetime(doc_published).reset_index(drop=True)
    metadata = (items["kind"] == "metadata").reset_index(drop=True)
    public = pd.Series([published_at(x, f, lag) if pd.notna(x) else pd.NaT
                        for x, f, lag in zip(through, freq, lag_days)], dtype="datetime64[ns]")
    last_year = (start - pd.Timedelta(days=1)).dt.year.to_numpy()
    named = [kind != "calendar" and any(int(y) > ly for y in YEAR.findall(text))
             for kind, text, ly in zip(items["kind"], items["text"], last_year)]
    return pd.DataFrame({
        "issued_at_or_after_start": (issued >= start).to_numpy(),
        "data_not_yet_published": (public.notna() & (public >= start)).to_numpy(),
        "document_not_yet_published": (metadata & (doc_date >= start)
                                       & ~items["reduced"].astype(bool).reset_index(drop=True)).to_numpy(),
        "names_a_later_year": np.array(named, dtype=bool),
    })


def leaking(items: pd.DataFrame, window_start: pd.Series, freq: pd.Series, lag_days: pd.Series,
            doc_published: pd.Series) -> np.ndarray:
    """Items that break any leak rule of ``audit``."""
    return audit(items, window_start, freq, lag_days, doc_published).any(axis=1).to_numpy()
