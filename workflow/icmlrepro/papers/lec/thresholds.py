"""Acceptance thresholds: LEC and the baselines it is compared with.

Every method takes calibration uncertainty scores ``u`` (lower = more confident) and error
indicators ``err`` (1 = the prediction is wrong) and returns a threshold ``lam``: a test
prediction is accepted when its uncertainty is ``<= lam``. ``-inf`` means abstain on everything.

Guarantee types differ, and the report says so: LEC bounds the selection-conditioned risk
P(err = 1 | accepted) in expectation over calibration draws; UCB, SGR and Learn-then-Test bound
it with probability at least 1 - delta over the calibration draw.

Derivation of LEC's finite-sample condition (our own, see tests/test_lec_thresholds.py).
Let S(lam) = 1{u <= lam}, Z(lam) = S(lam) * err. For the risk among accepted,
P(err=1 | S=1) = E[Z] / E[S] <= alpha  <=>  E[Z - alpha S] <= 0 (when E[S] > 0).
Write F_n(lam) = sum_{i<=n} (Z_i - alpha S_i) over the calibration set. One more point changes
F by at most (1 - alpha), so F_n(lam) <= -(1 - alpha) implies F_{n+1}(lam) <= 0 on calibration
plus test: the constraint holds on the enlarged sample whatever the test point is. The paper's
note uses the constant 1 instead of 1 - alpha; 1 >= 1 - alpha, so it is the (slightly) more
conservative of the two and is our default (``margin``). The per-point term is not monotone in
lam (an accepted correct answer lowers F, an accepted error raises it), so the feasible set
{lam : F_n(lam) <= -margin} can have gaps; LEC takes its largest element, which maximises
retention among feasible thresholds. Because lam-hat depends on the calibration set only (it is
not a symmetric function of calibration plus test), the implication above does not by itself
give a distribution-free bound: the tests exhibit a finite exchangeable population on which the
largest-feasible rule is violated for any constant. Measured on i.i.d. scores u ~ U(0, 1) with
P(err | u) = c u^k (``data.ERROR_LAWS``; exact risk over 2,000 calibration draws, margin 1, seed 0,
``evaluate.synthetic_check``), the risk among accepted minus alpha depends on the law and on n:
- quadratic 0.6 u^2 (worst case 0.2): n = 30: +0.050 at alpha 0.05, <= 0 from 0.1; n = 100: +0.001
  at 0.05; n = 300: <= 0 at every alpha in 0.05..0.3;
- linear 0.9 u (worst case 0.45): n = 30: +0.25 / +0.08 / +0.02 at alpha 0.05 / 0.1 / 0.2; n = 300:
  +0.017 / +0.005 / -0.001 -- the excess shrinks with n but stays above 0 at small alpha;
- flat 0.4 (worst case 0.4 at every threshold): whenever LEC accepts anything the risk is 0.4, so
  the excess is 0.4 - alpha (LEC accepts rarely: 0.4% of draws at n = 100, alpha = 0.15).
The margin lowers the excess against the plain constraint (margin 0) at small n but does not remove it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

ABSTAIN = -math.inf


class Calibration:
    """Calibration scores sorted once, with prefix counts at every valid cut.

    A threshold at a score accepts every calibration point with that score or lower, so only the
    last index of each group of equal scores is a valid cut. All methods below read these
    arrays, so one sort serves every method and every alpha.
    """

    def __init__(self, u, err, _sorted: bool = False):
        u = np.asarray(u, dtype=float)
        err = np.asarray(err, dtype=float)
        if _sorted:
            us, es = u, err
        else:
            order = np.argsort(u, kind="stable")
            us, es = u[order], err[order]
        last = np.r_[us[1:] != us[:-1], True] if len(us) else np.zeros(0, bool)
        self.n = len(us)
        self.cut = us[last]
        self.n_acc = np.arange(1, len(us) + 1)[last]
        self.n_err = np.cumsum(es)[last]
        self._cp: dict[float, np.ndarray] = {}

    @classmethod
    def presorted(cls, u, err) -> "Calibration":
        """Skip the sort when ``u`` is already ascending (the routing search's subsets)."""
        return cls(u, err, _sorted=True)

    def largest(self, ok) -> float:
        idx = np.nonzero(ok)[0]
        return float(self.cut[idx[-1]]) if idx.size else ABSTAIN

    def lec(self, alpha: float, margin: float = 1.0) -> float:
        return self.largest(self.n_err - alpha * self.n_acc <= -margin + 1e-12)

    def clopper_pearson(self, delta: float) -> np.ndarray:
        """Clopper-Pearson upper bounds at every cut, computed once per delta: they do not depend on alpha,
        and the beta quantile is most of the evaluation's cost when recomputed for each alpha."""
        if delta not in self._cp:
            self._cp[delta] = clopper_pearson_ucb(self.n_err, self.n_acc, delta)
        return self._cp[delta]

    def lec_many(self, alphas, margins) -> np.ndarray:
        """``lec`` at each (alpha, margin) pair at once (the same comparison, elementwise)."""
        alphas = np.asarray(alphas, dtype=float)[:, None]
        ok = self.n_err[None, :] - alphas * self.n_acc[None, :] <= -np.asarray(margins, dtype=float)[:, None] + 1e-12
        any_ok = ok.any(axis=1)
        last = ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1) if ok.shape[1] else np.zeros(len(ok), int)
        return np.where(any_ok, self.cut[last] if ok.shape[1] else ABSTAIN, ABSTAIN)

    def ucb(self, alpha: float, delta: float, bound: str = "hoeffding") -> float:
        if bound == "hoeffding":
            ucb = hoeffding_ucb(self.n_err, self.n_acc, delta)
        elif bound == "clopper_pearson":
            ucb = self.clopper_pearson(delta)
        else:
            raise ValueError(f"unknown bound {bound!r}")
        return self.largest(ucb <= alpha)

    def sgr(self, alpha: float, delta: float) -> float:
        m = len(self.cut)
        if m == 0:
            return ABSTAIN
        bounds = self.clopper_pearson(delta / sgr_tests(m))
        lo, hi, best = 0, m - 1, ABSTAIN
        while lo <= hi:
            mid = (lo + hi + 1) // 2
            if bounds[mid] <= alpha:
                best, lo = float(self.cut[mid]), mid + 1
            else:
                hi = mid - 1
        return best

    def ltt(self, alpha: float, delta: float, lambdas) -> float:
        """Fixed-sequence test over ``lambdas``, a grid fixed before calibration (ascending)."""
        lambdas = np.sort(np.asarray(lambdas, dtype=float))
        if self.n == 0 or lambdas.size == 0:
            return ABSTAIN
        # Fewer than n_min accepted points can never reject H0 (even with no errors,
        # P(Binom(n, alpha) <= 0) = (1 - alpha)^n > delta), so the sequence starts at the first grid
        # value that accepts n_min calibration points; that start reads the unlabelled scores only.
        n_min = math.ceil(math.log(delta) / math.log1p(-alpha))
        k = np.searchsorted(self.cut, lambdas, side="right")  # cuts <= lambda
        n_acc = np.where(k > 0, self.n_acc[np.maximum(k - 1, 0)], 0)
        n_err = np.where(k > 0, self.n_err[np.maximum(k - 1, 0)], 0)
        start = np.nonzero(n_acc >= n_min)[0]
        if start.size == 0:
            return ABSTAIN
        idx = np.arange(start[0], lambdas.size)
        p = stats.binom.cdf(n_err[idx], n_acc[idx], alpha)
        fails = np.nonzero(p > delta)[0]
        stop = fails[0] if fails.size else idx.size
        return float(lambdas[idx[stop - 1]]) if stop > 0 else ABSTAIN


def sgr_tests(m: int) -> int:
    """The most tests SGR's binary search over ``m`` cuts can make: floor(log2 m) + 1, its Bonferroni
    divisor (ceil(log2 m) undercounts by one when m is a power of two)."""
    return max(1, int(m).bit_length())


def ltt_grid(size: int) -> np.ndarray:
    """Learn-then-Test's thresholds, fixed before calibration: evenly spaced uncertainty values in
    [0, 1] (the range of 1 - max class probability and of the synthetic scores)."""
    return np.linspace(0.0, 1.0, size)


def hoeffding_ucb(n_err, n_acc, delta: float):
    return n_err / n_acc + np.sqrt(np.log(1 / delta) / (2 * n_acc))


def clopper_pearson_ucb(n_err, n_acc, delta: float):
    """One-sided (1 - delta) Clopper-Pearson upper bound of a binomial proportion."""
    n_err = np.asarray(n_err, dtype=float)
    n_acc = np.asarray(n_acc, dtype=float)
    with np.errstate(invalid="ignore"):
        ub = stats.beta.ppf(1 - delta, n_err + 1, np.maximum(n_acc - n_err, 1e-12))
    return np.where(n_err >= n_acc, 1.0, ub)


def lec_threshold(u, err, alpha: float, margin: float = 1.0) -> float:
    """LEC's retention-maximising threshold under the linear expectation constraint.

    Returns the largest calibration score ``lam`` with
    ``sum_{i: u_i <= lam} (err_i - alpha) <= -margin`` (the finite-sample sufficient condition;
    ``margin=1`` as in the paper's note, ``1 - alpha`` is the tight constant of the derivation
    in this module's docstring), or ``-inf`` (abstain on everything) when no score is feasible.
    """
    return Calibration(u, err).lec(alpha, margin)


def ucb_threshold(u, err, alpha: float, delta: float, bound: str = "hoeffding") -> float:
    """Largest threshold whose upper confidence bound on the selective risk is <= alpha.

    ``bound`` is ``"hoeffding"`` (UCB-HFD) or ``"clopper_pearson"`` (UCB-CLP). As in the
    baselines the paper compares with, the bound is applied at each candidate threshold without a
    multiplicity correction.
    """
    return Calibration(u, err).ucb(alpha, delta, bound)


def sgr_threshold(u, err, alpha: float, delta: float) -> float:
    """Selection with Guaranteed Risk (Geifman and El-Yaniv, 2017).

    Binary search over the sorted calibration cuts; each test uses the binomial-tail
    (Clopper-Pearson) bound at confidence delta / (floor(log2 m) + 1), the number of tests the
    search can make (Bonferroni). Returns the last threshold whose bound was <= alpha.
    """
    return Calibration(u, err).sgr(alpha, delta)


def ltt_threshold(u, err, alpha: float, delta: float, grid: int = 50) -> float:
    """Learn-then-Test with fixed-sequence testing (Angelopoulos et al., 2021).

    Candidates: ``grid`` evenly spaced thresholds in [0, 1], fixed before calibration
    (:func:`ltt_grid`), tested from the least accepting up, starting at the first that accepts
    n_min = ceil(log delta / log(1 - alpha)) calibration points (the least count at which H0 could be
    rejected at all), with the binomial p-value of H0: risk > alpha given the number accepted; the
    sequence stops at the first non-rejection and the last rejected threshold is returned.
    """
    return Calibration(u, err).ltt(alpha, delta, ltt_grid(grid))


def routing_thresholds(ua, ea, ub, eb, alpha: float, margin: float = 1.0, grid: int = 41):
    """LEC for a two-model routing system: maximise system acceptance under one joint constraint.

    The primary model answers when ``ua <= lam_a``; otherwise the input goes to the secondary
    model, which answers when ``ub <= lam_b``. System indicators: S = S_a + S_b,
    Z = S_a err_a + S_b err_b, and the constraint is sum_i (Z_i - alpha S_i) <= -margin on the
    calibration set. For each primary candidate (``grid`` quantiles of ``ua``, "route everything",
    and the primary's own LEC threshold, so that the system never accepts less than the primary
    alone on the calibration set), the
    best secondary threshold is the largest feasible one on the routed points (acceptance grows
    with lam_b); the pair with the highest total acceptance wins (ties: the smaller lam_a).
    Returns ``(lam_a, lam_b)``; ``(-inf, -inf)`` when nothing is feasible.

    All candidates are searched at once: prefix counts over the secondary's sorted scores, one row per
    candidate, read at the end of each group of equal scores (a cut accepts every routed point with that
    score or lower). ``routing_thresholds_loop`` is the one-candidate-at-a-time form; a test shows both agree.
    """
    ua, ea, ub, eb = (np.asarray(x, dtype=float) for x in (ua, ea, ub, eb))
    if not len(ua):
        return ABSTAIN, ABSTAIN
    order = np.argsort(ub, kind="stable")
    ua_s, ea_s, ub_s, eb_s = ua[order], ea[order], ub[order], eb[order]
    cands = np.unique(np.r_[ABSTAIN, np.quantile(ua, np.linspace(0, 1, grid)), Calibration(ua, ea).lec(alpha, margin)])
    acc_a = ua_s[None, :] <= cands[:, None]  # (candidate, point)
    n_a = acc_a.sum(axis=1)
    base = (ea_s * acc_a).sum(axis=1) - alpha * n_a
    routed = ~acc_a
    last = np.r_[ub_s[1:] != ub_s[:-1], True]  # ends of the groups of equal secondary scores
    ends = np.nonzero(last)[0]
    n_b = np.cumsum(routed, axis=1)[:, ends]  # routed points accepted by the cut at each group
    e_b = np.cumsum(eb_s * routed, axis=1)[:, ends]
    has_routed = np.add.reduceat(routed, np.r_[0, ends[:-1] + 1], axis=1) > 0
    ok = has_routed & (e_b - alpha * n_b <= -(margin + base)[:, None] + 1e-12)
    any_ok = ok.any(axis=1)
    k = np.where(any_ok, ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1), 0)
    lam_b = np.where(any_ok, ub_s[ends][k], ABSTAIN)
    total = n_a + np.where(any_ok, n_b[np.arange(len(cands)), k], 0)
    feasible = any_ok | (base <= -margin + 1e-12)
    if not feasible.any():
        return ABSTAIN, ABSTAIN
    best = int(np.argmax(np.where(feasible, total, -1)))
    return float(cands[best]), float(lam_b[best])


def routing_thresholds_loop(ua, ea, ub, eb, alpha: float, margin: float = 1.0, grid: int = 41):
    """``routing_thresholds`` one primary candidate at a time (the reference its test compares with)."""
    ua, ea, ub, eb = (np.asarray(x, dtype=float) for x in (ua, ea, ub, eb))
    order = np.argsort(ub, kind="stable")  # sort once; each routed subset stays sorted
    ua_s, ea_s, ub_s, eb_s = ua[order], ea[order], ub[order], eb[order]
    cands = [ABSTAIN]
    if len(ua):  # the grid, plus the primary's own LEC threshold so joint >= primary alone
        cands = np.unique(np.r_[ABSTAIN, np.quantile(ua, np.linspace(0, 1, grid)),
                                Calibration(ua, ea).lec(alpha, margin)])
    best = (-1, ABSTAIN, ABSTAIN)
    for lam_a in cands:
        acc_a = ua_s <= lam_a
        base = float(ea_s[acc_a].sum() - alpha * acc_a.sum())
        sub = Calibration.presorted(ub_s[~acc_a], eb_s[~acc_a])
        lam_b = sub.lec(alpha, margin + base)
        if lam_b == ABSTAIN and not base <= -margin + 1e-12:
            continue  # neither the primary alone nor any secondary cut is feasible
        total = int(acc_a.sum() + (sub.n_acc[sub.cut <= lam_b][-1] if lam_b != ABSTAIN else 0))
        if total > best[0]:
            best = (total, float(lam_a), float(lam_b))
    return best[1], best[2]


def naive_routing_thresholds(ua, ea, ub, eb, alpha: float, margin: float = 1.0):
    """Each model calibrated on its own with LEC, ignoring that the secondary only sees routed inputs."""
    return lec_threshold(ua, ea, alpha, margin), lec_threshold(ub, eb, alpha, margin)
