"""B-Spar's Bayesian reward model: a posterior over "the judge accepts this state" from binary feedback.

Choice (the abstract names no model): Bayesian logistic regression on random Fourier features of the state
(instruction, image statistics, their change since the source) -- a finite-feature approximation of a
Gaussian-process classifier with an RBF kernel -- with a Gaussian prior N(0, I / alpha), fitted by Newton steps
to the MAP and a Laplace approximation of the posterior. The predictive acceptance probability uses MacKay's
probit approximation sigma(mu / sqrt(1 + pi var / 8)), so uncertain states are pulled toward 1/2. Only final
states of rollouts carry feedback; the model then scores every intermediate state too, which turns one noisy bit
per rollout into a per-step signal (the change of posterior acceptance, a potential-based shaping).
"""

from __future__ import annotations

import math

import torch


class BayesLogistic:
    """Laplace-approximated Bayesian logistic regression on random Fourier features (float64)."""

    def __init__(self, dim: int, n_features: int, lengthscale: float, alpha: float, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.W = torch.randn(dim, n_features, generator=g, dtype=torch.float64) / lengthscale
        self.b = torch.rand(n_features, generator=g, dtype=torch.float64) * 2 * math.pi
        self.alpha = alpha
        self.mean = torch.zeros(n_features + 1, dtype=torch.float64)
        self.cov = torch.eye(n_features + 1, dtype=torch.float64) / alpha
        self.fitted = False

    def phi(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float64)
        z = math.sqrt(2.0 / self.W.shape[1]) * torch.cos(x @ self.W + self.b)
        return torch.cat([torch.ones(len(x), 1, dtype=torch.float64), z], 1)

    def fit(self, x: torch.Tensor, y: torch.Tensor, newton_steps: int = 8) -> "BayesLogistic":
        """MAP by Newton's method (from the previous mean), then the Laplace covariance at the MAP."""
        Z, y = self.phi(x), y.to(torch.float64)
        w = self.mean.clone()
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

    def state(self) -> dict:
        return {"W": self.W, "b": self.b, "alpha": self.alpha, "mean": self.mean, "cov": self.cov,
                "fitted": self.fitted}

    @classmethod
    def from_state(cls, st: dict) -> "BayesLogistic":
        m = cls.__new__(cls)
        m.W, m.b, m.alpha, m.mean, m.cov, m.fitted = (st[k] for k in ("W", "b", "alpha", "mean", "cov", "fitted"))
        return m
