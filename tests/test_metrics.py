"""Metrics contract round trip and the shared aggregation (mean and CI over replicates)."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from icmlrepro.core.metrics import MetricsError, MetricsFile, load_metrics, summarize


def test_round_trip_keeps_values_nan_and_inf(tmp_path):
    mf = MetricsFile("lec", "smoke", replicates=[0, 1, 2])
    mf.add("a", [1.0, float("nan"), 3.0], unit="s", direction="lower", timing=True)
    mf.add("b", [float("inf"), 0.5, -0.25], direction="higher")
    mf.write(tmp_path / "m.json")
    back = load_metrics(tmp_path / "m.json")
    assert back.replicates == [0, 1, 2]
    assert back.metrics["a"].timing and back.metrics["a"].unit == "s"
    assert math.isnan(back.metrics["a"].values[1]) and back.metrics["a"].values[2] == 3.0
    assert back.metrics["b"].values[0] == float("inf")


def test_a_metric_may_carry_its_own_replicates(tmp_path):
    """A cheap stage run at more seeds than its paper records its own replicates; the rest keep the file's."""
    mf = MetricsFile("collapsed_ops", "smoke", replicates=[0, 1])
    mf.add("a", [1.0, 2.0])
    mf.add("pe", [0.5, 0.6, 0.7], replicates=[0, 1, 2])
    mf.write(tmp_path / "m.json")
    raw = json.loads((tmp_path / "m.json").read_text())
    assert "replicates" not in raw["metrics"]["a"] and raw["metrics"]["pe"]["replicates"] == [0, 1, 2]
    back = load_metrics(tmp_path / "m.json")
    assert back.metrics["a"].replicates is None and back.metrics["pe"].replicates == [0, 1, 2]
    with pytest.raises(MetricsError, match="3 values for 2 replicates"):
        mf.add("bad", [1.0, 2.0, 3.0], replicates=[0, 1])


def test_identical_data_gives_identical_bytes(tmp_path):
    for name in ("x.json", "y.json"):
        mf = MetricsFile("lec", "smoke", replicates=[0, 1])
        mf.add("z", [0.1, 0.2])
        mf.add("a", [1 / 3, 2 / 3])
        mf.write(tmp_path / name)
    assert (tmp_path / "x.json").read_bytes() == (tmp_path / "y.json").read_bytes()


def test_duplicate_metric_rejected():
    mf = MetricsFile("lec", "smoke")
    mf.add("a", [1])
    with pytest.raises(MetricsError, match="twice"):
        mf.add("a", [2])


def test_missing_metric_names_paper_and_metric():
    mf = MetricsFile("lec", "smoke")
    with pytest.raises(MetricsError, match=r"paper 'lec': metric 'nope'"):
        mf.get("nope")


def test_contract_violation_names_file(tmp_path):
    (tmp_path / "m.json").write_text('{"contract": 1, "paper": "lec"}')
    with pytest.raises(MetricsError, match="m.json"):
        load_metrics(tmp_path / "m.json")


@pytest.mark.parametrize("raw", ["true", '"0.5"', "1e400", '"nan"', "[1]"])
def test_values_that_are_no_finite_number_are_refused_by_name(tmp_path, raw):
    """true, numeric strings and 1e400 (which JSON reads as infinity, passing any ">" condition) are refused,
    naming the metric and position; null (NaN) and "inf"/"-inf" as write_json writes them are read."""
    text = ('{"contract": 1, "paper": "lec", "scale": "smoke", "metrics": {"acc": {"values": [0.5, %s]}}}' % raw)
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(MetricsError, match=r"metric 'acc': value 1 is .* not a number"):
        load_metrics(tmp_path / "m.json")
    ok = '{"contract": 1, "paper": "lec", "scale": "smoke", "metrics": {"acc": {"values": [0.5, null, "inf", 2]}}}'
    (tmp_path / "ok.json").write_text(ok)
    assert load_metrics(tmp_path / "ok.json").get("acc").values[2] == math.inf


def test_t_interval_matches_scipy():
    x = [0.1, 0.4, 0.35, 0.2, 0.3]
    s = summarize(x, level=0.9)
    lo, hi = stats.t.interval(0.9, df=4, loc=np.mean(x), scale=stats.sem(x))
    assert s.method == "t" and s.n == 5
    assert s.lo == pytest.approx(lo) and s.hi == pytest.approx(hi)


def test_bootstrap_is_deterministic_and_brackets_mean():
    x = np.random.default_rng(0).normal(size=12)
    a, b = summarize(x, method="bootstrap"), summarize(x, method="bootstrap")
    assert a == b and a.lo < a.mean < a.hi


def test_single_value_zero_width_flagged():
    s = summarize([0.3])
    assert (s.lo, s.mean, s.hi, s.n, s.method) == (0.3, 0.3, 0.3, 1, "single")


def test_zero_variance_zero_width():
    s = summarize([0.2, 0.2, 0.2])
    assert s.lo == s.hi == pytest.approx(0.2) and s.n == 3


def test_nan_counted_and_all_nan():
    s = summarize([1.0, float("nan"), 3.0])
    assert s.n == 2 and s.n_nan == 1 and s.mean == 2.0
    e = summarize([float("nan")] * 3)
    assert e.n == 0 and e.n_nan == 3 and math.isnan(e.mean)


def test_unknown_ci_method():
    with pytest.raises(ValueError, match="bootstrap"):
        summarize([1, 2, 3], method="bayes")


@pytest.mark.parametrize("bad", ["abc", {"mean": 0.5}, [0.1]])
def test_non_numeric_value_names_file_metric_and_fix(tmp_path, bad):
    """A value that is no number (it used to give a bare ValueError/TypeError) names the file, the
    metric, the value's position and the command that rebuilds the file."""
    from icmlrepro.core.io import rebuild_command

    path = tmp_path / "metrics.json"
    mf = MetricsFile("lec", "smoke", replicates=[0, 1])
    mf.add("risk", [0.1, 0.2])
    mf.write(path)
    raw = path.read_text().replace("0.2", json.dumps(bad), 1)
    path.write_text(raw)
    with pytest.raises(MetricsError) as exc:
        load_metrics(path)
    msg = str(exc.value)
    assert str(path) in msg and "metric 'risk'" in msg and "value 1" in msg
    assert rebuild_command(path) in msg
