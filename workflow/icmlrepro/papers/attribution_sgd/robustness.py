"""Attributions (Captum) and their robustness, as in Ghorbani et al. (AAAI 2019).

Attribution maps are absolute values per input pixel (or per token for attention rollout).
Robustness between the map of a clean input and of its perturbation: the top-k intersection
(share of the clean top-k features still in the perturbed top-k) and the Spearman / Kendall rank
correlations. Perturbations stay within an L-infinity ball of radius eps and in [0, 1]:

* random sign noise: x + eps * s with s uniform in {-1, +1};
* the top-k attack: projected sign-gradient steps that lower the saliency mass on the clean top-k
  pixels while the predicted class stays unchanged (a sample whose prediction would change keeps
  its last accepted perturbation). The attack differentiates the saliency map (double backprop);
  SmoothGrad, Integrated Gradients and attention rollout are measured on the same perturbed inputs
  (a transfer of the saliency attack, stated in the claims file).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats

METHODS = ("saliency", "smoothgrad", "integrated_gradients")


def topk_intersection(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """Per row: |topk(a) ∩ topk(b)| / k (ties broken by index, stable sort)."""
    ta = np.argsort(-a, axis=1, kind="stable")[:, :k]
    tb = np.argsort(-b, axis=1, kind="stable")[:, :k]
    return np.array([len(set(x) & set(y)) / k for x, y in zip(ta, tb)])


def spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-row Spearman rank correlation (average ranks for ties); NaN for a constant row."""
    ra = stats.rankdata(a, axis=1)
    rb = stats.rankdata(b, axis=1)
    ra, rb = ra - ra.mean(1, keepdims=True), rb - rb.mean(1, keepdims=True)
    den = np.sqrt((ra**2).sum(1) * (rb**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ra * rb).sum(1) / den


def kendall(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([stats.kendalltau(x, y).statistic for x, y in zip(a, b)])


def compare(clean: np.ndarray, pert: np.ndarray, k: int) -> dict[str, float]:
    return {"topk": float(np.mean(topk_intersection(clean, pert, k))),
            "spearman": float(np.nanmean(spearman(clean, pert))),
            "kendall": float(np.nanmean(kendall(clean, pert)))}


def attributions(model, x: torch.Tensor, target: torch.Tensor, method: str, p: dict, seed: int) -> np.ndarray:
    """|attribution| per pixel, flattened [n, h*w], with Captum."""
    from captum.attr import IntegratedGradients, NoiseTunnel, Saliency

    x = x.clone().requires_grad_(True)
    if method == "saliency":
        a = Saliency(model).attribute(x, target=target, abs=True)
    elif method == "smoothgrad":
        torch.manual_seed(seed)  # NoiseTunnel draws its noise from torch's global generator
        a = NoiseTunnel(Saliency(model)).attribute(x, nt_type="smoothgrad", nt_samples=p["smoothgrad_samples"],
                                                   stdevs=p["smoothgrad_sigma"], target=target, abs=True)
    elif method == "integrated_gradients":
        a = IntegratedGradients(model).attribute(x, baselines=torch.zeros_like(x), target=target,
                                                 n_steps=p["ig_steps"]).abs()
    else:
        raise ValueError(f"unknown attribution method {method!r}")
    return a.detach().reshape(len(x), -1).numpy()


def saliency_map(model, x: torch.Tensor, target: torch.Tensor, create_graph: bool = False) -> torch.Tensor:
    """|d logit_target / d x| [n, h*w], differentiable in x when ``create_graph``."""
    if not x.requires_grad:
        x = x.clone().requires_grad_(True)
    out = model(x).gather(1, target[:, None]).sum()
    (g,) = torch.autograd.grad(out, x, create_graph=create_graph)
    return g.abs().reshape(len(x), -1)


def sign_noise(x: torch.Tensor, eps: float, gen: torch.Generator) -> torch.Tensor:
    s = torch.randint(0, 2, x.shape, generator=gen).to(x.dtype) * 2 - 1
    return (x + eps * s).clamp(0, 1)


def topk_attack(model, x: torch.Tensor, target: torch.Tensor, eps: float, k: int, steps: int) -> torch.Tensor:
    """Projected sign-gradient steps that minimise the saliency mass on the clean top-k pixels."""
    top = saliency_map(model, x, target).topk(k, dim=1).indices
    step = 2.5 * eps / max(steps, 1)
    x_adv = x.clone()
    for _ in range(steps):
        xa = x_adv.clone().requires_grad_(True)
        loss = saliency_map(model, xa, target, create_graph=True).gather(1, top).sum()
        (g,) = torch.autograd.grad(loss, xa)
        cand = torch.minimum(torch.maximum(xa.detach() - step * g.sign(), x - eps), x + eps).clamp(0, 1)
        with torch.no_grad():
            keep = model(cand).argmax(1) == target
        x_adv = torch.where(keep[:, None, None, None], cand, x_adv)
    return x_adv.detach()
