"""Real series with real descriptions that ship inside statsmodels (nothing is downloaded).

Each dataset module of ``statsmodels.datasets`` carries its documentation (TITLE, SOURCE,
DESCRSHORT, NOTE with the variable definitions). Those strings are the metadata context of the
miniature benchmark; the numbers are the series. Every series is put on a regular period index
(annual, quarterly or monthly) so that calendars, seasonal periods and windows are well defined.
"""

from __future__ import annotations

import importlib
import re

import numpy as np
import pandas as pd

FREQ_SEASON = {"Y": 1, "Q": 4, "M": 12}
FREQ_WORD = {"Y": "years", "Q": "quarters", "M": "months"}

# dataset -> (domain, frequency); the variables are every numeric column but the date columns
DATASETS = {
    "macrodata": ("US macroeconomy", "Q"),
    "danish_data": ("Danish money demand", "Q"),
    "interest_inflation": ("German rates and prices", "Q"),
    "co2": ("atmospheric chemistry", "M"),
    "elnino": ("oceanography", "M"),
    "elec_equip": ("manufacturing", "M"),
    "sunspots": ("solar activity", "Y"),
    "nile": ("hydrology", "Y"),
}
DATE_COLUMNS = {"year", "quarter", "YEAR"}


# dataset -> (documentation date, what dates it, release lag in days, what documents the lag).
# The documentation date is when the text the metadata quotes existed: the access date or publication
# the dataset's SOURCE cites; where the source gives no date, the first release that can hold the last
# value (series end + release lag). Every one is at or after the series end, so the full text is
# unknowable inside any window. The release lag is the delay between the end of a period and the
# first publication of its value: covariates and event notes use only values published before the
# window starts. The values themselves are later vintages (revised, re-based), the same for all methods.
RELEASES = {
    "macrodata": ("2009-12-15", "FRED and BLS accessed December 15, 2009 (statsmodels SOURCE)", 30,
                  "BEA's advance GDP estimate about 30 days after the quarter; CPI, M1 and unemployment earlier"),
    "danish_data": ("1990-05-01", "Johansen and Juselius (1990), Oxford Bulletin of Economics and Statistics 52(2)", 90,
                    "Danish quarterly national accounts about one quarter after the quarter"),
    "interest_inflation": ("2004-01-01", "JMulTi data set e6 of Luetkepohl and Kraetzig (eds.), Applied Time Series "
                                         "Econometrics, 2004", 45,
                           "German GDP deflator (national accounts) about 45 days after the quarter"),
    "co2": ("2004-01-01", "Keeling and Whorf (2004), Trends: A Compendium of Data on Global Change", 60,
            "SIO flask samples are analysed in the laboratory weeks after collection; monthly values about 60 days late"),
    "elnino": (None, "NOAA CPC Nino 1+2 index (ERSST.V3B) gives no release date", 7,
               "CPC posts the monthly index in the first week of the following month"),
    "elec_equip": (None, "Eurostat short-term statistics give no release date here", 60,
                   "Eurostat's industrial turnover index about 60 days after the month"),
    "sunspots": (None, "NGDC yearly file gives no release date", 30,
                 "the yearly mean sunspot number is published in the month after the year"),
    "nile": ("1978-08-01", "Cobb (1978), Biometrika 65(2)", 365,
             "annual discharge at Aswan appears in the hydrological yearbook of the following year"),
}


def release_facts(name: str, end: pd.Period) -> dict:
    """Documentation date (at or after the series end), its source, and the release lag of a dataset."""
    date, what, lag, lag_note = RELEASES[name]
    first_release = end.end_time.normalize() + pd.Timedelta(days=lag + 1)
    published = max(pd.Timestamp(date), first_release) if date else first_release
    return {"published": published, "published_source": what, "release_lag_days": int(lag),
            "release_lag_source": lag_note}
SHORT_NAMES = {"STS.M.I7.W.TOVT.NS0016.4.000": "turnover"}  # Eurostat codes read badly in figures


def variable_notes(note: str) -> dict[str, str]:
    """Variable definitions ("name - text", with indented continuation lines) parsed from a NOTE string."""
    out: dict[str, str] = {}
    current = None
    for line in note.splitlines():
        m = re.match(r"^\s*(\S+)\s+-\s+(.*\S)\s*$", line)
        if m:
            current = m.group(1)
            out[current] = m.group(2)
        elif current and line.strip() and not line.strip().endswith("::"):
            indent = len(line) - len(line.lstrip())
            if indent >= 12:
                out[current] += " " + line.strip()
            else:
                current = None
        else:
            current = None
    return out


def _frame(name: str) -> tuple[pd.DataFrame, pd.PeriodIndex]:
    """The dataset's numeric columns on a regular PeriodIndex of its frequency."""
    freq = DATASETS[name][1]
    df = importlib.import_module(f"statsmodels.datasets.{name}").load_pandas().data
    if name == "co2":  # weekly with gaps: monthly means, gaps filled by linear interpolation
        df = df.resample("MS").mean().interpolate()
        idx = df.index.to_period("M")
    elif name == "elnino":  # one row per year, one column per month
        wide = df.set_index("YEAR")
        values = wide.to_numpy().ravel()
        idx = pd.period_range(f"{int(wide.index[0])}-01", periods=values.size, freq="M")
        df = pd.DataFrame({"TEMPERATURE": values})
    elif "quarter" in df.columns:
        idx = pd.PeriodIndex([pd.Period(f"{int(y)}Q{int(q)}", "Q") for y, q in zip(df["year"], df["quarter"])])
    elif "year" in df.columns or "YEAR" in df.columns:
        col = "year" if "year" in df.columns else "YEAR"
        idx = pd.PeriodIndex([pd.Period(str(int(y)), "Y") for y in df[col]])
    else:
        idx = pd.DatetimeIndex(df.index).to_period(freq)
    df = df[[c for c in df.columns if c not in DATE_COLUMNS]].reset_index(drop=True)
    expected = pd.period_range(idx[0], periods=len(idx), freq=freq)
    if not (pd.PeriodIndex(idx) == expected).all():
        raise ValueError(f"timesx: {name} is not on a regular {freq} index")
    return df.astype(float), expected


def load_real(max_series: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(long table of observations, one row of documentation per series).

    Observations: series, t (period start), value. Documentation: series, dataset, variable,
    domain, freq, season, title, description, variable_note, start, end, published (date of the
    documentation), published_source, release_lag_days, release_lag_source.
    """
    rows, docs = [], []
    for name, (domain, freq) in DATASETS.items():
        mod = importlib.import_module(f"statsmodels.datasets.{name}")
        df, idx = _frame(name)
        notes = variable_notes(mod.NOTE)
        for var in df.columns:
            values = df[var].to_numpy()
            if not np.isfinite(values).all():
                raise ValueError(f"timesx: {name}.{var} has missing values")
            sid = f"{name}.{SHORT_NAMES.get(var, var)}"
            rows.append(pd.DataFrame({"series": sid, "t": idx.to_timestamp(), "value": values}))
            docs.append({"series": sid, "dataset": name, "variable": SHORT_NAMES.get(var, var), "domain": domain, "freq": freq,
                         "season": FREQ_SEASON[freq], "title": " ".join(mod.TITLE.split()),
                         "description": " ".join(mod.DESCRSHORT.split()),
                         "variable_note": " ".join(notes.get(var, notes.get("TEMPERATURE", var)).split()),
                         "start": idx[0].to_timestamp(), "end": idx[-1].to_timestamp(),
                         **release_facts(name, idx[-1])})
    docs_df = pd.DataFrame(docs)
    if max_series is not None:  # keep datasets balanced: pairs of series round-robin over datasets
        # (pairs, so that a small selection still has related variables for the covariate context)
        order = (docs_df.groupby("dataset", sort=False).cumcount() // 2).sort_values(kind="stable").index
        docs_df = docs_df.loc[order[:max_series]].reset_index(drop=True)
    obs = pd.concat(rows, ignore_index=True)
    obs = obs[obs["series"].isin(docs_df["series"])].reset_index(drop=True)
    return obs, docs_df
