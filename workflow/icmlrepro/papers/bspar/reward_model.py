"""B-Spar's Bayesian reward model: a posterior over "the judge accepts this state" from binary feedback.

Choice (the abstract names no model): Bayesian logistic regression with a Gaussian prior N(0, I / alpha) on
standardised features, fitted by Newton steps to the MAP, with a Laplace approximation of the posterior. The
predictive acceptance probability uses MacKay's probit approximation sigma(mu / sqrt(1 + pi var / 8)), so
uncertain states are pulled toward 1/2. Only final states of rollouts carry feedback; the model then scores every
intermediate state too, which turns one noisy bit per rollout into a per-step signal (the change of posterior
acceptance, a potential-based shaping).

Features (``quadratic_features``): the judge accepts when the image's statistics sit where the expert's would
(near the house style on the instructed aspects) and the uninstructed aspects were left alone, a bowl-shaped
rule in the statistics that depends on the instruction. So the features are the image statistics and their
squares, the change since the source (signed, squared and absolute), and that change gated by each instruction
word (instruction x change), standardised on the fitted buffer. An earlier version used random Fourier features
of the raw state (an RBF GP approximation, lengthscale 1 on 32 unscaled inputs): its features were nearly random
hashes of the state and its held-out AUC stayed at 0.50-0.54 (issue #39).
"""

from __future__ import annotations

import math

import torch


def quadratic_features(x: torch.Tensor, n_instr: int) -> torch.Tensor:
    """State (B, n_instr + 2 m) = (instruction multi-hot, statistics f, change d = f - f0) ->
    [f, f^2, d, d^2, |d|, instr_j * d, instr_j * |d|] (B, 5 m + 2 m n_instr)."""
    x = x.to(torch.float64)
    m = (x.shape[1] - n_instr) // 2
    ins, f, d = x[:, :n_instr], x[:, n_instr:n_instr + m], x[:, n_instr + m:]
    gated = (ins[:, :, None] * torch.cat([d, d.abs()], 1)[:, None, :]).flatten(1)
    return torch.cat([f, f ** 2, d, d ** 2, d.abs(), gated], 1)


class BayesLogistic:
    """Laplace-approximated Bayesian logistic regression on standardised instruction-gated quadratic features
    (float64)."""

    def __init__(self, n_instr: int, alpha: float):
        self.n_instr, self.alpha = n_instr, alpha
        self.mean = self.cov = self.loc = self.scale = None
        self.fitted = False

    def phi(self, x: torch.Tensor) -> torch.Tensor:
        z = (quadratic_features(x, self.n_instr) - self.loc) / self.scale
        return torch.cat([torch.ones(len(x), 1, dtype=torch.float64), z], 1)

    def fit(self, x: torch.Tensor, y: torch.Tensor, newton_steps: int = 8) -> "BayesLogistic":
        """Standardise the features on (x), then the MAP by Newton's method from 0 and the Laplace covariance
        at the MAP."""
        q = quadratic_features(x, self.n_instr)
        self.loc, self.scale = q.mean(0), q.std(0).clamp(min=1e-6)
        Z, y = self.phi(x), y.to(torch.float64)
        w = torch.zeros(Z.shape[1], dtype=torch.float64)
        prior = self.alpha * torch.eye(Z.shape[1], dtype=torch.float64)
        for _ in range(newton_steps):
            p = torch.sigmoid(Z @ w)
            grad = Z.T @ (p - y) + self.alpha * w
            H = (Z * (p * (1 - p))[:, None]).T @ Z + prior
            w = w - torch.linalg.solve(H, grad)
        p = torch.sigmoid(Z @ w)
        H = (Z * (p * (1 - p))[:, None]).T @ Z + prior
        self.mean, self.cov, self.fitted = w, torch.linalg.inv(H), True
        return self

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Posterior predictive P(accept) (probit approximation); 1/2 before any feedback."""
        if not self.fitted:
            return torch.full((len(x),), 0.5, dtype=torch.float32)
        Z = self.phi(x)
        mu = Z @ self.mean
        var = ((Z @ self.cov) * Z).sum(1).clamp(min=0)
        return torch.sigmoid(mu / torch.sqrt(1 + math.pi * var / 8)).float()

    KEYS = ("n_instr", "alpha", "mean", "cov", "loc", "scale", "fitted")

    def state(self) -> dict:
        return {k: getattr(self, k) for k in self.KEYS}

    @classmethod
    def from_state(cls, st: dict) -> "BayesLogistic":
        m = cls.__new__(cls)
        for k in cls.KEYS:
            setattr(m, k, st[k])
        return m
