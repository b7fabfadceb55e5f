"""The shared GRPO loop (icmlrepro.rl.grpo): group z-scored advantages, the clipped surrogate and its gradient,
the k3 KL estimator, the masked token-level loss, Q-PAS's quantile filter and |A|-priority sampling, and the
update's equal step count; each on a hand-computed case or an invariant that a wrong implementation breaks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icmlrepro.rl import grpo


def test_group_advantages_on_a_hand_case():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0, 3.0, 0.0, 0.0, 0.0])
    a = grpo.group_advantages(r, 4, eps=0.0 + 1e-12)
    # group 1: mean 0.5, Bessel std sqrt(1/3) -> +-0.5*sqrt(3); group 2: all equal -> 0 (not NaN)
    h = 0.5 * math.sqrt(3)
    assert a[:4].tolist() == pytest.approx([h, -h, -h, h], rel=1e-6)
    assert a[4:8].tolist() == [0.0] * 4
    # group 3: mean 0.75, std sqrt((2.25^2 + 3 * 0.75^2) / 3) = 1.5 -> (1.5, -0.5, -0.5, -0.5)
    assert a[8:].tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5], rel=1e-6)
    # z-scoring is per group: shifting one group's rewards changes nothing, scaling changes nothing
    assert torch.allclose(grpo.group_advantages(torch.cat([r[:4] + 7, r[4:]]), 4), grpo.group_advantages(r, 4))
    assert torch.allclose(grpo.group_advantages(r * 3, 4, eps=1e-12), grpo.group_advantages(r, 4, eps=1e-12), atol=1e-6)


def test_clipped_surrogate_on_hand_cases_and_its_gradient():
    logp_old = torch.zeros(4, 1)
    logp = torch.log(torch.tensor([[1.5], [1.5], [0.5], [0.5]])).requires_grad_(True)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    surr, clipped = grpo.clipped_surrogate(logp, logp_old, adv, 0.2)
    # ratio 1.5: A>0 -> min(1.5, 1.2) = 1.2 (clipped); A<0 -> min(-1.5, -1.2) = -1.5 (not clipped)
    # ratio 0.5: A>0 -> min(0.5, 0.8) = 0.5 (not clipped); A<0 -> min(-0.5, -0.8) = -0.8 (clipped)
    assert surr.squeeze(1).tolist() == pytest.approx([1.2, -1.5, 0.5, -0.8])
    assert clipped.squeeze(1).tolist() == [True, False, False, True]
    surr.sum().backward()
    # a clipped token gives no gradient; an unclipped one gives d(ratio * A)/d logp = ratio * A
    assert logp.grad.squeeze(1).tolist() == pytest.approx([0.0, -1.5, 0.5, 0.0])


def test_kl_k3_is_zero_at_the_reference_nonnegative_and_unbiased():
    assert float(grpo.kl_k3(torch.tensor(0.3), torch.tensor(0.3))) == 0.0
    # d = log 2: 2 - log 2 - 1
    assert float(grpo.kl_k3(torch.tensor(0.0), torch.tensor(math.log(2)))) == pytest.approx(1 - math.log(2))
    x = torch.linspace(-3, 3, 61)
    assert (grpo.kl_k3(x, torch.zeros_like(x)) >= -1e-7).all()  # rounding at d = 0
    # sampled under pi_theta, its mean is KL(pi_theta || pi_ref)
    p, q = torch.tensor([0.6, 0.3, 0.1]), torch.tensor([0.2, 0.5, 0.3])
    idx = torch.multinomial(p, 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    est = float(grpo.kl_k3(p.log()[idx], q.log()[idx]).mean())
    assert est == pytest.approx(float((p * (p / q).log()).sum()), abs=0.01)


def test_grpo_loss_averages_masked_tokens_then_rollouts():
    logp_old = torch.zeros(2, 3)
    logp = torch.zeros(2, 3)  # ratio 1, no clip, KL 0 at the reference
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    loss, stats = grpo.grpo_loss(logp, logp_old, logp.clone(), adv, mask, 0.2, beta=0.5)
    assert float(loss) == pytest.approx(-(2.0 + -1.0) / 2) and stats["kl"] == 0.0
    # KL enters with weight beta, per token of the mask only: a deviation on the masked-out token is ignored
    ref = torch.tensor([[math.log(2), 0.0, 5.0], [0.0, 0.0, 5.0]])
    loss2, _ = grpo.grpo_loss(logp, logp_old, ref, adv, mask, 0.2, beta=0.5)
    k = 1 - math.log(2)
    assert float(loss2) == pytest.approx(-((2.0 - 0.5 * k / 2) + -1.0) / 2)


def test_qpas_keeps_high_advantage_rollouts_of_each_group():
    adv = torch.tensor([3.0, -1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0, 2.0, 1.0, 1.0])
    keep = grpo.qpas_keep(adv, 4, 0.5)
    # group 1 |A| = 3, 1, .5, 0 -> median .75 -> keep 3, -1; group 2 all 0 -> nothing; group 3 median 1.5
    assert keep.tolist() == [True, True, False, False, False, False, False, False, True, True, False, False]
    assert grpo.qpas_keep(adv, 4, 0.0).tolist() == (adv.abs() > 0).tolist()


def test_qpas_draws_only_kept_rollouts_in_proportion_to_abs_advantage():
    adv = torch.tensor([3.0, -1.0, 0.5, 0.0])
    keep = torch.tensor([True, True, False, False])
    draws = grpo.qpas_draw(adv, keep, 40_000, np.random.default_rng(0))
    share = np.bincount(draws, minlength=4) / len(draws)
    assert share[2] == 0 and share[3] == 0
    assert share[:2] == pytest.approx([0.75, 0.25], abs=0.01)
    assert len(grpo.qpas_draw(adv, torch.zeros(4, dtype=torch.bool), 10, np.random.default_rng(0))) == 0


def _bandit_update(cfg, rewards, steps=30, seed=0):
    """A 4-armed bandit policy trained with GRPO on fixed rewards per arm; returns its final probabilities."""
    torch.manual_seed(seed)
    logits = torch.nn.Parameter(torch.zeros(4))
    ref = torch.zeros(4)
    opt = torch.optim.SGD([logits], lr=0.5)
    rng = np.random.default_rng(seed)
    G, n_groups = 8, 4
    for _ in range(steps):
        with torch.no_grad():
            a = torch.distributions.Categorical(logits=logits).sample((G * n_groups,))
            logp_old = torch.log_softmax(logits, -1)[a][:, None]
            logp_ref = torch.log_softmax(ref, -1)[a][:, None]
        adv = grpo.group_advantages(rewards[a], G)
        st = grpo.update(lambda i: torch.log_softmax(logits, -1)[a[i]][:, None], logp_old, logp_ref, adv,
                         torch.ones_like(logp_old, dtype=torch.bool), opt, cfg, rng, G)
    return torch.softmax(logits.detach(), -1), st


def test_update_learns_a_bandit_with_equal_steps_with_and_without_qpas():
    rewards = torch.tensor([0.0, 0.2, 1.0, 0.1])
    for qpas in (False, True):
        cfg = grpo.GRPOConfig(epochs=2, minibatches=4, beta=0.0, qpas=qpas)
        p, st = _bandit_update(cfg, rewards)
        assert int(p.argmax()) == 2 and float(p[2]) > 0.6, (qpas, p)
    # equal gradient steps per batch with and without Q-PAS while any rollout carries signal; none without
    logits = torch.nn.Parameter(torch.zeros(4))
    a = torch.arange(8) % 4
    adv = grpo.group_advantages(rewards[a], 4)
    for qpas, adv_in, steps in ((False, adv, 8), (True, adv, 8), (True, torch.zeros(8), 0)):
        st = grpo.update(lambda i: torch.log_softmax(logits, -1)[a[i]][:, None], torch.full((8, 1), -math.log(4)),
                         torch.full((8, 1), -math.log(4)), adv_in, torch.ones(8, 1, dtype=torch.bool),
                         torch.optim.SGD([logits], lr=0.1), grpo.GRPOConfig(qpas=qpas), np.random.default_rng(0), 4)
        assert st["steps"] == steps and st["kept_fraction"] == (0.0 if steps == 0 else (0.5 if qpas else 1.0))
    # with a strong KL and no reward signal the policy stays at its reference
    p, _ = _bandit_update(grpo.GRPOConfig(beta=1.0), torch.ones(4))
    assert torch.allclose(p, torch.full((4,), 0.25), atol=1e-6)
    with pytest.raises(ValueError):
        grpo.update(lambda i: None, torch.zeros(4, 1), torch.zeros(4, 1), torch.zeros(4),
                    torch.ones(4, 1, dtype=torch.bool), None, grpo.GRPOConfig(qpas=True), np.random.default_rng(0))
