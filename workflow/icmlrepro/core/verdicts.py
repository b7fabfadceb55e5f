"""Verdicts, computed from a claim's predicate and the measured metrics, never written by hand.

Each condition of a predicate compares a metric's confidence interval over replicates with a
threshold: it *holds* when the whole interval satisfies it, *fails* when the whole interval
violates it, and is *undecided* when the interval straddles the threshold. A claim is
``reproduced`` when every condition holds, ``not reproduced`` when any condition fails, and
``inconclusive`` otherwise. NaN replicates (a quantity undefined in some run, such as the risk
of an empty selection) make a condition undecided, never passing.
"""

from __future__ import annotations

from dataclasses import dataclass

from .claims import Claim, Condition, PaperClaims
from .metrics import MetricsError, MetricsFile, Summary, summarize

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
NOT_RUN = "not run"
NOT_TESTABLE = "not testable at this scale"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN, NOT_TESTABLE)


@dataclass(frozen=True)
class ConditionResult:
    condition: Condition
    summary: Summary
    state: str  # "holds" | "fails" | "undecided"
    note: str = ""


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    verdict: str
    conditions: tuple[ConditionResult, ...] = ()
    reason: str = ""


def _satisfies(x: float, op: str, thr) -> bool:
    if op == "<":
        return x < thr
    if op == "<=":
        return x <= thr
    if op == ">":
        return x > thr
    if op == ">=":
        return x >= thr
    if op == "between":
        return thr[0] <= x <= thr[1]
    raise ValueError(f"unknown operator {op!r}")


def judge_condition(cond: Condition, summary: Summary) -> ConditionResult:
    if summary.n == 0:
        return ConditionResult(cond, summary, "undecided", f"all {summary.n_nan} replicates are NaN")
    if summary.n_nan:
        return ConditionResult(cond, summary, "undecided",
                               f"{summary.n_nan} of {summary.n + summary.n_nan} replicates are NaN")
    if summary.lo != summary.lo or summary.hi != summary.hi:  # NaN bounds (infinite values)
        return ConditionResult(cond, summary, "undecided", "interval undefined (infinite values)")
    lo_ok = _satisfies(summary.lo, cond.op, cond.threshold)
    hi_ok = _satisfies(summary.hi, cond.op, cond.threshold)
    if cond.op == "between":
        lo_t, hi_t = cond.threshold
        if lo_ok and hi_ok:
            return ConditionResult(cond, summary, "holds")
        if summary.hi < lo_t or summary.lo > hi_t:
            return ConditionResult(cond, summary, "fails")
        return ConditionResult(cond, summary, "undecided")
    if lo_ok and hi_ok:
        return ConditionResult(cond, summary, "holds")
    if not lo_ok and not hi_ok:
        return ConditionResult(cond, summary, "fails")
    return ConditionResult(cond, summary, "undecided")


def judge_claim(claim: Claim, metrics: MetricsFile | None, level: float = 0.95,
                method: str = "t") -> ClaimResult:
    if claim.not_testable:
        return ClaimResult(claim, NOT_TESTABLE, reason=claim.not_testable)
    if metrics is None:
        return ClaimResult(claim, NOT_RUN, reason="no metrics at this scale")
    results = tuple(
        judge_condition(c, summarize(metrics.get(c.metric).values, level=level, method=method))
        for c in claim.conditions
    )
    states = {r.state for r in results}
    if states == {"holds"}:
        verdict = REPRODUCED
    elif "fails" in states:
        verdict = NOT_REPRODUCED
    else:
        verdict = INCONCLUSIVE
    reason = "; ".join(f"{r.condition.metric}: {r.note}" for r in results if r.note)
    return ClaimResult(claim, verdict, results, reason)


def judge_paper(pc: PaperClaims, metrics: MetricsFile | None, **kw) -> list[ClaimResult]:
    """Verdicts for every claim of a paper; a metric missing from metrics.json raises, naming both."""
    if metrics is not None:
        missing = [m for m in pc.metrics_needed() if m not in metrics.metrics]
        if missing:
            raise MetricsError(
                f"paper {pc.paper!r}: metrics.json lacks {', '.join(repr(m) for m in missing)} "
                f"needed by resources/claims/{pc.paper}.yaml"
            )
    return [judge_claim(c, metrics, **kw) for c in pc.claims]
