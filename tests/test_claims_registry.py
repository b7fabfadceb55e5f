"""The claims registry covers all 19 papers, follows its schema and quotes the abstracts exactly."""

import pytest
import yaml

from icmlrepro.core.claims import ClaimsError, all_papers, load_all_claims, parse_claims

from .conftest import ROOT

ABSTRACTS = (ROOT / "resources" / "abstracts" / "icml2026_seed_abstracts.txt").read_text()
PARAGRAPHS = [p for p in ABSTRACTS.split("\n\n") if len(p) > 200]


def test_one_claims_file_per_abstract():
    assert len(PARAGRAPHS) == 19
    papers = all_papers()
    assert len(papers) == 19, papers


@pytest.mark.parametrize("paper", all_papers())
def test_claims_file_valid_and_quotes_exact(paper):
    pc = load_all_claims()[paper]
    own = [p for p in PARAGRAPHS if pc.abstract_start in p]
    assert len(own) == 1, f"{paper}: abstract_start must identify exactly one abstract"
    assert pc.claims, paper
    ids = [c.id for c in pc.claims]
    assert len(ids) == len(set(ids)), f"{paper}: duplicate claim ids"
    for c in pc.claims:
        assert c.quote in own[0], f"{paper}.{c.id}: quote is not verbatim from its abstract"
        assert bool(c.conditions) != bool(c.not_testable), f"{paper}.{c.id}: predicate xor not_testable"


def test_each_abstract_has_a_claims_file():
    starts = [pc.abstract_start for pc in load_all_claims().values()]
    for para in PARAGRAPHS:
        assert sum(s in para for s in starts) == 1, para[:80]


def test_schema_rejects_claim_without_predicate():
    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    del raw["claims"][0]["predicate"]
    with pytest.raises(ClaimsError, match="claims/0"):
        parse_claims(raw, "lec.yaml")


def test_claims_yaml_error_names_file_line_and_column(tmp_path):
    """A syntax error or a key given twice names the claims file, line and column (not "<unicode string>")."""
    from icmlrepro.core.claims import load_claims

    text = (ROOT / "resources" / "claims" / "lec.yaml").read_text()
    (tmp_path / "lec.yaml").write_text(text.replace("paper: lec", "paper: lec\ntitle: [unclosed", 1))
    with pytest.raises(ClaimsError, match=rf"{tmp_path / 'lec.yaml'}:\d+:\d+: not valid YAML"):
        load_claims("lec", tmp_path)
    (tmp_path / "lec.yaml").write_text(text.replace("paper: lec", "paper: lec\npaper: lec", 1))
    with pytest.raises(ClaimsError, match="duplicate key 'paper'"):
        load_claims("lec", tmp_path)


def test_schema_rejects_unknown_operator():
    raw = yaml.safe_load((ROOT / "resources" / "claims" / "lec.yaml").read_text())
    raw["claims"][0]["predicate"]["all_of"][0]["op"] = "=="
    with pytest.raises(ClaimsError):
        parse_claims(raw, "lec.yaml")


def implemented_papers() -> list[str]:
    """Papers whose chains run (config `papers`): their testable claims must say how they can fail."""
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["papers"]


def substitute_controls(claim, metrics):
    """A copy of ``metrics`` in which each controlled metric takes its control's per-replicate values."""
    from icmlrepro.core.metrics import Metric, MetricsFile

    out = MetricsFile(metrics.paper, metrics.scale, metrics.replicate, list(metrics.replicates), dict(metrics.metrics))
    for c in claim.conditions:
        if c.control:
            ctrl = metrics.metrics[c.control]
            out.metrics[c.metric] = Metric(list(ctrl.values), ctrl.unit, ctrl.direction, ctrl.timing)
    return out


@pytest.mark.parametrize("paper", implemented_papers())
def test_each_testable_claim_has_a_control_or_says_why(paper):
    pc = load_all_claims()[paper]
    missing = [c.id for c in pc.claims
               if c.conditions and not (c.controls or c.no_control or c.by_construction)]
    assert not missing, f"{paper}: claims without a control, a no_control reason or by_construction: {missing}"


def test_list_claims_without_a_control(capsys):
    """Lists (pytest -s) the claims that name no control, with their reasons, for review."""
    rows = [(p, c.id, c.no_control) for p in implemented_papers() for c in load_all_claims()[p].claims
            if c.no_control]
    with capsys.disabled():
        print(f"\n{len(rows)} claims without a control:")
        for p, cid, why in rows:
            print(f"  {p}.{cid}: {why}")
    assert all(len(why) >= 10 for _, _, why in rows)


def passing_values(c, shift: float = 0.0) -> list[float]:
    """Three replicates that satisfy condition ``c`` with room to spare (``shift`` moves them toward
    the threshold, i.e. to a worse arm)."""
    step = 1.0 if c.op in (">", ">=") else -1.0
    return [c.threshold + step * (1 + 0.01 * i - shift) for i in range(3)]


@pytest.mark.parametrize("paper", all_papers())
def test_control_substituted_for_the_metric_is_not_reproduced(paper):
    """With a control that does worse the claim can be reproduced; with the control's own values in the
    metric's place (an arm that does exactly as well without the cause) it must not be."""
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.metrics import MetricsFile

    for claim in load_all_claims()[paper].claims:
        if not claim.controls:
            continue
        mf = MetricsFile(paper, "smoke", replicates=[0, 1, 2])
        for c in claim.conditions:
            if c.metric not in mf.metrics:
                mf.add(c.metric, passing_values(c) if c.op != "between" else [sum(c.threshold) / 2] * 3)
        for c in claim.conditions:
            if c.control and c.control not in mf.metrics:
                mf.add(c.control, passing_values(c, shift=0.5))  # clears the threshold, but worse
        assert V.judge_claim(claim, mf).verdict == V.REPRODUCED, (paper, claim.id)
        assert V.judge_claim(claim, substitute_controls(claim, mf)).verdict != V.REPRODUCED, (paper, claim.id)


@pytest.mark.parametrize("paper", all_papers())
def test_each_controlled_condition_alone_must_beat_its_control(paper):
    """Condition by condition: values past the threshold reproduce only while they beat the control; the
    control's own values in the metric's place, or a tie with the control, do not."""
    import dataclasses

    from icmlrepro.core import verdicts as V
    from icmlrepro.core.metrics import MetricsFile

    def metrics(cond, metric, control):
        mf = MetricsFile(paper, "smoke", replicates=[0, 1, 2])
        mf.add(cond.metric, [metric + d for d in (0.0, 0.01, -0.01)])
        mf.add(cond.control, [control + d for d in (0.0, 0.02, -0.01)])
        return mf

    for claim in load_all_claims()[paper].claims:
        for cond in (c for c in claim.conditions if c.control):
            single = dataclasses.replace(claim, conditions=(cond,))
            sign = 1.0 if cond.op in (">", ">=") else -1.0
            passing = metrics(cond, cond.threshold + 0.3 * sign, cond.threshold + 0.1 * sign)
            assert V.judge_claim(single, passing).verdict == V.REPRODUCED, (claim.id, cond.metric)
            assert V.judge_claim(single, substitute_controls(single, passing)).verdict != V.REPRODUCED
            tie = metrics(cond, cond.threshold + 0.3 * sign, cond.threshold + 0.3 * sign)
            assert V.judge_claim(single, tie).verdict != V.REPRODUCED, (claim.id, cond.metric)


@pytest.mark.parametrize("paper", all_papers())
def test_claimed_numbers_name_their_source(paper):
    """A stated number from the abstract appears in the claim's quote (as written or as a percentage);
    any other number names its source."""
    import re

    for c in load_all_claims()[paper].claims:
        value = c.claimed.get("value")
        if value is None or c.claimed_source != "abstract":
            continue
        words = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10}
        scale = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9}
        numbers = {float(x) * scale[s.lower()] for x, s in
                   re.findall(r"(\d+(?:\.\d+)?)([KkMmBb]?)\b", c.quote.replace(",", ""))}
        numbers |= {float(v) for w, v in words.items() if re.search(rf"\b{w}\b", c.quote, re.I)}
        ok = any(abs(x - value) < 1e-9 or abs(x / 100 - value) < 1e-9 or abs(x - 100 * value) < 1e-6
                 for x in numbers)
        assert ok, f"{paper}.{c.id}: claimed value {value} is not in the quote; give claimed.source"


@pytest.mark.parametrize("paper", implemented_papers())
def test_each_paper_has_gates(paper):
    """Checklist 15: every implemented paper names calibration gates, each with a reason."""
    pc = load_all_claims()[paper]
    assert pc.gates, f"{paper}: no gates"
    assert all(len(g.why) >= 10 for g in pc.gates)


def planted_gate_metrics(cond, passing: bool):
    """Three replicates of the metrics one gate condition reads, placing its quantity inside (passing) or
    outside its threshold by 1 in the condition's own units (references: minus 0; a floor or ceiling that is a
    metric one unit from the other end)."""
    from icmlrepro.core.metrics import MetricsFile

    if cond.op == "between":
        q = sum(cond.threshold) / 2 if passing else cond.threshold[1] + 1.0
    else:
        up = cond.op in (">", ">=")
        q = cond.threshold + (1.0 if up == passing else -1.0)
    lo = cond.floor if isinstance(cond.floor, float) else None
    hi = cond.ceiling if isinstance(cond.ceiling, float) else None
    lo = lo if lo is not None else (hi - 1.0 if hi is not None else 0.0)  # a range of 1 (or -1 for errors)
    hi = hi if hi is not None else lo + 1.0
    mf = MetricsFile("p", "smoke", replicates=[0, 1, 2])
    refs = {cond.minus: 0.0, cond.floor: lo, cond.ceiling: hi}
    for name, v in refs.items():
        if isinstance(name, str):
            mf.add(name, [v] * 3)
    value = lo + q * (hi - lo) if cond.floor is not None else q
    mf.add(cond.metric, [value + d for d in (0.0, 0.01, -0.01)])
    if cond.control:
        mf.add(cond.control, [value - (1.0 if cond.op in (">", ">=") else -1.0)] * 3)
    return mf


@pytest.mark.parametrize("paper", implemented_papers())
def test_each_gate_condition_can_pass_and_fail_and_blocks_its_claims(paper):
    """Each gate condition of the real claims files, alone: planted values inside its threshold hold, values
    outside fail, and a claim relying on the failed gate reads `not testable at this scale`, naming it."""
    import dataclasses

    from icmlrepro.core import verdicts as V

    pc = load_all_claims()[paper]
    for gate in pc.gates:
        for cond in gate.conditions:
            single = dataclasses.replace(gate, conditions=(cond,))
            assert V.judge_gate(single, planted_gate_metrics(cond, True)).state == "holds", (gate.id, cond)
            failed = V.judge_gate(single, planted_gate_metrics(cond, False))
            assert failed.state == "fails", (gate.id, cond)
            for claim in (c for c in pc.claims if gate in pc.gates_of(c) and c.conditions):
                blocked = V.apply_gates(V.ClaimResult(claim, V.REPRODUCED, ungated=V.REPRODUCED), (failed,))
                assert blocked.verdict == V.NOT_TESTABLE and f"gate {gate.id} failed" in blocked.reason
                assert blocked.ungated == V.REPRODUCED
