"""Verdicts, computed from a claim's predicate and the measured metrics, never written by hand.

Each condition of a predicate compares a metric's confidence interval over replicates with a
threshold: it *holds* when the whole interval satisfies it, *fails* when the whole interval
violates it, and is *undecided* when the interval straddles the threshold. A claim is
``reproduced`` when every condition holds, ``not reproduced`` when any condition fails, and
``inconclusive`` otherwise.

Multiplicity: "every condition holds" is an intersection-union test, valid with each of its k tests
(a condition, and its control comparison if it names one) at the per-condition level (95%). "Some
condition fails" is a union: one of k noisy tests would fail by chance k times as often, so a test
fails only when the interval at the Bonferroni level 1 - (1 - level)/k lies wholly on the wrong side
(for the claim-level "any fails" decision Holm's procedure rejects exactly when Bonferroni does).

Gates: a paper's claims file names calibration conditions (its main baseline between the trivial
reference and the ceiling, arms that learned something). A claim relying on a gate that fails or is
undecided reads ``not testable at this scale``, naming the gate; its conditions are still computed
and shown. Power (``core.power``): each undecided test reports the replicates that would decide it.

NaN replicates (a quantity undefined in some run, such as the risk of an empty selection) make a condition undecided, never passing, and so does a single replicate
(``one replicate``: no spread can be estimated, so the point value is shown but decides nothing).

A condition that names a ``control`` (the same quantity on the arm where the claimed cause is absent)
also needs the metric to beat the control over the whole CI of their difference: a causal claim
cannot be reproduced by an arm that does no better without the cause. A claim marked
``by_construction`` states a property the construction guarantees on every input; it is checked on
every replicate and labelled ``holds by construction``, apart from ``reproduced``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .claims import Claim, Condition, Gate, PaperClaims
from .metrics import MetricsError, MetricsFile, Summary, summarize, summarize_difference
from .power import Power, claim_replicates, power

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
    summary: Summary  # the condition's quantity at the per-condition level
    state: str  # "holds" | "fails" | "undecided"
    note: str = ""
    control: Summary | None = None  # the control arm's own summary
    versus_control: Summary | None = None  # metric - control
    control_state: str = ""  # "holds" | "fails" | "undecided" for "beats the control"
    power: Power | None = None  # of the threshold test
    control_power: Power | None = None  # of "beats the control"
    threshold_state: str = ""  # the threshold test alone (state combines it with the control test)

    @property
    def one_replicate(self) -> bool:
        return self.summary.n == 1

    def tests(self) -> list[tuple[str, Power | None]]:
        """(state, power) of each test this condition makes: its threshold and, if any, its control."""
        out = [(self.threshold_state or self.state, self.power)]
        if self.control_state:
            out.append((self.control_state, self.control_power))
        return out


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    state: str  # "holds" | "fails" | "undecided"
    conditions: tuple[ConditionResult, ...]

    @property
    def reason(self) -> str:
        """"gate <id> failed: <quantity> <mean> [CI] vs <threshold>" for its first failing condition (else its
        first undecided one)."""
        word = {"fails": "failed", "undecided": "undecided", "holds": "holds"}[self.state]
        bad = next((c for c in self.conditions if c.state == "fails"),
                   next((c for c in self.conditions if c.state != "holds"), None))
        if bad is None:
            return f"gate {self.gate.id} {word}"
        s, cond = bad.summary, bad.condition
        ci = f" [{s.lo:.3g}, {s.hi:.3g}]" if s.n > 1 else " (one replicate)"
        extra = f"; {bad.note}" if bad.note else ""
        return f"gate {self.gate.id} {word}: {cond.quantity} {s.mean:.3g}{ci} vs {cond.threshold_text}{extra}"

    @property
    def n_star_note(self) -> str:
        """For an undecided gate, the seeds at which its undecided conditions would decide it (as for a claim:
        the gate fails when any condition fails); empty when the gate is decided."""
        if self.state != "undecided":
            return ""
        return claim_replicates([t for c in self.conditions for t in c.tests() if t[1] is not None])[1]


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    verdict: str
    conditions: tuple[ConditionResult, ...] = ()
    reason: str = ""
    ungated: str = ""  # the verdict the conditions alone give (differs from verdict when a gate blocks it)
    blocked_by: tuple[GateResult, ...] = ()  # gates it relies on that did not hold
    k: int = 0  # tests in the claim (conditions + control comparisons)
    fail_level: float = 0.95  # the level at which a single test fails the claim
    n_star: int | None = None  # replicates at which its undecided tests would decide it
    n_star_note: str = ""
    decided_by: str = ""  # which level decided it

    @property
    def one_replicate(self) -> bool:
        return any(c.one_replicate for c in self.conditions)

    @property
    def decided(self) -> bool:
        return self.verdict in (REPRODUCED, NOT_REPRODUCED, HOLDS_BY_CONSTRUCTION)


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


def _interval_state(summary: Summary, op: str, thr, wide: Summary | None = None) -> tuple[str, str]:
    """(state, note) of ``value op thr``: holds over the CI of ``summary``, fails over the CI of ``wide``
    (the multiplicity-adjusted interval; ``summary`` itself when None)."""
    wide = wide or summary
    if summary.n == 0:
        return "undecided", f"all {summary.n_nan} replicates are NaN"
    if summary.n_nan:
        return "undecided", f"{summary.n_nan} of {summary.n + summary.n_nan} replicates are NaN"
    if summary.n == 1:
        return "undecided", f"{ONE_REPLICATE}: a point value, no interval"
    if summary.lo != summary.lo or summary.hi != summary.hi:  # NaN bounds (infinite values)
        return "undecided", "interval undefined (infinite values)"
    if _satisfies(summary.lo, op, thr) and _satisfies(summary.hi, op, thr):
        return "holds", ""
    if op == "between":
        fails = wide.hi < thr[0] or wide.lo > thr[1]
        fails_narrow = summary.hi < thr[0] or summary.lo > thr[1]
    else:
        fails = not _satisfies(wide.lo, op, thr) and not _satisfies(wide.hi, op, thr)
        fails_narrow = not _satisfies(summary.lo, op, thr) and not _satisfies(summary.hi, op, thr)
    if fails:
        return "fails", ""
    if fails_narrow:
        return "undecided", "fails over its own interval, not over the multiplicity-adjusted one"
    return "undecided", ""


def _combine(states) -> str:
    states = set(states)
    if states == {"holds"}:
        return "holds"
    return "fails" if "fails" in states else "undecided"


def judge_condition(cond: Condition, summary: Summary, versus_control: Summary | None = None,
                    control: Summary | None = None, *, wide: Summary | None = None,
                    wide_versus_control: Summary | None = None, level: float = 0.95,
                    fail_level: float | None = None) -> ConditionResult:
    """The condition over the CI of its quantity and, with a control, "beats the control" over the CI of
    metric - control (strictly on the claimed side of 0: a tie with the control does not reproduce).
    ``wide``/``wide_versus_control`` are the same at ``fail_level``, the level at which a test fails."""
    fail_level = fail_level or level
    state, note = _interval_state(summary, cond.op, cond.threshold, wide)
    pw = power(summary, cond.op, cond.threshold, level, fail_level)
    if cond.control is None or versus_control is None:
        return ConditionResult(cond, summary, state, note, power=pw, threshold_state=state)
    beat_op = ">" if cond.op in (">", ">=") else "<"
    c_state, c_note = _interval_state(versus_control, beat_op, 0.0, wide_versus_control)
    c_pw = power(versus_control, beat_op, 0.0, level, fail_level)
    notes = [n for n in (note, f"vs control {cond.control}: {c_note}" if c_note else "") if n]
    return ConditionResult(cond, summary, _combine((state, c_state)), "; ".join(notes), control,
                           versus_control, c_state, pw, c_pw, state)


def _reference(ref, metrics: MetricsFile, n: int, cond: Condition) -> list[float]:
    if isinstance(ref, str):
        values = metrics.get(ref).values
        if len(values) != n:
            raise MetricsError(f"paper {metrics.paper!r}: {cond.metric!r} has {n} replicates, {ref!r} "
                               f"{len(values)}: a per-replicate comparison needs the same replicates")
        return values
    return [float(ref)] * n


def condition_values(cond: Condition, metrics: MetricsFile) -> list[float]:
    """Per-replicate values of the condition's quantity: the metric, metric - minus, or the metric's position
    between floor and ceiling (NaN where floor = ceiling)."""
    x = metrics.get(cond.metric).values
    if cond.minus:
        return [a - b for a, b in zip(x, _reference(cond.minus, metrics, len(x), cond))]
    if cond.floor is not None:
        lo = _reference(cond.floor, metrics, len(x), cond)
        hi = _reference(cond.ceiling, metrics, len(x), cond)
        return [(a - f) / (c - f) if c != f else math.nan for a, f, c in zip(x, lo, hi)]
    return list(x)


def _judge_conditions(conditions, metrics: MetricsFile, level: float, method: str
                      ) -> tuple[list[ConditionResult], int, float]:
    """Every condition, with tests failing at the Bonferroni level over the k tests."""
    k = sum(1 + bool(c.control) for c in conditions)
    fail_level = 1 - (1 - level) / max(k, 1)
    results = []
    for c in conditions:
        values = condition_values(c, metrics)
        summary = summarize(values, level=level, method=method)
        wide = summarize(values, level=fail_level, method=method)
        if c.control:
            ctrl = metrics.get(c.control).values
            results.append(judge_condition(
                c, summary, summarize_difference(values, ctrl, level, method),
                summarize(ctrl, level=level, method=method), wide=wide,
                wide_versus_control=summarize_difference(values, ctrl, fail_level, method),
                level=level, fail_level=fail_level))
        else:
            results.append(judge_condition(c, summary, wide=wide, level=level, fail_level=fail_level))
    return results, k, fail_level


def judge_gate(gate: Gate, metrics: MetricsFile, level: float = 0.95, method: str = "t") -> GateResult:
    results, _, _ = _judge_conditions(gate.conditions, metrics, level, method)
    return GateResult(gate, _combine(r.state for r in results), tuple(results))


def _by_construction(claim: Claim, metrics: MetricsFile) -> ClaimResult:
    """Every finite replicate must satisfy every condition: a guaranteed property has no spread to
    average over, and one violation is a defect of the implementation."""
    results, bad = [], []
    for c in claim.conditions:
        values = condition_values(c, metrics)
        summary = summarize(values)
        finite = [v for v in values if v == v]
        ok = bool(finite) and len(finite) == len(values) and all(_satisfies(v, c.op, c.threshold) for v in finite)
        results.append(ConditionResult(c, summary, "holds" if ok else "fails"))
        if not ok:
            bad.append(f"{c.metric}: {sum(not _satisfies(v, c.op, c.threshold) for v in finite)} of "
                       f"{len(values)} replicates violate it ({len(values) - len(finite)} NaN)")
    if bad:
        return ClaimResult(claim, NOT_REPRODUCED, tuple(results),
                           "a property that should hold by construction is violated: " + "; ".join(bad),
                           NOT_REPRODUCED, decided_by="a replicate violates it")
    return ClaimResult(claim, HOLDS_BY_CONSTRUCTION, tuple(results), claim.by_construction,
                       HOLDS_BY_CONSTRUCTION, decided_by="every replicate satisfies it")


def apply_gates(result: ClaimResult, gates: tuple[GateResult, ...]) -> ClaimResult:
    """The claim as ``not testable at this scale`` when a gate it relies on did not hold."""
    blocking = tuple(g for g in gates if g.state != "holds")
    if not blocking:
        return result
    reason = "; ".join(g.reason for g in blocking)
    return dataclasses.replace(result, verdict=NOT_TESTABLE, reason=reason, blocked_by=blocking,
                               ungated=result.verdict, n_star=None, n_star_note="", decided_by="")


def judge_claim(claim: Claim, metrics: MetricsFile | None, level: float = 0.95,
                method: str = "t", gates: tuple[GateResult, ...] = ()) -> ClaimResult:
    """The claim's verdict; ``gates`` are the judged gates it relies on (see ``judge_paper``)."""
    if claim.not_testable:
        return ClaimResult(claim, NOT_TESTABLE, reason=claim.not_testable, ungated=NOT_TESTABLE)
    if metrics is None:
        return ClaimResult(claim, NOT_RUN, reason="no metrics at this scale", ungated=NOT_RUN)
    if claim.by_construction:
        return apply_gates(_by_construction(claim, metrics), gates)
    results, k, fail_level = _judge_conditions(claim.conditions, metrics, level, method)
    verdict = {"holds": REPRODUCED, "fails": NOT_REPRODUCED, "undecided": INCONCLUSIVE}[
        _combine(r.state for r in results)]
    reason = "; ".join(f"{r.condition.metric}: {r.note}" for r in results if r.note)
    n_star, n_note = (None, "")
    if verdict == INCONCLUSIVE:
        n_star, n_note = claim_replicates([t for r in results for t in r.tests() if t[1] is not None])
    decided_by = {
        REPRODUCED: f"every test holds over its {level:.0%} interval (intersection-union, k = {k})",
        NOT_REPRODUCED: (f"a test fails over its {fail_level:.2%} interval (Bonferroni over k = {k} tests)"
                         if k > 1 else f"the test fails over its {level:.0%} interval"),
        INCONCLUSIVE: "",
    }[verdict]
    result = ClaimResult(claim, verdict, tuple(results), reason, verdict, (), k, fail_level, n_star, n_note,
                         decided_by)
    return apply_gates(result, gates)


def judge_paper(pc: PaperClaims, metrics: MetricsFile | None, gates: dict[str, GateResult] | None = None,
                **kw) -> list[ClaimResult]:
    """Verdicts for every claim of a paper, after its gates (``gates``: already judged by ``judge_gates``, else
    judged here); a metric missing from metrics.json raises, naming both."""
    if metrics is not None:
        missing = [m for m in pc.metrics_needed(metrics.scale) if m not in metrics.metrics]
        if missing:
            raise MetricsError(
                f"paper {pc.paper!r}: metrics.json lacks {', '.join(repr(m) for m in missing)} "
                f"needed by resources/claims/{pc.paper}.yaml"
            )
    gates = judge_gates(pc, metrics, **kw) if gates is None else gates
    return [judge_claim(c, metrics, gates=tuple(gates[g.id] for g in pc.gates_of(c) if g.id in gates), **kw)
            for c in pc.claims]


def judge_gates(pc: PaperClaims, metrics: MetricsFile | None, **kw) -> dict[str, GateResult]:
    """Every gate of the paper that applies at the run's scale, judged (empty before a run)."""
    if metrics is None:
        return {}
    return {g.id: judge_gate(g, metrics, **kw) for g in pc.gates if g.applies(metrics.scale)}
