"""Each verdict, computed from a predicate over the CI of per-seed values, including the edge cases."""

import pytest

from icmlrepro.core import verdicts as V
from icmlrepro.core.claims import Claim, Condition, Gate, PaperClaims, load_claims
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
    gated = PaperClaims("x", "X", "start", "setting", (claim(("m", ">", 0)),),
                        gates=(Gate("g", "a sanity condition", (Condition("m", ">", 0.0),)),))
    assert [r.verdict for r in V.judge_paper(gated, None)] == [V.NOT_RUN]


# --- gates, power and multiplicity -------------------------------------------------------------------

from icmlrepro.core.claims import parse_claims  # noqa: E402
from icmlrepro.core.power import N_CAP, replicates_to_decide  # noqa: E402


def paper_with_gate(gate_conds, claim_gates=None, by_construction=None):
    gate = Gate("baseline_band", "the main baseline must work", tuple(Condition(*c) if isinstance(c, tuple)
                                                                      else c for c in gate_conds))
    cl = claim(("gain", ">", 0.0), by_construction=by_construction)
    if claim_gates is not None:
        import dataclasses
        cl = dataclasses.replace(cl, gates=tuple(claim_gates))
    return PaperClaims("p", "P", "start", "setting", (cl,), gates=(gate,))


def test_failed_gate_makes_the_claim_not_testable_and_names_it():
    pc = paper_with_gate([("base_acc", ">", 0.5)])
    mf = metrics(gain=[0.3, 0.31, 0.29], base_acc=[0.2, 0.21, 0.19])
    (r,) = V.judge_paper(pc, mf)
    assert r.verdict == V.NOT_TESTABLE and r.ungated == V.REPRODUCED
    assert r.reason.startswith("gate baseline_band failed: base_acc 0.2 [")
    assert r.conditions and r.conditions[0].state == "holds"  # still computed, shown greyed
    mf_ok = metrics(gain=[0.3, 0.31, 0.29], base_acc=[0.8, 0.81, 0.79])
    assert V.judge_paper(pc, mf_ok)[0].verdict == V.REPRODUCED


def test_undecided_gate_blocks_too():
    pc = paper_with_gate([("base_acc", ">", 0.5)])
    (r,) = V.judge_paper(pc, metrics(gain=[0.3, 0.31, 0.29], base_acc=[0.4, 0.6, 0.5]))
    assert r.verdict == V.NOT_TESTABLE and "gate baseline_band undecided" in r.reason


def test_an_undecided_gate_says_how_many_seeds_would_decide_it_and_a_decided_one_says_nothing():
    pc = paper_with_gate([("base_acc", ">", 0.5)])
    gate = pc.gates[0]
    undecided = V.judge_gate(gate, metrics(gain=[0.3, 0.31, 0.29], base_acc=[0.55, 0.45, 0.62, 0.58]))
    assert undecided.state == "undecided" and undecided.n_star_note.endswith("seeds (every condition would hold)")
    n = int(undecided.n_star_note.split()[1])
    assert n > 4 and n == replicates_to_decide(0.05, float(__import__("numpy").std([0.55, 0.45, 0.62, 0.58], ddof=1)),
                                              0.95)
    assert V.judge_gate(gate, metrics(gain=[0.3, 0.31, 0.29], base_acc=[0.8, 0.81, 0.79])).n_star_note == ""


def test_planted_broken_baseline_trips_the_band_gate():
    """A baseline below its trivial reference (measured in the same run) lies outside 0.3-0.9 of the range."""
    band = Condition("acc.baseline", "between", (0.3, 0.9), floor="acc.trivial", ceiling=1.0)
    pc = paper_with_gate([band])
    working = metrics(gain=[0.3, 0.31, 0.29], **{"acc.baseline": [0.6, 0.62, 0.61], "acc.trivial": [0.2, 0.22, 0.2]})
    broken = metrics(gain=[0.3, 0.31, 0.29], **{"acc.baseline": [0.15, 0.14, 0.16], "acc.trivial": [0.2, 0.22, 0.2]})
    assert V.judge_paper(pc, working)[0].verdict == V.REPRODUCED
    (r,) = V.judge_paper(pc, broken)
    assert r.verdict == V.NOT_TESTABLE and "gate baseline_band failed" in r.reason
    assert r.blocked_by[0].conditions[0].summary.mean < 0


def test_gate_list_and_by_construction_default():
    pc = paper_with_gate([("base_acc", ">", 0.5)], claim_gates=[])
    assert V.judge_paper(pc, metrics(gain=[0.3, 0.31, 0.29], base_acc=[0.2] * 3))[0].verdict == V.REPRODUCED
    pc = paper_with_gate([("base_acc", ">", 0.5)], by_construction="a theorem of the operator")
    r = V.judge_paper(pc, metrics(gain=[0.3, 0.31, 0.29], base_acc=[0.2] * 3))[0]
    assert r.verdict == V.HOLDS_BY_CONSTRUCTION


def test_minus_condition_is_paired():
    c = Condition("acc.sft", ">", 0.0, minus="acc.base")
    mf = metrics(**{"acc.sft": [0.5, 0.7, 0.9], "acc.base": [0.4, 0.6, 0.8]})
    r = V.judge_claim(Claim("c", "a quote of ten chars", "quantitative", {"text": "t"}, "s", (c,)), mf)
    assert r.verdict == V.REPRODUCED and r.conditions[0].summary.mean == pytest.approx(0.1)


def test_schema_rejects_a_claim_naming_an_undefined_gate():
    import yaml
    from .conftest import ROOT
    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    raw["claims"] = raw["claims"][:1]
    raw["claims"][0].pop("gates", None)
    raw["gates"] = [{"id": "g", "why": "a sanity condition", "all_of": [{"metric": "m", "op": ">", "threshold": 0}]}]
    raw["claims"][0]["gates"] = ["nope"]
    from icmlrepro.core.claims import ClaimsError
    with pytest.raises(ClaimsError, match="nope"):
        parse_claims(raw, "lec.yaml")
    raw["claims"][0]["gates"] = ["g"]
    assert parse_claims(raw, "lec.yaml").gates_of(parse_claims(raw, "lec.yaml").claims[0])[0].id == "g"


def test_n_star_hand_case():
    """mean 1, sd 1, threshold 0: the smallest n whose 95% t-interval excludes 0 is 7
    (t(5)/sqrt(6) = 1.050 > 1, t(6)/sqrt(7) = 0.925 < 1)."""
    assert replicates_to_decide(1.0, 1.0, 0.95) == 7
    assert replicates_to_decide(0.0, 1.0, 0.95) is None
    assert replicates_to_decide(1e-3, 1.0, 0.95) is None  # beyond the cap
    assert replicates_to_decide(1.0, 0.0, 0.95) == 2


def test_inconclusive_claim_reports_n_star_and_mean_on_threshold():
    # three replicates with mean 1 and sd 1: undecided at n = 3; n* = 7
    r = V.judge_claim(claim(("m", ">", 0.0)), metrics(m=[0.0, 1.0, 2.0]))
    assert r.verdict == V.INCONCLUSIVE and r.n_star == 7
    assert r.conditions[0].power.half_width == pytest.approx(2.4841, abs=1e-3)
    r = V.judge_claim(claim(("m", ">", 1.0)), metrics(m=[0.0, 1.0, 2.0]))
    assert r.verdict == V.INCONCLUSIVE and r.n_star is None and "mean sits on the threshold" in r.n_star_note
    assert V.judge_claim(claim(("m", ">", 0.0)), metrics(m=[1.0, 1.1, 0.9])).n_star is None  # decided


def test_failing_side_uses_the_bonferroni_level():
    """With k = 9 tests a condition fails only over its 1 - 0.05/9 interval."""
    conds = [(f"m{i}", ">", 0.0) for i in range(9)]
    vals = {f"m{i}": [1.0, 1.1, 0.9] for i in range(8)}
    vals["m8"] = [-0.3, -0.2, -0.4]  # fails over the 95% CI (hi -0.05), not over the 99.44% one
    r = V.judge_claim(claim(*conds), metrics(**vals))
    assert r.k == 9 and r.fail_level == pytest.approx(1 - 0.05 / 9)
    assert r.verdict == V.INCONCLUSIVE and "multiplicity-adjusted" in r.reason
    vals["m8"] = [-3.0, -3.1, -2.9]
    r = V.judge_claim(claim(*conds), metrics(**vals))
    assert r.verdict == V.NOT_REPRODUCED and "Bonferroni" in r.decided_by
    # one condition alone still fails at 95%
    assert V.judge_claim(claim(("m8", ">", 0.0)), metrics(m8=[-0.3, -0.2, -0.4])).verdict == V.NOT_REPRODUCED


def test_nine_conditions_on_their_thresholds_rarely_fail():
    """1,000 draws of a 9-condition claim, every condition centred on its threshold (3 seeds each):
    'not reproduced' in at most 5% of draws (at the per-condition 95% level it would be about 20%)."""
    import numpy as np
    rng = np.random.default_rng(0)
    conds = claim(*[(f"m{i}", ">", 0.0) for i in range(9)])
    fails = 0
    for _ in range(1000):
        mf = metrics(**{f"m{i}": rng.normal(0.0, 1.0, 3).tolist() for i in range(9)})
        fails += V.judge_claim(conds, mf).verdict == V.NOT_REPRODUCED
    assert fails <= 50, fails


def test_gate_reason_names_a_failing_condition_before_an_undecided_one():
    gate = Gate("g", "a sanity condition", (Condition("a", ">", 0.0), Condition("b", ">", 0.0)))
    r = V.judge_gate(gate, metrics(a=[-0.1, 0.1, 0.05], b=[-1.0, -1.1, -0.9]))
    assert r.state == "fails" and r.reason.startswith("gate g failed: b -1 [")


def test_gate_applies_only_at_its_scales():
    """A gate on a workload only some scales run (scales: [default]) is not judged, needs no metric and blocks
    nothing at smoke; at default it blocks as any gate."""
    gate = Gate("real_source", "the real-graph baseline must work", (Condition("acc.real", ">", 0.5),), ("default",))
    pc = PaperClaims("p", "P", "start", "setting", (claim(("gain", ">", 0.0)),), gates=(gate,))
    smoke = metrics(gain=[0.3, 0.31, 0.29])  # no acc.real at smoke
    assert pc.metrics_needed("smoke") == ["gain"] and V.judge_gates(pc, smoke) == {}
    assert V.judge_paper(pc, smoke)[0].verdict == V.REPRODUCED
    default = MetricsFile("p", "default", replicates=[0, 1, 2])
    default.add("gain", [0.3, 0.31, 0.29])
    default.add("acc.real", [0.2, 0.21, 0.19])
    assert V.judge_paper(pc, default)[0].verdict == V.NOT_TESTABLE
