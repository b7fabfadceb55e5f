"""The metrics contract (``results/<scale>/<paper>/metrics.json``) and its aggregation.

A paper's evaluation records every metric as its per-replicate values (one per seed, never only
a mean), with unit, the better direction and whether it is a timing. Timings are the only values
allowed to differ between two identical runs. Aggregation into a mean and a confidence interval
lives here, once, so that every verdict in the report is computed the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np
from scipy import stats

from .io import read_json, rebuild_hint, write_json

CONTRACT_VERSION = 1
DIRECTIONS = ("higher", "lower", "none")


class MetricsError(ValueError):
    """metrics.json breaks the contract, or a claim asks for a metric it does not hold."""


@dataclass
class Metric:
    values: list[float]
    unit: str = ""
    direction: str = "none"
    timing: bool = False
    description: str = ""
    # its own replicates, when a cheap stage ran more seeds than the paper (a stage sized by its claims' n*);
    # None: the file's replicates
    replicates: list | None = None

    def __post_init__(self) -> None:
        self.values = [float(v) for v in self.values]
        if self.direction not in DIRECTIONS:
            raise MetricsError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.replicates is not None and len(self.replicates) != len(self.values):
            raise MetricsError(f"{len(self.values)} values for {len(self.replicates)} replicates")


@dataclass
class MetricsFile:
    """Everything one paper measured at one scale."""

    paper: str
    scale: str
    replicate: str = "seed"  # what one value of a metric stands for
    replicates: list = field(default_factory=list)  # e.g. the seeds, in value order
    metrics: dict[str, Metric] = field(default_factory=dict)

    def add(self, name: str, values: Iterable[float], **kw) -> None:
        if name in self.metrics:
            raise MetricsError(f"{self.paper}: metric {name!r} recorded twice")
        self.metrics[name] = Metric(list(values), **kw)

    def to_dict(self) -> dict:
        return {
            "contract": CONTRACT_VERSION,
            "paper": self.paper,
            "scale": self.scale,
            "replicate": self.replicate,
            "replicates": list(self.replicates),
            "metrics": {
                k: {"values": m.values, "unit": m.unit, "direction": m.direction,
                    "timing": m.timing, "description": m.description,
                    **({"replicates": list(m.replicates)} if m.replicates is not None else {})}
                for k, m in sorted(self.metrics.items())
            },
        }

    def write(self, path: str | Path) -> None:
        write_json(path, self.to_dict())

    def get(self, name: str) -> Metric:
        try:
            return self.metrics[name]
        except KeyError:
            raise MetricsError(
                f"paper {self.paper!r}: metric {name!r} is not in metrics.json "
                f"(it has {len(self.metrics)} metrics; the claims file and the evaluation disagree)"
            ) from None


def _to_float(v) -> float:
    """A value as ``write_json`` writes it: a finite number, null (NaN) or the strings "inf"/"-inf". Anything
    else (true, "0.5", 1e400 that JSON reads as infinity) is refused: it would pass conditions silently."""
    if v is None:
        return math.nan
    if isinstance(v, str) and v in ("inf", "-inf"):
        return float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(v)
    return float(v)


def _values(name: str, raw) -> list[float]:
    """A metric's values as floats; a value that is no number is named with its metric and position."""
    if not isinstance(raw, list):
        raise MetricsError(f"metric {name!r}: 'values' is {raw!r}, not a list")
    out = []
    for i, v in enumerate(raw):
        try:
            out.append(_to_float(v))
        except (TypeError, ValueError):
            raise MetricsError(f"metric {name!r}: value {i} is {v!r}, not a number (a finite number, null for "
                               "NaN, or \"inf\"/\"-inf\")") from None
    return out


def load_metrics(path: str | Path) -> MetricsFile:
    raw = read_json(path)
    try:
        if raw.get("contract") != CONTRACT_VERSION:
            raise MetricsError(f"unknown contract version {raw.get('contract')!r}")
        mf = MetricsFile(raw["paper"], raw["scale"], raw.get("replicate", "seed"), raw.get("replicates", []))
        for name, m in raw["metrics"].items():
            mf.metrics[name] = Metric(
                _values(name, m["values"]), m.get("unit", ""), m.get("direction", "none"),
                bool(m.get("timing", False)), m.get("description", ""), m.get("replicates"),
            )
    except (KeyError, TypeError, AttributeError, MetricsError) as exc:
        raise MetricsError(f"{path}: does not follow the metrics contract ({exc}); {rebuild_hint(path)}") from exc
    return mf


@dataclass(frozen=True)
class Summary:
    """Mean and confidence interval of one metric over replicates."""

    mean: float
    lo: float
    hi: float
    n: int
    n_nan: int
    method: str
    sd: float = math.nan  # sample standard deviation of the replicates (0 for identical values)

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2


def summarize(values: Iterable[float], level: float = 0.95, method: str = "t",
              n_boot: int = 2000, seed: int = 0) -> Summary:
    """Mean and a two-sided ``level`` CI over replicates.

    ``method="t"``: Student-t interval; ``"bootstrap"``: percentile bootstrap (deterministic seed).
    One finite value gives a zero-width interval (method ``"single"``): the report flags it,
    since no spread can be estimated. NaN values are counted and left out; all-NaN gives NaN.
    """
    arr = np.asarray(list(values), dtype=float)
    nan = int(np.isnan(arr).sum())
    arr = arr[~np.isnan(arr)]
    n = int(arr.size)
    if n == 0:
        return Summary(math.nan, math.nan, math.nan, 0, nan, "none")
    mean = float(arr.mean())
    if n == 1:
        return Summary(mean, mean, mean, 1, nan, "single")
    if np.all(arr == arr[0]):  # zero variance: the interval is the point (no rounding noise)
        return Summary(float(arr[0]), float(arr[0]), float(arr[0]), n, nan, method, 0.0)
    sd = float(arr.std(ddof=1))
    if not math.isfinite(sd):
        return Summary(mean, math.nan, math.nan, n, nan, method, sd)
    if method == "t":
        half = float(stats.t.ppf(0.5 + level / 2, df=n - 1)) * sd / math.sqrt(n)
        return Summary(mean, mean - half, mean + half, n, nan, "t", sd)
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        means = arr[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
        lo, hi = np.quantile(means, [(1 - level) / 2, 0.5 + level / 2])
        return Summary(mean, float(lo), float(hi), n, nan, "bootstrap", sd)
    raise ValueError(f"unknown CI method {method!r} (allowed: t, bootstrap)")


def summarize_difference(a: Iterable[float], b: Iterable[float], level: float = 0.95,
                         method: str = "t") -> Summary:
    """Mean and CI of ``a - b``: paired per replicate when both have the same replicates (the arms of one
    run share seeds, which removes the seed-to-seed spread both share), else Welch's interval for two
    independent samples. A replicate that is NaN in either arm is NaN in a paired difference (and so
    leaves its verdict undecided); Welch's interval leaves NaN replicates out of each arm."""
    a = np.asarray(list(a), dtype=float)
    b = np.asarray(list(b), dtype=float)
    if a.size == b.size:
        return summarize(a - b, level=level, method=method)
    sa, sb = summarize(a, level, method), summarize(b, level, method)
    nan = sa.n_nan + sb.n_nan
    if sa.n < 2 or sb.n < 2:
        n = min(sa.n, sb.n)
        return Summary(sa.mean - sb.mean, sa.mean - sb.mean, sa.mean - sb.mean, n, nan, "single")
    fa, fb = a[~np.isnan(a)], b[~np.isnan(b)]
    va, vb = fa.var(ddof=1) / fa.size, fb.var(ddof=1) / fb.size
    mean = float(fa.mean() - fb.mean())
    n = min(sa.n, sb.n)
    if va + vb == 0:
        return Summary(mean, mean, mean, n, nan, "welch", 0.0)
    dof = (va + vb) ** 2 / (va ** 2 / (fa.size - 1) + vb ** 2 / (fb.size - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df=dof)) * math.sqrt(va + vb)
    # sd: the spread that gives the same standard error at n replicates per arm (for sizing seeds)
    return Summary(mean, mean - half, mean + half, n, nan, "welch", math.sqrt((va + vb) * n))
