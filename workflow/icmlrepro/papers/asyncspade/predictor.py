"""The temporal-regressive query predictor: next query from a short window of recent queries.

Assumed form (the paper gives none; stated in the report): per layer, batch row and head, an
autoregression with ``order`` scalar coefficients shared across channels,
q_{s} ~ sum_j theta_j q_{s-j}, fitted by ridge regression over the last ``window`` queries:

    theta = argmin_theta  sum_{s in window} || q_s - sum_j theta_j q_{s-j} ||^2 + lam ||theta||^2

and the prediction q_{t+1} = sum_j theta_j q_{t+1-j}. Scalar coefficients keep the fit to an
``order`` x ``order`` solve per head (cheap enough to run off the critical path), and they represent
the smooth drift and single-frequency oscillations that adjacent queries show. It is fitted on
pre-RoPE queries (the ``q_norm`` output), where positions do not rotate the signal.
"""

from __future__ import annotations

import torch


def ridge_ar_coefficients(history: torch.Tensor, order: int = 2, lam: float = 1e-3) -> torch.Tensor:
    """Ridge AR coefficients from ``history[..., W, d]`` (oldest first); returns ``[..., order]``."""
    w = history.shape[-2]
    if w <= order:
        raise ValueError(f"window of {w} queries is too short for an AR({order}) fit")
    h = history.double()
    y = h[..., order:, :]                                             # [..., W-order, d]
    x = torch.stack([h[..., order - j - 1: w - j - 1, :] for j in range(order)], dim=-1)  # [..., W-order, d, order]
    xtx = torch.einsum("...tdi,...tdj->...ij", x, x)
    xty = torch.einsum("...tdi,...td->...i", x, y)
    eye = torch.eye(order, dtype=h.dtype, device=h.device)
    scale = xtx.diagonal(dim1=-2, dim2=-1).mean(-1, keepdim=True)[..., None].clamp(min=1e-12)
    return torch.linalg.solve(xtx + lam * scale * eye, xty[..., None])[..., 0]


def predict_next(history: torch.Tensor, order: int = 2, lam: float = 1e-3) -> torch.Tensor:
    """Predicted next query ``[..., d]`` from ``history[..., W, d]``; the last query if W <= order."""
    if history.shape[-2] <= order:
        return history[..., -1, :]
    theta = ridge_ar_coefficients(history, order, lam)
    recent = torch.stack([history[..., -1 - j, :].double() for j in range(order)], dim=-1)  # [..., d, order]
    return torch.einsum("...dj,...j->...d", recent, theta).to(history.dtype)


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)
