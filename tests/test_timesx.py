"""TimesX: the context pipeline never reads the window, the scores follow their definitions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from icmlrepro.papers.timesx import benchmark, context, neural, scoring, statistical
from icmlrepro.papers.timesx.evaluate import ENSEMBLE, ENSEMBLE_MEMBERS, with_ensembles
from icmlrepro.papers.timesx.windows import rolling_origins

SETTINGS = {"max_series": 10, "n_windows": 2, "min_history": 24, "max_events": 3, "event_threshold": 3.5,
            "max_covariates": 2}


@pytest.fixture(scope="module")
def real():
    return benchmark.real_benchmark(SETTINGS)


def _window_starts(windows: pd.DataFrame, ctx: pd.DataFrame) -> pd.Series:
    start = windows.set_index(["series", "window"])["window_start"]
    return start.loc[list(zip(ctx["series"], ctx["window"]))].reset_index(drop=True)


def test_real_context_never_postdates_its_window(real):
    _, docs, windows, ctx = real
    assert set(ctx["kind"]) == set(context.KINDS)  # all four context types are generated
    assert not context.leaking(ctx, _window_starts(windows, ctx)).any()
    assert (pd.to_datetime(ctx["issued_at"]).to_numpy() < _window_starts(windows, ctx).to_numpy()).all()


def test_context_is_unchanged_when_the_future_changes(real):
    """The generators see only the history: rewriting every value from the window start on (the
    target and the related variables) leaves every item of the window identical."""
    obs, docs, windows, _ = real
    rng = np.random.default_rng(0)
    for w in windows.itertuples(index=False):
        doc = docs.set_index("series").loc[w.series].to_dict() | {"series": w.series}
        peers = docs[(docs["dataset"] == doc["dataset"]) & (docs["series"] != w.series)]
        series = {s: g.sort_values("t") for s, g in obs.groupby("series")}
        v, t = series[w.series]["value"].to_numpy(), pd.DatetimeIndex(series[w.series]["t"])
        related = {r.variable: (series[r.series]["value"].to_numpy(), r.variable_note) for r in peers.itertuples()}
        before = context.window_context(doc, v, t, w.origin, w.horizon, related, SETTINGS)
        v2 = v.copy()
        v2[w.origin:] += 1e3 * rng.standard_normal(v.size - w.origin)
        rel2 = {k: (np.concatenate([x[:w.origin], -x[w.origin:] * 50]), n) for k, (x, n) in related.items()}
        assert context.window_context(doc, v2, t, w.origin, w.horizon, rel2, SETTINGS) == before


def test_leak_audit_catches_constructed_leaks():
    start = pd.Timestamp("2000-01-01")
    items = pd.DataFrame([
        {"kind": "event", "issued_at": pd.Timestamp("1999-10-01"), "text": "1999Q4: sharp rise."},  # fine
        {"kind": "event", "issued_at": start, "text": "2000Q1: sharp rise."},  # issued at the start
        {"kind": "covariate", "issued_at": pd.Timestamp("1999-10-01"), "text": "X (chained 2005 US$)"},  # later year
        {"kind": "calendar", "issued_at": pd.Timestamp("1999-10-01"), "text": "Horizon 2000Q1 to 2001Q4."},  # known ahead
        {"kind": "metadata", "issued_at": pd.Timestamp("1950-01-01"), "text": "Data for 1959 - 2009."},
    ])
    flagged = context.leaking(items, pd.Series([start] * len(items)))
    assert flagged.tolist() == [False, True, True, False, True]


def test_event_detector_would_leak_if_given_the_window():
    """A jump inside the window: detected (and flagged by the audit) only if the window is passed in."""
    t = pd.period_range("1990Q1", periods=60, freq="Q").to_timestamp()
    rng = np.random.default_rng(1)
    v = np.cumsum(rng.normal(0, 1, 60))
    v[52:] += 40.0
    doc = {"title": "T", "description": "D", "variable": "x", "variable_note": "n", "domain": "d", "freq": "Q",
           "season": 4}
    leaky = pd.DataFrame(context.event_items(v, t, "Q", 4, "x", 3, 3.5))
    assert context.leaking(leaky, pd.Series([t[52]] * len(leaky))).any()
    clean = pd.DataFrame(context.window_context(doc, v, t, 52, 8, {}, SETTINGS))
    assert not context.leaking(clean, pd.Series([t[52]] * len(clean))).any()


def test_date_bounded_drops_later_years():
    text = "US data for 1959Q1 - 2009Q3. Variable: GDP (chained 2005 US$, annual rate). Quarterly."
    assert context.date_bounded(text, 2001) == "Variable: GDP. Quarterly."
    assert context.date_bounded(text, 2009) == text


def test_rolling_windows_follow_the_history_and_never_overlap():
    for n, h, k, mh in [(100, 8, 4, 24), (55, 8, 4, 24), (40, 12, 3, 10), (30, 6, 10, 5)]:
        origins = rolling_origins(n, h, k, mh)
        assert origins and all(o >= mh for o in origins)
        assert origins[-1] + h == n  # the last window ends at the last observation
        for a, b in zip(origins, origins[1:]):
            assert b - a == h  # back to back: no overlap, no gap
        assert len(origins) == min(k, (n - mh) // h)


def test_windows_split_history_and_target(real):
    for w in benchmark.windows_of(real):
        assert w.future_t[0] > pd.Timestamp(0) and w.future.size == len(w.future_t)
    obs, _, windows, _ = real
    for w in windows.itertuples(index=False):
        t = obs[obs["series"] == w.series].sort_values("t")["t"].to_numpy()
        assert t[w.origin] == np.datetime64(w.window_start)


def test_seasonal_naive_repeats_the_last_season():
    h = np.arange(10.0)
    assert statistical.seasonal_naive(h, 6, 4).tolist() == [6, 7, 8, 9, 6, 7]
    assert statistical.seasonal_naive(h, 3, 1).tolist() == [9, 9, 9]


def test_mase_hand_computed_and_snaive_is_exactly_one():
    hist = np.array([1.0, 3.0, 2.0, 6.0])  # in-sample naive MAE = (2 + 1 + 4) / 3
    assert scoring.mase([2.0, 4.0], [1.0, 1.0], hist, 1) == pytest.approx(2.0 / (7 / 3))
    rng = np.random.default_rng(0)
    errors = pd.DataFrame([{"series": f"s{i}", "window": k, "method": m, "mase": rng.uniform(0.1, 3)}
                           for i in range(5) for k in range(3) for m in ("snaive", "a", "b")])
    scaled = scoring.scaled_mase(errors)
    assert (scaled["snaive"] == 1.0).all()
    s0 = errors[errors["series"] == "s0"]
    expect = s0[s0["method"] == "a"]["mase"].mean() / s0[s0["method"] == "snaive"]["mase"].mean()
    assert scaled.loc["s0", "a"] == pytest.approx(expect)


def test_geometric_mean_average_rank_and_tau_hand_computed():
    assert scoring.geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    assert scoring.geometric_mean([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    table = pd.DataFrame({"a": [1.0, 2.0, 0.5], "b": [2.0, 1.0, 0.5], "c": [3.0, 3.0, 3.0]})
    ranks = scoring.average_rank(table)
    assert ranks.to_dict() == pytest.approx({"a": (1 + 2 + 1.5) / 3, "b": (2 + 1 + 1.5) / 3, "c": 3.0})
    a = pd.Series({"x": 1.0, "y": 2.0, "z": 3.0})
    assert scoring.kendall_tau(a, a) == pytest.approx(1.0)
    assert scoring.kendall_tau(a, -a) == pytest.approx(-1.0)


def test_average_ensemble_is_the_mean_of_its_members():
    rows = [{"series": "s", "window": 0, "method": m, "step": k, "yhat": v * (k + 1)}
            for m, v in (("foundation", 1.0), ("textnet", 3.0), ("ets", 5.0)) for k in range(3)]
    out = with_ensembles(pd.DataFrame(rows))
    ens = out[out["method"] == ENSEMBLE].sort_values("step")["yhat"].to_numpy()
    assert set(ENSEMBLE_MEMBERS) == {"foundation", "textnet"}
    assert ens.tolist() == pytest.approx([2.0, 4.0, 6.0])


def test_revision_trains_the_text_head_only_and_text_reaches_the_forecast():
    rng = np.random.default_rng(0)
    hists = [rng.normal(10, 1, 40) for _ in range(16)]
    texts = ["raise the level by 40 percent"] * 8 + ["steady"] * 8
    vec = neural.text_vectorizer(texts, 32)
    data = neural.Batch(hists, ["M"] * 16, texts, vec, 36, [h[:12] for h in hists])
    models = neural.build_models(36, data.t.shape[1], 8)
    base = [p.clone() for p in models["foundation"].parameters()]
    neural.fit(models["textrev"], data, 2, 8, 1e-2, 0)
    assert all(torch.equal(a, b) for a, b in zip(base, models["foundation"].parameters()))
    with torch.no_grad():  # different texts give different text-aware forecasts on the same history
        same = neural.Batch([hists[0]] * 2, ["M"] * 2, texts[7:9], vec, 36)
        out = models["textrev"](same)
    assert not torch.allclose(out[0], out[1])


def test_untrained_foundation_starts_from_seasonal_naive():
    h = np.tile([1.0, 5.0, 2.0, 8.0], 10)
    vec = neural.text_vectorizer(["a b"], 4)
    b = neural.Batch([h], ["Q"], [""], vec, 36)
    model = neural.HistoryNet(36, 8)
    for p in model.net[-1].parameters():
        torch.nn.init.zeros_(p)
    with torch.no_grad():
        f = b.to_values(model(b))[0]
    assert f == pytest.approx(statistical.seasonal_naive(h, 8, 4))


# --- the smoke chain through Snakemake ------------------------------------------------------------
from .conftest import check_smoke_paper  # noqa: E402


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "timesx", ("mase_by_method.png", "rank_transfer.png",
                                                      "example_forecast.png"))
    assert metrics.get("real.mase.snaive").values == [1.0] * len(metrics.replicates)
    assert metrics.get("context_items_after_forecast_start").values == [0.0] * len(metrics.replicates)
