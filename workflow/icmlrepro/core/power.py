"""Power of a verdict: how far an undecided test is from being decided, in replicates.

An undecided condition's confidence interval straddles its threshold. With the observed mean and standard
deviation held fixed, the interval narrows as ``t(n-1) * sd / sqrt(n)``; the condition is decided at the
smallest ``n`` whose half-width is below the distance from the mean to the threshold (toward the side the
mean lies on, at that side's confidence level: the per-condition level for "holds", the multiplicity-adjusted
level for "fails"). This sizes the seeds a rerun would need; it is a planning figure computed from the
observed spread, not a guarantee (the next seeds move the mean and the spread too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from .metrics import Summary

N_CAP = 100  # replicates beyond which a miniature is the wrong tool, not an underpowered one


@dataclass(frozen=True)
class Power:
    """One test's distance from a decision."""

    half_width: float  # of the interval that judged it (the per-condition level)
    distance: float  # from the mean to the nearest threshold (NaN when undefined)
    toward: str  # "holds" | "fails": the side of the threshold the mean lies on ("" when undefined)
    n_star: int | None  # replicates at which the observed mean and sd would decide it; None: no n <= N_CAP
    note: str = ""

    def describe(self) -> str:
        if self.n_star is not None:
            return f"≈ {self.n_star} seeds (would {'hold' if self.toward == 'holds' else 'fail'})"
        return self.note


def replicates_to_decide(distance: float, sd: float, level: float, cap: int = N_CAP) -> int | None:
    """Smallest ``n >= 2`` with ``t_{(1+level)/2}(n-1) * sd / sqrt(n) < distance``, or None if none up to
    ``cap``. ``t(n-1)/sqrt(n)`` decreases in ``n``, so the first ``n`` found is the answer."""
    if not (distance > 0) or not math.isfinite(sd):
        return None
    if sd == 0:
        return 2
    q = 0.5 + level / 2
    for n in range(2, cap + 1):
        if float(stats.t.ppf(q, df=n - 1)) * sd / math.sqrt(n) < distance:
            return n
    return None


def _side(mean: float, op: str, thr) -> tuple[str, float]:
    """(the side the mean lies on, its distance to the nearest threshold)."""
    if op == "between":
        lo, hi = thr
        if lo <= mean <= hi:
            return "holds", min(mean - lo, hi - mean)
        return "fails", (lo - mean) if mean < lo else (mean - hi)
    ok = {"<": mean < thr, "<=": mean <= thr, ">": mean > thr, ">=": mean >= thr}[op]
    return ("holds" if ok else "fails"), abs(mean - thr)


def power(summary: Summary, op: str, thr, hold_level: float, fail_level: float, cap: int = N_CAP) -> Power:
    """The test ``mean op thr``'s half-width, distance and n* (see the module docstring)."""
    if summary.n_nan or summary.n < 2 or not math.isfinite(summary.mean):
        why = ("NaN replicates: no spread to size from" if summary.n_nan or summary.n == 0
               else "one replicate: no spread to size from")
        return Power(summary.half_width, math.nan, "", None, why)
    toward, distance = _side(summary.mean, op, thr)
    if distance == 0:
        return Power(summary.half_width, 0.0, toward, None, "no n would decide: the mean sits on the threshold")
    level = hold_level if toward == "holds" else fail_level
    n = replicates_to_decide(distance, summary.sd, level, cap)
    note = "" if n is not None else (f"more than {cap} seeds (the mean is {distance:.3g} from the threshold, "
                                     f"sd {summary.sd:.3g})")
    return Power(summary.half_width, distance, toward, n, note)


def claim_replicates(tests: list[tuple[str, Power]]) -> tuple[int | None, str]:
    """Replicates at which a claim's undecided tests would decide it, from ``(state, power)`` per test.

    A claim fails when any test fails, so if some undecided test leans toward failing, the claim is decided
    by the first of them to fail (the smallest n*); otherwise every undecided test must hold (the largest)."""
    undecided = [p for state, p in tests if state == "undecided"]
    if not undecided:
        return None, ""
    failing = [p for p in undecided if p.toward == "fails"]
    if failing:
        ns = [p.n_star for p in failing if p.n_star is not None]
        if ns:
            return min(ns), f"≈ {min(ns)} seeds (a condition would fail)"
        return None, "no n ≤ %d would decide: %s" % (N_CAP, failing[0].note or "undefined spread")
    if any(p.n_star is None for p in undecided):
        why = next(p.note for p in undecided if p.n_star is None)
        return None, f"no n ≤ {N_CAP} would decide: {why}"
    n = max(p.n_star for p in undecided)
    return n, f"≈ {n} seeds (every condition would hold)"
