"""attribution_sgd: robustness measures on hand-computed cases, the power iteration against
eigvalsh, the Hutchinson input-Hessian norm against the exact Hessian, the top-k attack's ball,
the attention matrices, the arms and the curvature-link null."""

import numpy as np
import pandas as pd
import pytest
import torch

from icmlrepro.papers.attribution_sgd import curvature, robustness, train
from icmlrepro.papers.attribution_sgd.data import SHAPES, load_images
from icmlrepro.papers.attribution_sgd.evaluate import curvature_link, learned, pick_reg_lam, roles
from icmlrepro.papers.attribution_sgd.models import ViT, attention_matrix, build

from .conftest import check_smoke_paper


# --- robustness measures -------------------------------------------------------------------------
def test_topk_intersection_hand_computed():
    a = np.array([[5.0, 4, 3, 2, 1, 0]])
    b = np.array([[5.0, 0, 3, 2, 1, 4]])  # top-3 of a: {0,1,2}; of b: {0,5,2}
    assert robustness.topk_intersection(a, b, 3)[0] == pytest.approx(2 / 3)
    assert robustness.topk_intersection(a, a, 3)[0] == 1.0
    assert robustness.topk_intersection(a, -a, 3)[0] == 0.0


def test_rank_correlations_hand_computed():
    a = np.array([[1.0, 2, 3, 4]])
    assert robustness.spearman(a, a)[0] == pytest.approx(1.0)
    assert robustness.spearman(a, -a)[0] == pytest.approx(-1.0)
    b = np.array([[1.0, 3, 2, 4]])  # one swap: d^2 = 2, rho = 1 - 6*2 / (4*15) = 0.8
    assert robustness.spearman(a, b)[0] == pytest.approx(0.8)
    assert robustness.kendall(a, b)[0] == pytest.approx(4 / 6)  # 5 concordant, 1 discordant pair


def test_compare_mean_over_rows():
    a = np.array([[3.0, 2, 1, 0], [3.0, 2, 1, 0]])
    b = np.array([[3.0, 2, 1, 0], [0.0, 1, 2, 3]])
    r = robustness.compare(a, b, 2)
    assert r["topk"] == pytest.approx(0.5) and r["spearman"] == pytest.approx(0.0)


# --- curvature ---------------------------------------------------------------------------------
def test_power_iteration_matches_eigvalsh():
    g = torch.Generator().manual_seed(0)
    m = torch.randn(6, 6, generator=g, dtype=torch.float64)
    a = m @ m.T + torch.diag(torch.tensor([9.0, 0, 0, 0, 0, 0], dtype=torch.float64))
    lam = curvature.top_eigenvalue(lambda ps: 0.5 * ps["w"] @ a @ ps["w"],
                                   {"w": torch.zeros(6, dtype=torch.float64)}, iters=200, seed=1)
    assert lam == pytest.approx(float(torch.linalg.eigvalsh(a)[-1]), rel=1e-6)
    # a wrong answer: the trace or the second eigenvalue is far from it
    assert abs(lam - float(torch.linalg.eigvalsh(a)[-2])) > 1e-3


def test_sharpness_of_a_model_matches_the_dense_hessian():
    """Reverse-over-reverse power iteration on a real (double) MLP against the eigenvalues of the dense
    parameter Hessian; an unused parameter (zero Hessian row) must not break it."""
    from torch.func import functional_call

    torch.manual_seed(0)
    model = build("mlp", (3, 3), 3, 4, 1).double()
    model.register_parameter("unused", torch.nn.Parameter(torch.zeros(2, dtype=torch.float64)))
    x, y = torch.rand(16, 1, 3, 3, dtype=torch.float64), torch.randint(0, 3, (16,))
    lam = curvature.sharpness(model, x, y, iters=500, seed=0)
    names = [k for k, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]
    flat = torch.cat([p.detach().flatten() for _, p in model.named_parameters()])

    def loss(w):
        ps, i = {}, 0
        for k, sh in zip(names, shapes):
            n = int(np.prod(sh)) if len(sh) else 1
            ps[k] = w[i:i + n].view(sh)
            i += n
        return torch.nn.functional.cross_entropy(functional_call(model, ps, (x,)), y)

    ev = torch.linalg.eigvalsh(torch.autograd.functional.hessian(loss, flat))
    top = ev[ev.abs().argmax()]
    assert lam == pytest.approx(float(top), rel=1e-4)


def test_input_hessian_norm_matches_exact_hessian():
    torch.manual_seed(0)
    model = build("mlp", (2, 2), 3, 8, 1).double()
    x = torch.rand(1, 1, 2, 2, dtype=torch.float64)
    y = torch.tensor([1])

    def loss(v):
        return torch.nn.functional.cross_entropy(model(v.view(1, 1, 2, 2)), y)

    exact = torch.linalg.matrix_norm(torch.autograd.functional.hessian(loss, x.flatten())).item()
    est = curvature.input_hessian_norm(model, x, y, probes=4000, seed=0)
    assert est == pytest.approx(exact, rel=0.05)


# --- attack and perturbations -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mlp", "cnn", "vit_softmax"])
def test_attack_stays_in_the_ball_and_keeps_the_label(name):
    torch.manual_seed(0)
    model = build(name, (8, 8), 10, 16, 2).eval()
    x = torch.rand(6, 1, 8, 8)
    target = model(x).argmax(1)
    eps = 0.1
    xa = robustness.topk_attack(model, x, target, eps, k=8, steps=5)
    assert float((xa - x).abs().max()) <= eps + 1e-6
    assert float(xa.min()) >= 0 and float(xa.max()) <= 1
    assert torch.equal(model(xa).argmax(1), target)
    # and it does what it is for: lower saliency mass on the clean top-k than random noise of the same size
    top = robustness.saliency_map(model, x, target).topk(8, dim=1).indices
    mass = lambda z: float(robustness.saliency_map(model, z, target).gather(1, top).sum())  # noqa: E731
    xn = robustness.sign_noise(x, eps, torch.Generator().manual_seed(0))
    assert mass(xa) < mass(x) and mass(xa) < mass(xn)


def test_sign_noise_has_the_radius():
    x = torch.full((2, 1, 4, 4), 0.5)
    xn = robustness.sign_noise(x, 0.2, torch.Generator().manual_seed(0))
    assert torch.allclose((xn - x).abs(), torch.full_like(x, 0.2))


def test_captum_attributions_shape_and_saliency_agrees():
    torch.manual_seed(0)
    model = build("mlp", (8, 8), 10, 16, 2).eval()
    x = torch.rand(3, 1, 8, 8)
    t = model(x).argmax(1)
    p = {"smoothgrad_samples": 4, "smoothgrad_sigma": 0.1, "ig_steps": 8}
    for m in robustness.METHODS:
        assert robustness.attributions(model, x, t, m, p, 0).shape == (3, 64)
    np.testing.assert_allclose(robustness.attributions(model, x, t, "saliency", p, 0),
                               robustness.saliency_map(model, x, t).detach().numpy(), rtol=1e-5)


# --- models --------------------------------------------------------------------------------------
def test_attention_matrices_are_row_stochastic_and_differ():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, 4, generator=g)
    for kind in ("softmax", "kernel"):
        a = attention_matrix(q, k, kind)
        assert torch.allclose(a.sum(-1), torch.ones(2, 5)) and bool((a >= 0).all())
    assert not torch.allclose(attention_matrix(q, k, "softmax"), attention_matrix(q, k, "kernel"))


def test_rollout_is_a_distribution_over_tokens():
    torch.manual_seed(0)
    vit = ViT((8, 8), 10, 16, 2, "kernel")
    r = vit.rollout(torch.rand(3, 1, 8, 8))
    assert r.shape == (3, 16) and torch.allclose(r.sum(1), torch.ones(3))


def test_real_data_shapes():
    for name, shape in SHAPES.items():
        x, y = load_images(name)
        assert x.shape[1:] == shape and 0 <= x.min() and x.max() <= 1 and len(np.unique(y)) >= 2


# --- arms, roles, curvature-link null -------------------------------------------------------------
P = {"sweep": [{"lr": 0.3, "batch": 32}, {"lr": 0.3, "batch": 8}], "reg_lams": [0.1, 1.0]}


def test_arms_share_learning_rate_and_controls_only_on_headline():
    a = train.arms(P, headline=True)
    names = [x["arm"] for x in a]
    assert names[0] == "sgd_lr0.3_b32" and "gd" in names and "shuffled_sgd" in names and "gd_reg1" in names
    gd = next(x for x in a if x["arm"] == "gd")
    assert gd["lr"] == P["sweep"][0]["lr"] and gd["batch"] == 0
    assert {x["arm"] for x in train.arms(P, headline=False)} == {"sgd_lr0.3_b32", "sgd_lr0.3_b8", "gd"}
    assert roles(P)["sgd_lr0.3_b32"] == "sgd_high"


def test_gd_arm_is_deterministic_full_batch():
    x, y = torch.rand(16, 1, 8, 8), torch.randint(0, 10, (16,))
    outs = []
    for seed in (0, 1):  # the batch stream depends on the seed, full-batch GD must not
        torch.manual_seed(0)
        m = build("mlp", (8, 8), 10, 8, 2)
        train.train_arm(m, x, y, {"arm": "gd", "lr": 0.1, "batch": 0, "reg": 0.0}, 3, seed, 2, 5.0)
        outs.append(torch.cat([p.flatten() for p in m.parameters()]))
    assert torch.equal(outs[0], outs[1])


def test_a_seed_in_the_family_job_does_not_depend_on_the_other_seeds():
    """The family job loops over seeds in one process; each seed's rows must equal that seed run alone."""
    from icmlrepro.core.config import default_config_file, load_config, paper_settings
    from icmlrepro.papers.attribution_sgd.data import to_table

    p = paper_settings(load_config(default_config_file()), "attribution_sgd", "smoke")
    p.update(datasets={"feedforward": ["lfw"]}, steps=4, warmup_steps=1, n_eval=4, n_hess=8, power_iters=2,
             attack_steps=1, smoothgrad_samples=2, ig_steps=2)
    tables = {"lfw": to_table(*load_images("lfw"))}
    alone = train.train_family(tables, "feedforward", 1, p)
    train.train_family(tables, "feedforward", 0, p)  # another seed first, as in the job
    after = train.train_family(tables, "feedforward", 1, p)
    cols = [c for c in alone.columns if c != "train_seconds"]
    pd.testing.assert_frame_equal(alone[cols], after[cols])


def test_curvature_link_and_its_null():
    roles_ = ["sgd_high", "mid", "low", "gd"]
    rows = [{"dataset": d, "model": "mlp", "role": r, "sharpness": s, "input_curvature": c}
            for d in ("a", "b") for r, s, c in zip(roles_, [1, 2, 3, 4], [10, 20, 30, 40])]
    rho, q95 = curvature_link(pd.DataFrame(rows), roles_, 500, 0)
    assert rho == pytest.approx(1.0) and q95 < rho
    anti = pd.DataFrame([{**r, "input_curvature": -r["input_curvature"]} for r in rows])
    assert curvature_link(anti, roles_, 500, 0)[0] == pytest.approx(-1.0)
    # a diverged arm (NaN curvature) is left out, not allowed to turn the statistic into NaN
    nan = pd.DataFrame([{**r, "sharpness": float("nan")} if r["role"] == "mid" else r for r in rows])
    assert curvature_link(nan, roles_, 500, 0)[0] == pytest.approx(1.0)


def test_warmup_schedule_and_clipping_share():
    assert [train.lr_at(t, 0.3, 3) for t in range(4)] == pytest.approx([0.1, 0.2, 0.3, 0.3])
    assert train.lr_at(0, 0.3, 0) == 0.3
    x, y = torch.rand(16, 1, 8, 8), torch.randint(0, 10, (16,))
    arm = {"arm": "sgd", "lr": 0.1, "batch": 4, "reg": 0.0}
    shares = []
    for clip in (1e-6, 1e6):
        torch.manual_seed(0)
        shares.append(train.train_arm(build("mlp", (8, 8), 10, 8, 2), x, y, arm, 5, 0, 0, clip)[1])
    assert shares == [1.0, 0.0]


def test_clipping_bounds_the_steps_of_a_too_high_rate():
    x, y = torch.rand(32, 1, 8, 8), torch.randint(0, 10, (32,))
    lr, steps, clip = 50.0, 20, 0.01
    arm = {"arm": "gd", "lr": lr, "batch": 0, "reg": 0.0}
    moved = {}
    for c in (0.0, clip):  # the planted broken arm: without the clip this rate throws the weights far
        torch.manual_seed(0)
        m = build("mlp", (8, 8), 10, 16, 2)
        w0 = torch.cat([p.detach().flatten().clone() for p in m.parameters()])
        train.train_arm(m, x, y, arm, steps, 0, 0, c)
        moved[c] = float((torch.cat([p.detach().flatten() for p in m.parameters()]) - w0).norm())
    assert moved[clip] <= steps * lr * clip * (1 + 1e-4)
    assert moved[0.0] > steps * lr * clip


def test_flops_per_example_sgd_equals_gd_and_penalty_costs_more():
    torch.manual_seed(0)
    m = build("mlp", (8, 8), 10, 16, 2)
    x, y = torch.rand(64, 1, 8, 8), torch.randint(0, 10, (64,))
    before = [p.clone() for p in m.parameters()]
    sgd = train.flops_per_example(m, x, y, {"batch": 8, "reg": 0.0})
    gd = train.flops_per_example(m, x, y, {"batch": 0, "reg": 0.0})
    reg = train.flops_per_example(m, x, y, {"batch": 0, "reg": 0.1})
    assert sgd > 0 and sgd == gd and reg > 1.5 * gd  # the by-construction claim; a penalised arm would fail it
    assert all(torch.equal(a, b) for a, b in zip(before, m.parameters()) if b.grad is None)


def test_learned_mask_and_reg_pick_skips_collapsed_lams():
    assert learned([0.95, 0.2, 0.37], [0.1, 0.1, 0.1]).tolist() == [True, False, False]  # 0.3 of the way: 0.37
    grid = [0.01, 0.1, 1.0, 10.0]
    # lam 10 collapsed (flat map: very "robust"); it must not win
    pick = pick_reg_lam(grid, [True, True, True, False], [0.40, 0.45, 0.80, 0.99], n_eval=48)
    assert pick["lam"] == 1.0 and pick["interior"] == 1.0 and pick["tie"] == 0.0
    # scores within the selection's standard error tie to the middle lam (1.0), not to the best by score
    tie = pick_reg_lam(grid, [True] * 4, [0.50, 0.52, 0.50, 0.40], n_eval=48)
    assert tie["lam"] == 1.0 and tie["tie"] == 1.0
    assert np.isnan(pick_reg_lam(grid, [False] * 4, [0.5] * 4, 48)["lam"])
    edge = pick_reg_lam(grid, [True] * 4, [0.1, 0.1, 0.1, 0.9], n_eval=48)
    assert edge["lam"] == 10.0 and edge["interior"] == 0.0


def test_curvature_link_leaves_out_arms_that_did_not_learn():
    roles_ = ["sgd_high", "mid", "low", "gd"]
    rows = [{"dataset": "a", "model": "mlp", "role": r, "sharpness": s, "input_curvature": c, "learned": True}
            for r, s, c in zip(roles_, [1, 2, 3, 4], [10, 20, 30, 40])]
    rows.append({"dataset": "a", "model": "mlp", "role": "flat", "sharpness": 0.0, "input_curvature": 99.0,
                 "learned": False})
    with_flat = roles_ + ["flat"]
    assert curvature_link(pd.DataFrame(rows), with_flat, 200, 0)[0] == pytest.approx(1.0)
    planted = pd.DataFrame([{**r, "learned": True} for r in rows])  # counting the collapsed arm spoils it
    assert curvature_link(planted, with_flat, 200, 0)[0] < 1.0


# --- the smoke chain through Snakemake -------------------------------------------------------------
@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "attribution_sgd",
                                ("robustness_vs_noise.png", "curvature_link.png", "attention.png", "headline_arms.png"),
                                lambda name: name.startswith(("train_time", "train_seconds")))
    assert max(metrics.get("attack_linf_minus_eps").values) <= 1e-6
    assert all(v == 1.0 for v in metrics.get("flops_per_example_ratio.sgd_high_vs_gd").values)
