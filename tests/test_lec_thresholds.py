"""LEC's threshold, its finite-sample condition, the baselines and routing, on hand-made and synthetic data."""

import itertools
import math

import numpy as np
import pytest

from icmlrepro.papers.lec import thresholds
from icmlrepro.papers.lec.data import ERROR_LAWS, synthetic_scores
from icmlrepro.papers.lec.data import exact_risk as law_risk
from icmlrepro.papers.lec.evaluate import largest_feasible
from icmlrepro.papers.lec.thresholds import (
    ABSTAIN,
    Calibration,
    lec_threshold,
    ltt_grid,
    ltt_threshold,
    naive_routing_thresholds,
    routing_thresholds,
    routing_thresholds_loop,
    sgr_threshold,
    ucb_threshold,
)


def slack(u, err, lam, alpha):
    acc = np.asarray(u) <= lam
    return float(np.sum(np.asarray(err)[acc]) - alpha * acc.sum())


def test_hand_computed_threshold():
    # sorted: errors at positions 3 and 6; alpha = 0.2, margin 1:
    # prefix sums of (err - 0.2): -.2 -.4 +.4 .2 0 .8 .6 .4 .2 0 -.2 -.4 -.6 -.8 -1.0 -1.2
    u = np.arange(16) / 16
    err = np.zeros(16)
    err[[2, 5]] = 1
    assert lec_threshold(u, err, 0.2, 1.0) == u[15]
    assert lec_threshold(u[:14], err[:14], 0.2, 1.0) == ABSTAIN  # best prefix sum is -0.8
    assert lec_threshold(u[:14], err[:14], 0.2, 0.8) == u[13]   # tight constant 1 - alpha


def test_largest_feasible_even_with_gaps():
    # feasible early (long run of correct answers), infeasible in the middle, feasible again at the end
    err = np.r_[np.zeros(10), np.ones(2), np.zeros(20)]
    u = np.linspace(0, 1, err.size)
    lam = lec_threshold(u, err, 0.1, 1.0)
    assert lam == u[-1]
    assert slack(u, err, u[11], 0.1) > -1  # the gap exists
    assert slack(u, err, lam, 0.1) <= -1


def test_ties_cut_only_at_group_ends():
    u = np.array([0.1] * 30 + [0.2] * 5)
    err = np.r_[np.zeros(29), 1, np.zeros(5)]
    lam = lec_threshold(u, err, 0.1, 1.0)  # whole group at 0.1: 1 - 3.0 = -2.0 feasible
    assert lam == 0.2
    u2 = np.array([0.1] * 12 + [0.2] * 5)
    err2 = np.r_[np.ones(2), np.zeros(10), np.zeros(5)]  # group 0.1: 2 - 1.2 > -1; with 0.2: 2 - 1.7 > -1
    assert lec_threshold(u2, err2, 0.1, 1.0) == ABSTAIN


@pytest.mark.parametrize("seed", range(20))
def test_returned_threshold_is_the_largest_feasible(seed):
    rng = np.random.default_rng(seed)
    u = np.round(rng.random(60), 2)  # ties
    err = (rng.random(60) < 0.3 * u).astype(float)
    alpha = 0.1
    lam = lec_threshold(u, err, alpha)
    feasible = [c for c in np.unique(u) if slack(u, err, c, alpha) <= -1 + 1e-12]
    assert lam == (max(feasible) if feasible else ABSTAIN)


def test_deterministic_implication_on_calibration_plus_test():
    """F_n(lam) <= -(1 - alpha) implies F_{n+1}(lam) <= 0 whatever the test point: the derivation's step."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        alpha = rng.choice([0.05, 0.1, 0.2])
        u, err = synthetic_scores(40, rng)
        lam = lec_threshold(u, err, alpha, 1 - alpha)
        if lam == ABSTAIN:
            continue
        for ut, et in ((0.0, 1.0), (0.0, 0.0), (1.0, 1.0)):
            assert slack(np.r_[u, ut], np.r_[err, et], lam, alpha) <= 1e-9


def exact_risk(n_cal, alpha, margin, draws, seed):
    """E[0.2 lam^3] / E[lam] for the synthetic law P(err | u) = 0.6 u^2, u ~ U(0, 1)."""
    rng = np.random.default_rng(seed)
    lams = np.array([min(max(lec_threshold(*synthetic_scores(n_cal, rng), alpha, margin), 0), 1)
                     for _ in range(draws)])
    return float(np.sum(0.2 * lams**3) / np.sum(lams))


@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_guarantee_holds_empirically_on_exchangeable_data(alpha):
    """Mean risk among accepted stays <= alpha over many calibration draws (n = 500, i.i.d. scores)."""
    assert exact_risk(500, alpha, 1.0, 3000, seed=11) <= alpha


def test_small_calibration_sets_break_the_bound():
    """A measured finding, not a wish: with n = 30 and alpha = 0.05 the exact risk is about 0.10.

    The condition needs >= 20 error-free calibration points before it accepts anything; when that
    happens by luck the threshold lands high, where the true risk is well above alpha.
    """
    assert exact_risk(30, 0.05, 1.0, 4000, seed=5) > 0.08


def brute_force_population_risk(errors_sorted, alpha, margin):
    """Risk among accepted when the test point is drawn uniformly from a fixed finite population."""
    n1 = len(errors_sorted)
    z = s = 0.0
    for j in range(n1):
        cal_err = np.delete(errors_sorted, j)
        cal_u = np.delete(np.arange(n1, dtype=float), j)
        lam = lec_threshold(cal_u, cal_err, alpha, margin)
        if j <= lam:
            s += 1
            z += errors_sorted[j]
    return z / s if s else math.nan


@pytest.mark.parametrize("margin", [1.0, 2.0])
def test_not_distribution_free_for_every_exchangeable_law(margin):
    """One error at the lowest score followed by n correct answers, with margin/alpha <= n < (1+margin)/alpha:
    only the error is ever accepted (risk 1), for any constant margin."""
    alpha = 0.2
    n = math.ceil(margin / alpha)
    population = np.r_[1.0, np.zeros(n)]
    assert brute_force_population_risk(population, alpha, margin) == 1.0


def test_exhaustive_small_populations_show_the_pattern():
    worst = max(brute_force_population_risk(np.array(e, float), 0.2, 1.0) or 0
                for e in itertools.product([0, 1], repeat=7)
                if not math.isnan(brute_force_population_risk(np.array(e, float), 0.2, 1.0)))
    assert worst > 0.2


def test_baseline_infeasible_where_lec_is_feasible():
    """With 100 calibration points and 2 errors, Hoeffding's bound cannot reach alpha = 0.05; LEC can."""
    u = np.linspace(0, 1, 100)
    err = np.zeros(100)
    err[[60, 90]] = 1
    assert lec_threshold(u, err, 0.05) > 0.5
    assert ucb_threshold(u, err, 0.05, 0.1, "hoeffding") == ABSTAIN
    for lam in (ucb_threshold(u, err, 0.05, 0.1, "clopper_pearson"), sgr_threshold(u, err, 0.05, 0.1),
                ltt_threshold(u, err, 0.05, 0.1)):
        assert lam <= lec_threshold(u, err, 0.05)


def test_high_probability_baselines_respect_their_bounds():
    rng = np.random.default_rng(0)
    u, err = synthetic_scores(400, rng)
    cal = Calibration(u, err)
    for lam in (cal.ucb(0.1, 0.1, "clopper_pearson"), cal.sgr(0.1, 0.1), cal.ltt(0.1, 0.1, ltt_grid(50))):
        acc = u <= lam
        assert acc.sum() > 0 and err[acc].mean() <= 0.1


def test_joint_routing_satisfies_the_joint_constraint_and_beats_primary():
    rng = np.random.default_rng(4)
    ua, ea = synthetic_scores(400, rng)
    ea = np.maximum(ea, (rng.random(400) < 0.15)).astype(float)  # a weaker primary
    ub, eb = synthetic_scores(400, rng)
    alpha = 0.1
    la, lb = routing_thresholds(ua, ea, ub, eb, alpha, 1.0, grid=41)
    acc_a = ua <= la
    acc_b = ~acc_a & (ub <= lb)
    z = ea[acc_a].sum() + eb[acc_b].sum()
    assert z - alpha * (acc_a.sum() + acc_b.sum()) <= -1 + 1e-9
    for u, e in ((ua, ea), (ub, eb)):  # never fewer answers than either model alone
        assert acc_a.sum() + acc_b.sum() >= (u <= lec_threshold(u, e, alpha)).sum()


def test_joint_routing_searches_all_candidates_at_once_as_the_loop_does():
    """The vectorised search and the one-candidate-at-a-time loop give the same pair, ties in both
    models' scores, empty and tiny calibration sets and margins 0 / 1 included."""
    rng = np.random.default_rng(7)
    for _ in range(400):
        n = int(rng.integers(0, 50))
        ua, ub = (np.round(rng.random(n), int(rng.integers(1, 3))) for _ in range(2))
        ea, eb = ((rng.random(n) < u * rng.random()).astype(float) for u in (ua, ub))
        alpha, margin, grid = float(rng.choice([0.05, 0.2, 0.5])), float(rng.choice([0.0, 1.0])), int(rng.integers(2, 42))
        assert routing_thresholds(ua, ea, ub, eb, alpha, margin, grid) == \
            routing_thresholds_loop(ua, ea, ub, eb, alpha, margin, grid)


def test_lec_at_many_levels_equals_lec_at_each():
    rng = np.random.default_rng(8)
    for n in (0, 1, 30, 300):
        cal = Calibration(*synthetic_scores(n, rng, "linear"))
        alphas, margins = [0.05, 0.1, 0.3, 0.9], [1.0, 0.0, 0.7, 1.0]
        assert list(cal.lec_many(alphas, margins)) == [cal.lec(a, m) for a, m in zip(alphas, margins)]


def test_naive_routing_can_violate_the_system_level():
    """The secondary model sees only inputs the primary rejected, where it errs more; per-model
    calibration ignores that and the system's risk exceeds alpha on the calibration data itself."""
    rng = np.random.default_rng(1)
    n = 2000
    hard = rng.random(n) < 0.5
    ua = np.where(hard, 0.9, 0.1) + 0.01 * rng.random(n)
    ea = (rng.random(n) < np.where(hard, 0.5, 0.0)).astype(float)
    ub = 0.5 * rng.random(n)
    eb = (rng.random(n) < np.where(hard, 0.25, 0.0)).astype(float)  # low error overall, high on hard inputs
    alpha = 0.15
    la, lb = naive_routing_thresholds(ua, ea, ub, eb, alpha)
    acc_a = ua <= la
    acc_b = ~acc_a & (ub <= lb)
    risk = (ea[acc_a].sum() + eb[acc_b].sum()) / (acc_a.sum() + acc_b.sum())
    assert risk > alpha
    ja, jb = routing_thresholds(ua, ea, ub, eb, alpha)
    acc_a, acc_b = ua <= ja, ~(ua <= ja) & (ub <= jb)
    assert (ea[acc_a].sum() + eb[acc_b].sum()) / (acc_a.sum() + acc_b.sum()) <= alpha


class CountingBounds(np.ndarray):
    """An array that counts element reads: the number of tests SGR's search makes."""
    reads = 0

    def __getitem__(self, i):
        CountingBounds.reads += 1
        return super().__getitem__(i)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 7, 8, 16, 31, 32, 33])
def test_sgr_divisor_is_the_number_of_tests_it_can_make(monkeypatch, m):
    """Over every outcome of the search (the first j cuts pass), the most tests made equals the divisor."""
    seen_deltas, most = [], 0
    for j in range(m + 1):
        def fake_bounds(n_err, n_acc, delta, j=j):
            seen_deltas.append(delta)
            return np.where(np.arange(len(n_acc)) < j, 0.0, 1.0).view(CountingBounds)
        monkeypatch.setattr(thresholds, "clopper_pearson_ucb", fake_bounds)
        CountingBounds.reads = 0
        Calibration(np.arange(m, dtype=float), np.zeros(m)).sgr(0.5, 0.1)
        most = max(most, CountingBounds.reads)
    assert most == thresholds.sgr_tests(m)
    assert all(d == pytest.approx(0.1 / most) for d in seen_deltas)


def test_ltt_tests_a_grid_fixed_before_calibration():
    rng = np.random.default_rng(2)
    grid = set(ltt_grid(50).tolist())
    for _ in range(20):
        u, err = synthetic_scores(300, rng)
        lam = ltt_threshold(u, err, 0.1, 0.1, grid=50)
        assert lam == ABSTAIN or lam in grid
        assert lam not in set(u.tolist())  # never a calibration order statistic


@pytest.mark.parametrize("law", sorted(ERROR_LAWS))
def test_exact_risk_matches_monte_carlo(law):
    rng = np.random.default_rng(7)
    u, err = synthetic_scores(400_000, rng, law)
    for lam in (0.3, 0.7, 1.0):
        acc = u <= lam
        assert err[acc].mean() == pytest.approx(law_risk([lam], law), abs=0.01)
    c, k = ERROR_LAWS[law]
    assert law_risk([1.0], law) == pytest.approx(c / (k + 1))


def test_some_law_exceeds_every_alpha_so_the_check_can_fail():
    worst = {law: law_risk([1.0], law) for law in ERROR_LAWS}
    assert max(worst.values()) > 0.3 and min(worst.values()) < 0.3


def test_exhaustive_search_agrees_with_lec():
    rng = np.random.default_rng(9)
    for _ in range(50):
        u = np.round(rng.random(80), 2)
        err = (rng.random(80) < 0.3 * u).astype(float)
        for alpha in (0.05, 0.1, 0.2):
            assert largest_feasible(u, err, alpha, 1.0) == lec_threshold(u, err, alpha, 1.0)


def test_routing_acceptance_fails_when_routing_only_matches_the_stronger_model_or_exceeds_alpha():
    """Beating the weak primary alone is not enough: routing must add retention over LEC on the secondary model
    alone (the system without routing) and keep its risk within alpha."""
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.claims import load_claims
    from icmlrepro.core.metrics import MetricsFile

    claim = {c.id: c for c in load_claims("lec").claims}["routing_acceptance"]

    def planted(vs_secondary, risk):
        mf = MetricsFile("lec", "default", replicates=list(range(6)))
        j = [0.001 * k for k in range(6)]
        for a in ("@0.05", "@0.1"):
            mf.add(f"routing_retention_gain_vs_primary{a}", [0.5 + x for x in j])
            mf.add(f"routing_retention_gain_vs_secondary{a}", [vs_secondary + x for x in j])
            mf.add(f"risk_minus_alpha.routing_joint{a}", [risk - x for x in j])
        return V.judge_claim(claim, mf).verdict

    assert planted(0.05, -0.01) == V.REPRODUCED
    assert planted(-0.05, -0.01) == V.NOT_REPRODUCED  # routing = answering with the better model
    assert planted(0.05, 0.01) == V.NOT_REPRODUCED  # retention bought by exceeding alpha


def test_retention_is_compared_only_where_both_methods_kept_their_level():
    """A cell where either method's pooled risk exceeds alpha drops out of the retention comparison: LEC gains
    nothing over a baseline by accepting more than its level allows."""
    import pandas as pd

    from icmlrepro.papers.lec.evaluate import within_level

    def row(retention, risk):
        return pd.Series({"retention": retention, "risk": risk})

    assert within_level(row(0.8, 0.04), 0.05)
    assert within_level(row(0.8, 0.05), 0.05)  # at the level is within it
    assert not within_level(row(0.9, 0.074), 0.05)
    assert within_level(row(0.0, float("nan")), 0.05)  # nothing accepted: no risk


def test_retention_gain_drops_the_cells_where_lec_broke_its_level():
    """Planted summary: LEC answers more than UCB-CLP in both cells of a seed, but in one it does so above alpha;
    the level-aware gain keeps only the other cell (where LEC answers less), so its sign flips."""
    import pandas as pd

    from icmlrepro.papers.lec.evaluate import retention_gains

    rows = [  # seed, alpha, system, method, retention, risk
        (0, 0.1, "mlp", "lec", 0.60, 0.09), (0, 0.1, "mlp", "ucb_clp", 0.65, 0.08),
        (0, 0.1, "gnb", "lec", 0.90, 0.13), (0, 0.1, "gnb", "ucb_clp", 0.40, 0.09),
    ]
    s = pd.DataFrame(rows, columns=["seed", "alpha", "system", "method", "retention", "risk"])
    s = s.set_index(["seed", "alpha", "system", "method"]).sort_index()
    raw, level = retention_gains(s, [0], [0.1], ["mlp", "gnb"], "ucb_clp")
    assert raw[0] == pytest.approx((-0.05 + 0.50) / 2)
    assert level[0] == pytest.approx(-0.05)
