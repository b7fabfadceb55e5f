"""Each verdict, computed from a predicate over the CI of per-seed values, including the edge cases."""

import pytest

from icmlrepro.core import verdicts as V
from icmlrepro.core.claims import Claim, Condition, PaperClaims, load_claims
from icmlrepro.core.metrics import MetricsError, MetricsFile


def claim(*conds, not_testable=None):
    return Claim("c", "a quote of ten chars", "quantitative", {"text": "t"}, "s",
                 tuple(Condition(*c) for c in conds), not_testable)


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


def test_one_seed_decides_on_the_point_and_shows_no_interval():
    mf = MetricsFile("p", "smoke", replicates=[0])
    mf.add("m", [0.3])
    r = V.judge_claim(claim(("m", ">", 0.2)), mf)
    assert r.verdict == V.REPRODUCED and r.conditions[0].summary.method == "single"


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
