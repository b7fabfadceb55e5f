"""C2-GMAE: the defining properties of GraphMAE and of C2-GMAE's three parts, and the smoke chain.

Scaled cosine error on a hand-computed case; GraphMAE's corruption (exact masked count, token vs
random-replacement split); density-partitioned masking (equal quota from every bin); heterophilic
amplification (exactly the low-cosine edges, and only they, are up-weighted); Laplacian PE
(orthonormal eigenvectors of the normalised Laplacian, deterministic sign); the contextual SBM's
homophily; the consistency diagnostic on hand-made attention; coverage counting; density masking
as variance reduction (equal expected rate per bin) and its per-bin sd <= 0.5 (the by_construction
label); the paired SBM and per-seed graph draws; reconstruction error per density bin; rate choice with
ties to the default; the retrain null; that a control arm's values never reproduce a claim; and that the
raw-feature control wins on a planted graph whose structure carries no label information.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from icmlrepro.core.claims import load_claims
from icmlrepro.papers.c2gmae.data import build_graph, graph_of_seed, parse_graph_name, seed_key
from icmlrepro.papers.c2gmae.evaluate import retrain_pairs
from icmlrepro.papers.c2gmae.train import choose_rate, linear_probe, mask_count_sd, node_split, train_rung, load_graph

from icmlrepro.papers.c2gmae.diagnostics import attention_consistency, recon_error_per_bin
from icmlrepro.papers.c2gmae.graphs import contextual_sbm, digits_knn, edge_homophily, laplacian_pe, partner_of
from icmlrepro.papers.c2gmae.heterophily import amplify, heterophilic_degree_ratio, heterophilic_edges
from icmlrepro.papers.c2gmae.masking import (corrupt, coverage_per_bin, density_bins, density_partitioned_mask,
                                             node_density, uniform_mask)
from icmlrepro.papers.c2gmae.model import LADDER, GraphTensors, MaskedGraphAutoEncoder, pe_distance, sce_loss

from .conftest import check_smoke_paper
from .test_collapsed_ops import check_controls_decide


def test_scaled_cosine_error_hand_computed():
    pred = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    target = torch.tensor([[2.0, 0.0], [1.0, 0.0], [0.0, -1.0]])
    # cosines: 1, 1/sqrt(2), -1  ->  errors 0, 1 - 1/sqrt(2), 2
    e = [0.0, 1 - 1 / math.sqrt(2), 2.0]
    for gamma in (1.0, 2.0, 3.0):
        assert float(sce_loss(pred, target, gamma)) == pytest.approx(np.mean([v ** gamma for v in e]), rel=1e-6)
    # gamma > 1 down-weights the easy (nearly aligned) rows relative to the hard one
    assert float(sce_loss(pred[1:2], target[1:2], 3.0)) < float(sce_loss(pred[1:2], target[1:2], 1.0))
    # scale invariance: only directions matter
    assert float(sce_loss(5 * pred, 0.1 * target, 2.0)) == pytest.approx(float(sce_loss(pred, target, 2.0)))


def test_uniform_mask_and_corruption_split():
    gen = torch.Generator().manual_seed(0)
    n, rate, replace = 200, 0.3, 0.1
    masked = uniform_mask(n, rate, gen)
    assert masked.numel() == int(rate * n) and masked.unique().numel() == masked.numel()
    x = torch.randn(n, 5) + 3.0  # no row is zero
    token = torch.full((1, 5), 7.0)
    out, token_nodes, replaced = corrupt(x, masked, replace, token, gen)
    assert replaced.numel() == int(replace * masked.numel())
    assert token_nodes.numel() == masked.numel() - replaced.numel()
    assert set(token_nodes.tolist()) | set(replaced.tolist()) == set(masked.tolist())
    assert not set(token_nodes.tolist()) & set(replaced.tolist())
    assert torch.equal(out[token_nodes], token.expand(token_nodes.numel(), 5))
    rows = {tuple(r) for r in x.numpy().round(6).tolist()}  # replaced rows are copies of some node's features
    assert all(tuple(r) in rows for r in out[replaced].numpy().round(6).tolist())
    untouched = torch.ones(n, dtype=torch.bool)
    untouched[masked] = False
    assert torch.equal(out[untouched], x[untouched])


def test_density_partitioned_mask_draws_equal_quota_from_every_bin():
    rng = np.random.default_rng(0)
    density = rng.random(103)
    bins = density_bins(density, 4)
    assert np.all(np.diff([density[bins == b].mean() for b in range(4)]) < 0)  # bin 0 densest
    assert np.bincount(bins).tolist() == [25, 25, 25, 28]
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        m = density_partitioned_mask(torch.as_tensor(bins), 0.5, gen)
        assert m.unique().numel() == m.numel()
        counts = np.bincount(bins[m.numpy()], minlength=4)
        assert m.numel() == int(0.5 * 103) == uniform_mask(103, 0.5, gen).numel()  # same count as uniform
        assert counts.min() == int(0.5 * 103) // 4 and counts.max() - counts.min() <= 1  # equal quota per bin


def test_density_masking_reduces_variance_not_expected_coverage():
    """Equal bins and equal quotas are stratified sampling: every bin is masked at the same expected rate
    under both strategies (so expected coverage is equal), but the per-epoch count of a bin is fixed at
    its quota (sd <= 0.5 node, from the remainder only) instead of hypergeometric (sd ~ 3.5 nodes here)."""
    bins = density_bins(np.random.default_rng(0).random(300), 4)
    gen = torch.Generator().manual_seed(2)
    strat = [density_partitioned_mask(torch.as_tensor(bins), 0.5, gen).numpy() for _ in range(400)]
    unif = [uniform_mask(300, 0.5, gen).numpy() for _ in range(400)]
    assert mask_count_sd(strat, bins) <= 0.5 and mask_count_sd(unif, bins) > 2.5
    hyper_sd = math.sqrt(75 * 0.5 * 0.5 * (300 - 75) / (300 - 1))
    assert mask_count_sd(unif, bins) == pytest.approx(hyper_sd, rel=0.15)
    for hist in (strat, unif):
        rate = np.bincount(bins[np.concatenate(hist)], minlength=4) / (400 * 75)
        np.testing.assert_allclose(rate, 0.5, atol=0.01)  # the same expected masking rate per bin
    assert mask_count_sd([np.array([0, 1]), np.array([0])], np.array([0, 0, 1])) == pytest.approx(0.25)


@pytest.mark.parametrize("n,n_bins,rate", [(300, 4, 0.5), (103, 4, 0.5), (97, 3, 0.37), (120, 5, 0.6)])
def test_density_mask_count_sd_is_at_most_half_a_node_by_construction(n, n_bins, rate):
    """The by_construction label of density_masking_coverage: a bin's per-epoch count takes at most two
    adjacent values (its quota, or one more), so its sd over epochs is <= 0.5 on any graph and seed."""
    bins = density_bins(np.random.default_rng(n).random(n), n_bins)
    gen = torch.Generator().manual_seed(n)
    hist = [density_partitioned_mask(torch.as_tensor(bins), rate, gen).numpy() for _ in range(200)]
    assert mask_count_sd(hist, bins) <= 0.5 + 1e-12
    counts = np.stack([np.bincount(bins[m], minlength=n_bins) for m in hist])
    assert np.all(counts.max(0) - counts.min(0) <= 1)


def test_recon_error_per_bin_pools_masked_nodes_over_masks():
    bins = torch.tensor([0, 0, 1, 1])
    masks = [torch.tensor([0, 2]), torch.tensor([1, 2])]
    errors = [torch.tensor([0.2, 1.0]), torch.tensor([0.4, 3.0])]
    assert recon_error_per_bin(errors, masks, bins) == pytest.approx([0.3, 2.0])


def test_rate_choice_ties_go_to_the_default():
    lrs = [0.0025, 0.005, 0.01]
    # within one SE (~0.06 at 60 nodes): the default wins, recorded as a tie
    i, rec = choose_rate(lrs, [0.60, 0.62, 0.65], 0.005, 60)
    assert lrs[i] == 0.005 and rec["tuning_tie"] == 1.0 and rec["tuned_interior"] == 1.0
    assert rec["lr_best_by_score"] == 0.01 and rec["selection_se"] == pytest.approx(math.sqrt(0.65 * 0.35 / 60))
    # a clear winner at the edge stays there and is flagged
    i, rec = choose_rate(lrs, [0.40, 0.50, 0.90], 0.005, 60)
    assert lrs[i] == 0.01 and rec["tuning_tie"] == 0.0 and rec["tuned_interior"] == 0.0


def test_graph_names_set_homophily_and_signal():
    assert parse_graph_name("csbm_h0.2") == ("csbm", 0.2, None, False)
    assert parse_graph_name("csbm_h0.1_s4.5") == ("csbm", 0.1, 4.5, False)
    assert parse_graph_name("csbm_h0.1_s0.5_pair") == ("csbm", 0.1, 0.5, True)
    assert parse_graph_name("digits_knn") == ("digits_knn", None, None, False)
    with pytest.raises(ValueError):
        parse_graph_name("csbm_0.1")


def test_graphs_are_redrawn_per_seed_and_stored_together():
    s = {"csbm": {"n_nodes": 80, "n_classes": 4, "n_features": 6, "avg_degree": 6, "signal": 1.0},
         "digits_knn": {"n_nodes": 80, "k": 4}, "model": {"pe_dim": 4}, "c2gmae": {"n_density_bins": 4}}
    for name in ("csbm_h0.2_s0.5_pair", "digits_knn"):
        a, b = build_graph(name, s, 0), build_graph(name, s, 1)
        assert not np.array_equal(a["x"], b["x"])  # another seed, another draw
        assert np.array_equal(a["x"], build_graph(name, s, 0)["x"])  # the same seed, the same draw
        arrays = {seed_key(k, sd): v for sd, g in ((0, a), (1, b)) for k, v in g.items()}
        assert all(np.array_equal(graph_of_seed(arrays, 1)[k], b[k]) for k in b)
    with pytest.raises(KeyError):
        graph_of_seed(arrays, 7)


def test_paired_sbm_joins_each_class_to_its_partner_only():
    """Heterophilic with label information in the structure: every between-class edge joins partners."""
    vals = []
    for seed in range(3):
        g = contextual_sbm(400, 4, 8, 8, 0.1, 1.0, seed=seed, paired=True)
        ya, yb = g["y"][g["edge_index"][0]], g["y"][g["edge_index"][1]]
        assert np.all((ya == yb) | (yb == partner_of(4)[ya]))
        vals.append(edge_homophily(g["edge_index"], g["y"]))
    assert abs(np.mean(vals) - 0.1) < 0.03
    with pytest.raises(ValueError):
        partner_of(5)


def test_retrain_null_pairs_a_rung_with_itself():
    """Hand case: the null pair's gaps are |main - retrain| of the same rung; matching uses the same rule."""
    rungs = pd.DataFrame({"graph": ["g", "g"], "seed": [0, 0], "rung": ["graphmae", "pe"],
                          "recon_loss": [1.0, 2.0], "test_acc": [0.6, 0.7], "consistency": [0.8, 0.9]})
    null = pd.DataFrame({"graph": ["g"], "seed": [0], "rung": ["graphmae"], "recon_loss": [1.02],
                         "test_acc": [0.65], "consistency": [0.85]})
    pairs = retrain_pairs(rungs, null, tol=0.05)
    assert len(pairs) == 1 and pairs.pair.iloc[0] == "graphmae|retrain" and bool(pairs.matched.iloc[0])
    assert pairs.acc_gap.iloc[0] == pytest.approx(0.05) and pairs.consistency_gap.iloc[0] == pytest.approx(0.05)
    assert not bool(retrain_pairs(rungs, null.assign(recon_loss=1.2), tol=0.05).matched.iloc[0])


def test_a_control_arm_is_not_reproduced():
    """GraphMAE's (or the rung without the part's) values, or the retrain null's, substituted for the
    method's never reproduce a claim; every claim names a control."""
    assert check_controls_decide("c2gmae") >= 11
    claims = load_claims("c2gmae").claims
    assert {c.id for c in claims if c.by_construction} == {"density_masking_coverage"}
    assert all(c.controls for c in claims if not c.by_construction)
    controls = {c.id: set(c.controls) for c in claims}
    assert {"probe_acc.raw_features.heterophilic", "probe_acc.mlp.heterophilic"} <= controls["heterophilic_amplification"]
    assert "recon_bin_rel_spread.pe" in controls["density_masking_even_reconstruction"]


def test_node_density_is_mean_cosine_to_two_hop_neighbours():
    # path 0-1-2-3: node 0 reaches 1 and 2 within two hops
    ei = np.array([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    x = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    d = node_density(x, ei)
    assert d[0] == pytest.approx((1.0 + 0.0) / 2)
    assert d[3] == pytest.approx((1 / math.sqrt(2) + 1 / math.sqrt(2)) / 2)  # reaches 2 and 1


def test_coverage_counts_masked_at_least_once_per_window():
    bins = np.array([0, 0, 1, 1])
    history = [np.array([0]), np.array([0, 2]), np.array([1]), np.array([1])]
    # window 2: epochs {0,1} cover {0,2}; epochs {2,3} cover {1}
    assert coverage_per_bin(history, bins, 2).tolist() == [pytest.approx(0.5), pytest.approx(0.25)]


def test_heterophilic_amplification_touches_exactly_the_low_cosine_edges():
    x = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [-1.0, 0.0], [1.0, 0.05]])
    ei = torch.tensor([[0, 1, 0, 2, 0, 3, 1, 4, 0, 4], [1, 0, 2, 0, 3, 0, 4, 1, 4, 0]])
    m = heterophilic_edges(x, ei, 0.1)
    xn = torch.nn.functional.normalize(x, dim=-1)
    cos = (xn[ei[0]] * xn[ei[1]]).sum(-1)
    # nearest-rank 10% quantile of 10 edges = the 2nd lowest cosine: both directions of 0<->3 (cos -1)
    assert m.tolist() == (cos <= cos.sort().values[1]).float().tolist()
    assert m.sum() == 2 and bool(m[4]) and bool(m[5])
    d = torch.rand(10) + 0.5
    out = amplify(d, m, 0.4)
    assert torch.allclose(out[m == 0], d[m == 0])
    assert torch.allclose(out[m == 1], 1.4 * d[m == 1])
    ratio = heterophilic_degree_ratio(m, ei, 5)
    assert ratio.tolist() == pytest.approx([1 / 4, 0.0, 0.0, 1.0, 0.0])


def test_laplacian_pe_orthonormal_eigenvectors_with_fixed_sign():
    g = contextual_sbm(60, 3, 4, 6, 0.7, 1.0, seed=3)
    ei, n = g["edge_index"], 60
    u = laplacian_pe(ei, n, 8).astype(np.float64)
    assert np.allclose(u.T @ u, np.eye(8), atol=1e-5)
    a = np.zeros((n, n))
    a[ei[0], ei[1]] = 1
    deg = a.sum(1)
    lap = np.eye(n) - a / np.sqrt(np.outer(deg, deg))
    lam = np.diag(u.T @ lap @ u)
    assert np.allclose(lap @ u, u * lam, atol=1e-4)  # eigenvectors
    assert np.all(lam[1:] >= lam[:-1] - 1e-9) and lam[0] > 1e-6  # smallest non-trivial, ascending
    top = u[np.abs(u).argmax(0), np.arange(8)]
    assert np.all(top > 0)
    # a relabelling of nodes permutes the rows of the PE (up to eigenvalue ties), the distance is sign-free
    d = pe_distance(torch.as_tensor(u), torch.as_tensor(ei))
    assert torch.allclose(d, pe_distance(-torch.as_tensor(u), torch.as_tensor(ei)))


@pytest.mark.parametrize("h", [0.1, 0.5, 0.9])
def test_contextual_sbm_hits_requested_homophily(h):
    vals = [edge_homophily(g["edge_index"], g["y"]) for g in
            (contextual_sbm(600, 4, 8, 10, h, 1.0, seed=s) for s in range(3))]
    assert abs(np.mean(vals) - h) < 0.03
    g = contextual_sbm(600, 4, 8, 10, h, 1.0, seed=0)
    assert g["edge_index"].shape[1] / 600 == pytest.approx(10, rel=0.1)  # mean degree
    assert np.array_equal(g["edge_index"], g["edge_index"][::-1][:, np.lexsort(g["edge_index"])])  # symmetric


def test_digits_knn_is_real_and_homophilic():
    g = digits_knn(300, 5, seed=0)
    assert g["x"].shape == (300, 64) and set(np.unique(g["y"])) <= set(range(10))
    assert edge_homophily(g["edge_index"], g["y"]) > 0.8


def test_attention_consistency_hand_made():
    dst = torch.tensor([0, 0, 1, 1])
    masks = [torch.tensor([0, 1]), torch.tensor([0, 1])]
    same = torch.tensor([[0.3, 0.7, 0.5, 0.5], [0.3, 0.7, 0.5, 0.5]])
    assert attention_consistency(same, dst, masks, 2) == pytest.approx(1.0)
    flip = torch.tensor([[1.0, 0.0, 0.5, 0.5], [0.0, 1.0, 0.5, 0.5]])
    # node 0: mean (0.5, 0.5), TV 0.5 under each mask; node 1: TV 0
    assert attention_consistency(flip, dst, masks, 2) == pytest.approx(1 - 0.25)


def _tiny_graph():
    g = contextual_sbm(40, 2, 6, 4, 0.3, 1.0, seed=0)
    x, ei = torch.as_tensor(g["x"]), torch.as_tensor(g["edge_index"])
    u = torch.as_tensor(laplacian_pe(g["edge_index"], 40, 4))
    m = heterophilic_edges(x, ei, 0.2)
    bins = torch.as_tensor(density_bins(node_density(g["x"], g["edge_index"]), 4))
    return GraphTensors(x, ei, u, pe_distance(u, ei), m, heterophilic_degree_ratio(m, ei, 40), bins)


SETTINGS = {"model": {"hidden": 8, "heads": 2, "layers": 2, "in_drop": 0.0, "attn_drop": 0.0, "n_basis": 4},
            "c2gmae": {"beta": 0.4, "gamma": 1.0, "kappa": 0.8, "lambda_h": 1.0, "pe_noise": 0.1, "w_pe": 1.0,
                       "dist_max": 1.5},
            "train": {"replace_rate": 0.0, "sce_gamma": 2.0}}


@pytest.mark.parametrize("rung", list(LADDER))
def test_masked_nodes_are_reconstructed_from_context_only(rung):
    """Re-mask: the decoder input of a masked node is zero, so its own corrupted features cannot leak.
    With replace_rate 0 a masked node's input is the mask token whatever its features were."""
    g = _tiny_graph()
    torch.manual_seed(0)
    model = MaskedGraphAutoEncoder(6, LADDER[rung], SETTINGS).eval()
    masked = torch.tensor([0, 5, 9])
    gen = torch.Generator().manual_seed(0)
    rec, _ = model.reconstruct(g, masked, gen)
    g2 = GraphTensors(**{**g.__dict__, "x": g.x.clone()})
    g2.x[masked] = torch.randn(3, 6) * 10  # change only the masked nodes' true features
    rec2, _ = model.reconstruct(g2, masked, torch.Generator().manual_seed(0))
    assert torch.allclose(rec[masked], rec2[masked], atol=1e-5)
    loss = model.loss(g, masked, torch.Generator().manual_seed(0))
    loss.backward()
    assert torch.isfinite(loss)
    has_pe = hasattr(model, "pe_head")
    assert has_pe == LADDER[rung].pe


# --- many runs as one batched model (batched.py) -------------------------------------------------------


def _tiny_graph_of(seed: int) -> GraphTensors:
    g = contextual_sbm(40, 2, 6, 4, 0.3, 1.0, seed=seed)
    x, ei = torch.as_tensor(g["x"]), torch.as_tensor(g["edge_index"])
    u = torch.as_tensor(laplacian_pe(g["edge_index"], 40, 4))
    m = heterophilic_edges(x, ei, 0.2)
    bins = torch.as_tensor(density_bins(node_density(g["x"], g["edge_index"]), 4))
    return GraphTensors(x, ei, u, pe_distance(u, ei), m, heterophilic_degree_ratio(m, ei, 40), bins)


def _batch_settings(in_drop: float, attn_drop: float) -> dict:
    return {"model": {**SETTINGS["model"], "in_drop": in_drop, "attn_drop": attn_drop},
            "c2gmae": SETTINGS["c2gmae"],
            "train": {"epochs": 8, "weight_decay": 2e-4, "mask_rate": 0.5, "replace_rate": 0.1, "sce_gamma": 2.0}}


RUNS = [(0, 0.01, 0), (1, 0.003, 0), (2, 0.01, 1)]  # (seed, rate, init): other graphs, rates and inits in one batch


@pytest.mark.parametrize("rung", list(LADDER))
def test_batched_loss_and_gradients_are_the_pyg_models(rung):
    """batched.py writes PyG's GATConv out on padded per-run edges (graphs of different edge counts): with dropout
    off, each run's loss and every parameter's gradient equal MaskedGraphAutoEncoder's on the same masks."""
    from icmlrepro.core.seeding import derive_seed, seed_everything
    from icmlrepro.papers.c2gmae import batched as B

    s = _batch_settings(0.0, 0.0)
    graphs = [_tiny_graph_of(seed) for seed, _, _ in RUNS]
    assert len({g.edge_index.shape[1] for g in graphs}) > 1
    models = []
    for seed, lr, init in RUNS:
        seed_everything(derive_seed(seed, "c2gmae", "init", *B.run_tag(rung, lr, init)))
        models.append(MaskedGraphAutoEncoder(6, LADDER[rung], s))
    params = {name: torch.stack([dict(m.named_parameters())[name].detach() for m in models]).requires_grad_()
              for name, _ in models[0].named_parameters()}
    pg = B.PaddedGraphs(graphs)
    net = B.BatchedRung(rung, s, pg)
    draws = [B.epoch_draws(g, LADDER[rung], s, torch.Generator().manual_seed(7)) for g in graphs]
    losses = net.losses(params, B.stack_draws(draws, pg), net.plan.draw([torch.Generator() for _ in RUNS]))
    losses.sum().backward()
    for i, (model, g) in enumerate(zip(models, graphs)):
        gen = torch.Generator().manual_seed(7)
        masked = (density_partitioned_mask(g.bins, 0.5, gen) if LADDER[rung].density else uniform_mask(40, 0.5, gen))
        assert torch.equal(masked, draws[i]["masked"])
        loss = model.loss(g, masked, gen)
        loss.backward()
        assert float(losses[i]) == pytest.approx(float(loss), rel=1e-5)
        for name, p in model.named_parameters():
            torch.testing.assert_close(params[name].grad[i], p.grad, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("rung", ["graphmae", "c2gmae"])
def test_a_run_alone_is_the_pyg_model_trained_with_adam(rung):
    """Dropout off, a batch of one trains exactly as the single PyG model under torch.optim.Adam (L2 weight decay):
    the same initialisation, masks, corruption, PE noise and steps give the same weights after 8 epochs."""
    from icmlrepro.core.seeding import derive_seed, seed_everything
    from icmlrepro.papers.c2gmae.batched import run_tag, train_batch

    s, g, (seed, lr, init) = _batch_settings(0.0, 0.0), _tiny_graph_of(1), RUNS[1]
    tag = run_tag(rung, lr, init)
    seed_everything(derive_seed(seed, "c2gmae", "init", *tag))
    model = MaskedGraphAutoEncoder(6, LADDER[rung], s)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=s["train"]["weight_decay"])
    gen = torch.Generator().manual_seed(derive_seed(seed, "c2gmae", "masks", *tag))
    for _ in range(s["train"]["epochs"]):
        model.train()
        masked = (density_partitioned_mask(g.bins, 0.5, gen) if LADDER[rung].density else uniform_mask(40, 0.5, gen))
        opt.zero_grad()
        model.loss(g, masked, gen).backward()
        opt.step()
    batched = train_batch([g], rung, [RUNS[1]], s)[0]["model"].state_dict()
    for name, w in model.state_dict().items():
        torch.testing.assert_close(batched[name], w, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("rung", ["graphmae", "c2gmae"])
def test_a_run_in_the_batch_is_the_run_alone(rung):
    """With dropout on, a run trained inside a batch (other seeds' graphs, other rates, another init) has the same
    masks, losses and weights (to float tolerance) as the run trained alone; runs in one batch stay different."""
    from icmlrepro.papers.c2gmae.batched import train_batch

    s = _batch_settings(0.2, 0.1)
    graphs = [_tiny_graph_of(seed) for seed, _, _ in RUNS]
    batch = train_batch(graphs, rung, RUNS, s)
    for g, run, inside in zip(graphs, RUNS, batch):
        alone = train_batch([g], rung, [run], s)[0]
        assert all(np.array_equal(a, b) for a, b in zip(alone["history"], inside["history"]))
        np.testing.assert_allclose(inside["losses"], alone["losses"], rtol=1e-5)
        sd = alone["model"].state_dict()
        for name, w in inside["model"].state_dict().items():
            torch.testing.assert_close(w, sd[name], atol=1e-5, rtol=1e-4)
    w0, w2 = (batch[i]["model"].state_dict()["enc_to_dec.weight"] for i in (0, 2))
    assert not torch.allclose(w0, w2)


# --- the smoke chain through Snakemake ------------------------------------------------------------


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    check_smoke_paper(smoke_run, "c2gmae", ("ladder_accuracy.png", "accuracy_vs_homophily.png",
                                            "consistency_vs_reconstruction.png", "coverage_by_density_bin.png"),
                      lambda name: name == "train_seconds")


def test_raw_feature_control_can_win_where_structure_carries_nothing():
    """The raw-feature control of the heterophilic claim is a credible competitor: on a heterophilic SBM whose
    between-class edges spread over all classes and whose features are strong (the first miniature's graphs),
    the probe on raw features beats a trained GraphMAE; on a paired SBM with weak features (the structure
    names the class) GraphMAE beats it. Planted cases, one seed, small models."""
    s = {"csbm": {"n_nodes": 200, "n_classes": 4, "n_features": 16, "avg_degree": 8, "signal": 2.0},
         "digits_knn": {"n_nodes": 200, "k": 5},
         "model": {"hidden": 16, "heads": 2, "layers": 2, "in_drop": 0.2, "attn_drop": 0.1, "pe_dim": 4, "n_basis": 4},
         "c2gmae": {**SETTINGS["c2gmae"], "n_density_bins": 4, "hetero_quantile": 0.2},
         "train": {"epochs": 60, "weight_decay": 2e-4, "mask_rate": 0.5, "replace_rate": 0.05, "sce_gamma": 3.0}}
    gaps = {}
    for name in ("csbm_h0.1_s4", "csbm_h0.1_s0.5_pair"):
        g, y = load_graph(build_graph(name, s, 0), s)
        split = node_split(len(y), 0, 0.2, 0.2)
        model, _, _ = train_rung(g, "graphmae", 0.005, s, 0)
        gaps[name] = linear_probe(model.embed(g).numpy(), y, split, 1.0)[1] - linear_probe(g.x.numpy(), y, split, 1.0)[1]
    assert gaps["csbm_h0.1_s4"] < -0.2 and gaps["csbm_h0.1_s0.5_pair"] > 0.2, gaps


def test_tuning_seeds_fix_one_rate_that_every_other_seed_trains_alone(monkeypatch):
    """``train.tune_seeds`` = k: the first k seeds train the whole grid; each rung's rate is the pick on their mean
    validation accuracy (the tie rule over their pooled validation nodes); a tuning seed reuses its model at that
    rate, every other seed trains that rate only (plus the retrain null), and every seed records the same pick."""
    from icmlrepro.papers.c2gmae import train as T

    s = {"csbm": {"n_nodes": 60, "n_classes": 3, "n_features": 8, "avg_degree": 6, "signal": 2.0},
         "model": {**SETTINGS["model"], "pe_dim": 4}, "c2gmae": {**SETTINGS["c2gmae"], "n_density_bins": 3,
                                                                   "hetero_quantile": 0.2},
         "train": {"epochs": 3, "lrs": [0.001, 0.01, 0.1], "default_lr": 0.01, "weight_decay": 0.0, "mask_rate": 0.5,
                   "replace_rate": 0.05, "sce_gamma": 2.0, "tune_seeds": 2},
         "eval": {"probe_train_fraction": 0.4, "probe_val_fraction": 0.3, "probe_c": 1.0, "n_consistency_masks": 2,
                  "coverage_window": 2, "null_rungs": ["graphmae"]},
         "rungs": ["graphmae", "pe"]}
    draws = {seed: T.load_graph(build_graph("csbm_h0.5", s, seed), s) for seed in (0, 1, 2)}
    calls = []
    real_fit = T.fit_rung
    monkeypatch.setattr(T, "fit_rung", lambda *a, **k: calls.append((a[3], a[4], a[6])) or real_fit(*a, **k))
    candidates = {seed: T.grid_runs(*draws[seed], s, seed) for seed in (0, 1)}
    assert len(calls) == 2 * 2 * 3  # two tuning seeds x two rungs x three rates
    n_val = len(T.seed_split(60, 0, s)[1])
    chosen = T.pooled_choice(candidates, s, n_val)
    for rung in s["rungs"]:
        means = [np.mean([candidates[sd][rung][i]["val_acc"] for sd in (0, 1)]) for i in range(3)]
        index, _ = choose_rate(s["train"]["lrs"], means, 0.01, 2 * n_val)
        assert chosen[rung][0] == s["train"]["lrs"][index] and chosen[rung][1]["tuned_on_seeds"] == 2
    calls.clear()
    rows0 = T.train_ladder(*draws[0], s, 0, chosen, candidates[0])[0]
    assert calls == [("graphmae", chosen["graphmae"][0], 0)]  # the tuning seed retrains only its null
    main0 = rows0[rows0.init == 0].set_index("rung")
    for rung in s["rungs"]:
        ref = candidates[0][rung][s["train"]["lrs"].index(chosen[rung][0])]
        assert main0.loc[rung, "lr"] == chosen[rung][0] and main0.loc[rung, "val_acc"] == ref["val_acc"]
    calls.clear()
    rows2 = T.train_ladder(*draws[2], s, 2, chosen)[0]
    assert sorted(calls) == sorted([("graphmae", chosen["graphmae"][0], 2)] * 2 + [("pe", chosen["pe"][0], 2)])
    main2 = rows2[rows2.init == 0].set_index("rung")
    for col in ("lr", "tuned_interior", "tuning_tie", "selection_se"):
        assert list(main2[col]) == list(main0[col])
    calls.clear()  # without tuning seeds a seed picks its own rate from its own whole grid
    T.train_ladder(*draws[2], s, 2)
    assert len(calls) == 2 * 3 + 1
