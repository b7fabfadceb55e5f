"""Each verdict, computed from a predicate over the CI of per-seed values, including the edge cases."""

import pytest

from icmlrepro.core import verdicts as V
from icmlrepro.core.claims import Claim, Condition, PaperClaims, load_claims
from icmlrepro.core.metrics import MetricsError, MetricsFile


def claim(*conds, not_testable=None, by_construction=None):
    return Claim("c", "a quote of ten chars", "quantitative", {"text": "t"}, "s",
                 tuple(Condition(*c) for c in conds), not_testable, by_construction=by_construction)


def metrics(**values):
    mf = MetricsFile("p", "smoke", replicates=list(range(3)))
    for k, v in values.items():
        mf.add(k, v)
    return mf


@pytest.mark.parametrize("values, op, thr, verdict", [
    ([0.30, 0.31, 0.29], ">", 0.2, V.REPRODUCED),          # whole CI above
    ([0.10, 0.11, 0.09], ">", 0.2, V.NOT_REPRODUCED),      # whole CI below
    ([0.10, 0.30, 0.20], ">", 0.2, V.INCONCLUSIVE),        # CI straddles
    ([-0.01, -0.02, -0.015], "<=", 0.0, V.REPRODUCED),
    ([0.01, 0.02, 0.015], "<=", 0.0, V.NOT_REPRODUCED),
    ([0.0, 0.0, 0.0], "<=", 0.0, V.REPRODUCED),             # zero variance on the boundary
    ([0.0, 0.0, 0.0], "<", 0.0, V.NOT_REPRODUCED),
    ([0.5, 0.5, 0.5], "between", (0.4, 0.6), V.REPRODUCED),
    ([0.9, 0.95, 0.92], "between", (0.4, 0.6), V.NOT_REPRODUCED),
    ([0.5, 0.7, 0.6], "between", (0.4, 0.6), V.INCONCLUSIVE),
])
def test_verdict_from_interval(values, op, thr, verdict):
    assert V.judge_claim(claim(("m", op, thr)), metrics(m=values)).verdict == verdict


def test_one_replicate_never_decides():
    """A single value has no spread: it is shown as a point and counts as inconclusive either way."""
    for value in (0.3, 0.1):
        mf = MetricsFile("p", "smoke", replicates=[0])
        mf.add("m", [value])
        r = V.judge_claim(claim(("m", ">", 0.2)), mf)
        assert r.verdict == V.INCONCLUSIVE and r.one_replicate and V.ONE_REPLICATE in r.reason
        assert r.conditions[0].summary.method == "single"


@pytest.mark.parametrize("method, control, verdict", [
    ([0.80, 0.82, 0.81], [0.60, 0.61, 0.62], V.REPRODUCED),       # beats the control on every seed
    ([0.80, 0.82, 0.81], [0.80, 0.82, 0.81], V.NOT_REPRODUCED),   # the control does as well: no cause
    ([0.80, 0.82, 0.81], [0.85, 0.86, 0.84], V.NOT_REPRODUCED),   # the control does better
    ([0.80, 0.82, 0.81], [0.79, 0.84, 0.80], V.INCONCLUSIVE),     # difference straddles 0
])
def test_control_must_be_beaten_over_the_whole_ci(method, control, verdict):
    """``acc > 0.5`` holds for the method in every case; only the control decides."""
    r = V.judge_claim(claim(("acc", ">", 0.5, "acc_ctrl")), metrics(acc=method, acc_ctrl=control))
    assert r.verdict == verdict
    assert r.conditions[0].versus_control is not None and r.conditions[0].control is not None


def test_control_of_a_lower_is_better_claim():
    mf = metrics(err=[0.1, 0.11, 0.12], err_ctrl=[0.3, 0.31, 0.29])
    assert V.judge_claim(claim(("err", "<", 0.2, "err_ctrl")), mf).verdict == V.REPRODUCED
    assert V.judge_claim(claim(("err_ctrl", "<", 0.4, "err")), mf).verdict == V.NOT_REPRODUCED


def test_control_with_other_replicates_uses_welch():
    mf = metrics(m=[1.0, 1.1, 0.9])
    mf.add("null", [0.0, 0.1, -0.1, 0.05, -0.05])
    r = V.judge_claim(claim(("m", ">", 0.5, "null")), mf)
    assert r.verdict == V.REPRODUCED and r.conditions[0].versus_control.method == "welch"


def test_by_construction_is_a_label_not_a_reproduction():
    ok = V.judge_claim(claim(("m", ">=", 0.0), by_construction="PSD by the theorem"), metrics(m=[0.0, 1.0, 2.0]))
    assert ok.verdict == V.HOLDS_BY_CONSTRUCTION != V.REPRODUCED
    bad = V.judge_claim(claim(("m", ">=", 0.0), by_construction="PSD by the theorem"), metrics(m=[0.0, -1e-3, 2.0]))
    assert bad.verdict == V.NOT_REPRODUCED and "1 of 3 replicates" in bad.reason


def test_nan_never_passes():
    r = V.judge_claim(claim(("m", ">", 0.2)), metrics(m=[0.3, float("nan"), 0.3]))
    assert r.verdict == V.INCONCLUSIVE and "1 of 3 replicates are NaN" in r.reason
    r = V.judge_claim(claim(("m", ">", 0.2)), metrics(m=[float("nan")] * 3))
    assert r.verdict == V.INCONCLUSIVE and "all 3" in r.reason


def test_all_conditions_must_hold_and_any_failure_fails():
    mf = metrics(a=[1.0, 1.1, 0.9], b=[0.2, 0.22, 0.21], c=[-1.0, -1.1, -0.9])
    assert V.judge_claim(claim(("a", ">", 0), ("b", ">", 0)), mf).verdict == V.REPRODUCED
    assert V.judge_claim(claim(("a", ">", 0), ("b", ">", 0.2)), mf).verdict == V.INCONCLUSIVE
    assert V.judge_claim(claim(("a", ">", 0), ("b", ">", 0.2), ("c", ">", 0)), mf).verdict == V.NOT_REPRODUCED


def test_not_run_and_not_testable():
    assert V.judge_claim(claim(("m", ">", 0)), None).verdict == V.NOT_RUN
    r = V.judge_claim(claim(not_testable="needs a real robot arm"), metrics(m=[1, 1, 1]))
    assert r.verdict == V.NOT_TESTABLE and "robot" in r.reason


def test_missing_metric_names_paper_and_metric():
    pc = load_claims("lec")
    mf = MetricsFile("lec", "smoke", replicates=[0])
    with pytest.raises(MetricsError) as exc:
        V.judge_paper(pc, mf)
    assert "'lec'" in str(exc.value) and "lec_max_risk_minus_alpha@0.05" in str(exc.value)


def test_unimplemented_paper_is_not_run_never_passing():
    pc = PaperClaims("x", "X", "start", "setting", (claim(("m", ">", 0)),))
    assert [r.verdict for r in V.judge_paper(pc, None)] == [V.NOT_RUN]
