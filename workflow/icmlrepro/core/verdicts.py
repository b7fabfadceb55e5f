"""Verdicts, computed from a claim's predicate and the measured metrics, never written by hand.

Each condition of a predicate compares a metric's confidence interval over replicates with a
threshold: it *holds* when the whole interval satisfies it, *fails* when the whole interval
violates it, and is *undecided* when the interval straddles the threshold. A claim is
``reproduced`` when every condition holds, ``not reproduced`` when any condition fails, and
``inconclusive`` otherwise. NaN replicates (a quantity undefined in some run, such as the risk
of an empty selection) make a condition undecided, never passing, and so does a single replicate
(``one replicate``: no spread can be estimated, so the point value is shown but decides nothing).

A condition that names a ``control`` (the same quantity on the arm where the claimed cause is absent)
also needs the metric to beat the control over the whole CI of their difference: a causal claim
cannot be reproduced by an arm that does no better without the cause. A claim marked
``by_construction`` states a property the construction guarantees on every input; it is checked on
every replicate and labelled ``holds by construction``, apart from ``reproduced``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .claims import Claim, Condition, PaperClaims
from .metrics import MetricsError, MetricsFile, Summary, summarize, summarize_difference

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
NOT_RUN = "not run"
NOT_TESTABLE = "not testable at this scale"
HOLDS_BY_CONSTRUCTION = "holds by construction"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, HOLDS_BY_CONSTRUCTION, NOT_RUN, NOT_TESTABLE)
ONE_REPLICATE = "one replicate"


@dataclass(frozen=True)
class ConditionResult:
    condition: Condition
    summary: Summary
    state: str  # "holds" | "fails" | "undecided"
    note: str = ""
    control: Summary | None = None  # the control arm's own summary
    versus_control: Summary | None = None  # metric - control
    control_state: str = ""  # "holds" | "fails" | "undecided" for "beats the control"

    @property
    def one_replicate(self) -> bool:
        return self.summary.n == 1


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    verdict: str
    conditions: tuple[ConditionResult, ...] = ()
    reason: str = ""

    @property
    def one_replicate(self) -> bool:
        return any(c.one_replicate for c in self.conditions)


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


def _interval_state(summary: Summary, op: str, thr) -> tuple[str, str]:
    """(state, note) of ``value op thr`` over the CI of ``summary``."""
    if summary.n == 0:
        return "undecided", f"all {summary.n_nan} replicates are NaN"
    if summary.n_nan:
        return "undecided", f"{summary.n_nan} of {summary.n + summary.n_nan} replicates are NaN"
    if summary.n == 1:
        return "undecided", f"{ONE_REPLICATE}: a point value, no interval"
    if summary.lo != summary.lo or summary.hi != summary.hi:  # NaN bounds (infinite values)
        return "undecided", "interval undefined (infinite values)"
    lo_ok = _satisfies(summary.lo, op, thr)
    hi_ok = _satisfies(summary.hi, op, thr)
    if op == "between":
        if lo_ok and hi_ok:
            return "holds", ""
        if summary.hi < thr[0] or summary.lo > thr[1]:
            return "fails", ""
        return "undecided", ""
    if lo_ok and hi_ok:
        return "holds", ""
    if not lo_ok and not hi_ok:
        return "fails", ""
    return "undecided", ""


def _combine(states) -> str:
    states = set(states)
    if states == {"holds"}:
        return "holds"
    return "fails" if "fails" in states else "undecided"


def judge_condition(cond: Condition, summary: Summary, versus_control: Summary | None = None,
                    control: Summary | None = None) -> ConditionResult:
    """The condition over the CI of the metric and, with a control, "beats the control" over the CI of
    metric - control (strictly on the claimed side of 0: a tie with the control does not reproduce)."""
    state, note = _interval_state(summary, cond.op, cond.threshold)
    if cond.control is None or versus_control is None:
        return ConditionResult(cond, summary, state, note)
    beat_op = ">" if cond.op in (">", ">=") else "<"
    c_state, c_note = _interval_state(versus_control, beat_op, 0.0)
    notes = [n for n in (note, f"vs control {cond.control}: {c_note}" if c_note else "") if n]
    return ConditionResult(cond, summary, _combine((state, c_state)), "; ".join(notes), control,
                           versus_control, c_state)


def _by_construction(claim: Claim, metrics: MetricsFile) -> ClaimResult:
    """Every finite replicate must satisfy every condition: a guaranteed property has no spread to
    average over, and one violation is a defect of the implementation."""
    results, bad = [], []
    for c in claim.conditions:
        values = metrics.get(c.metric).values
        summary = summarize(values)
        finite = [v for v in values if v == v]
        ok = bool(finite) and len(finite) == len(values) and all(_satisfies(v, c.op, c.threshold) for v in finite)
        results.append(ConditionResult(c, summary, "holds" if ok else "fails"))
        if not ok:
            bad.append(f"{c.metric}: {sum(not _satisfies(v, c.op, c.threshold) for v in finite)} of "
                       f"{len(values)} replicates violate it ({len(values) - len(finite)} NaN)")
    if bad:
        return ClaimResult(claim, NOT_REPRODUCED, tuple(results),
                           "a property that should hold by construction is violated: " + "; ".join(bad))
    return ClaimResult(claim, HOLDS_BY_CONSTRUCTION, tuple(results), claim.by_construction)


def judge_claim(claim: Claim, metrics: MetricsFile | None, level: float = 0.95,
                method: str = "t") -> ClaimResult:
    if claim.not_testable:
        return ClaimResult(claim, NOT_TESTABLE, reason=claim.not_testable)
    if metrics is None:
        return ClaimResult(claim, NOT_RUN, reason="no metrics at this scale")
    if claim.by_construction:
        return _by_construction(claim, metrics)
    results = []
    for c in claim.conditions:
        values = metrics.get(c.metric).values
        summary = summarize(values, level=level, method=method)
        if c.control:
            ctrl = metrics.get(c.control).values
            results.append(judge_condition(c, summary, summarize_difference(values, ctrl, level, method),
                                           summarize(ctrl, level=level, method=method)))
        else:
            results.append(judge_condition(c, summary))
    verdict = {"holds": REPRODUCED, "fails": NOT_REPRODUCED, "undecided": INCONCLUSIVE}[
        _combine(r.state for r in results)]
    reason = "; ".join(f"{r.condition.metric}: {r.note}" for r in results if r.note)
    return ClaimResult(claim, verdict, tuple(results), reason)


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
