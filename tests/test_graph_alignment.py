"""Defining properties of the graph-alignment reproduction: density-keeping corruption, the siamese
loss, top-k / LAP metrics on hand-computed cases, rank stability, and the smoke chain."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icmlrepro.papers.graph_alignment import alignment as A
from icmlrepro.papers.graph_alignment import graphs as G
from icmlrepro.papers.graph_alignment.batching import loader
from icmlrepro.papers.graph_alignment.models import ANISOTROPIC, ISOTROPIC, MODELS, AlignmentGNN
from icmlrepro.papers.graph_alignment.transfer import laplacian_pe

from .conftest import check_smoke_paper


# --- data ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("noise", [0.05, 0.2, 0.35])
def test_corruption_keeps_the_expected_edge_count(noise):
    rng = np.random.default_rng(0)
    base = G.er_graph(30, 5.0, rng)
    counts = [G.corrupt(base, 30, noise, rng).shape[1] for _ in range(3000)]
    m = base.shape[1]
    assert abs(np.mean(counts) - m) < 4 * np.std(counts) / np.sqrt(len(counts)) + 0.05
    # ... and it really corrupts: the share of base edges kept is 1 - noise
    kept = []
    for _ in range(300):
        c = G.corrupt(base, 30, noise, rng)
        kept.append(len(set(map(tuple, c.T)) & set(map(tuple, base.T))) / m)
    assert np.mean(kept) == pytest.approx(1 - noise, abs=0.02)


def test_zero_noise_pair_is_an_isomorphic_shuffled_copy():
    rng = np.random.default_rng(1)
    pair = G.make_pair("er", 20, 4.0, 0.0, rng)
    a, c = G.adjacency(pair["base"], 20), G.adjacency(pair["corrupted"], 20)
    perm = pair["perm"]
    assert np.array_equal(c[np.ix_(perm, perm)], a)
    assert not np.array_equal(perm, np.arange(20))


def test_real_subgraphs_are_connected_pieces_of_real_graphs():
    import networkx as nx

    rng = np.random.default_rng(2)
    for _ in range(10):
        edges, n = G.bfs_subgraph(G.real_graphs(), 18, rng)
        g = nx.Graph(list(map(tuple, edges.T)))
        assert n == 18 and g.number_of_nodes() == 18 and nx.is_connected(g)


# --- loss and metrics ---------------------------------------------------------------------------
def test_lap_recovers_the_permutation_exactly_on_identical_embeddings():
    """At zero noise a model's embeddings of the copy are the base embeddings shuffled: LAP finds perm."""
    rng = np.random.default_rng(3)
    n = 15
    eb = rng.normal(size=(n, 8))
    perm = rng.permutation(n)
    ec = np.empty_like(eb)
    ec[perm] = eb  # corrupted node perm[i] is base node i
    sim = eb @ ec.T
    assert np.array_equal(A.lap_matching(sim), perm)
    assert A.pair_scores(sim, perm)["lap"] == 1.0


def test_topk_and_lap_on_a_hand_computed_matrix():
    sim = np.array([[0.9, 0.1, 0.5],   # partner 0: best -> top1
                    [0.8, 0.7, 0.1],   # partner 1: second -> top3 only
                    [0.2, 0.3, 0.1]])  # partner 2: third -> only top3 (of 3)
    perm = np.array([0, 1, 2])
    hits = A.topk_hits(sim, perm, ks=(1, 2, 3))
    assert hits[1].tolist() == [True, False, False]
    assert hits[2].tolist() == [True, True, False]
    assert hits[3].tolist() == [True, True, True]
    # row-softmax then Hungarian: the best one-to-one matching is the identity here
    assert A.lap_matching(sim).tolist() == [0, 1, 2]


def test_ties_count_against_the_model():
    sim = np.ones((4, 4))
    hits = A.topk_hits(sim, np.arange(4), ks=(1, 3))
    assert not hits[1].any() and not hits[3].any()


def test_siamese_loss_is_smallest_for_aligned_embeddings():
    rng = np.random.default_rng(4)
    n = 10
    e = torch.nn.functional.normalize(torch.as_tensor(rng.normal(size=(n, 6)), dtype=torch.float32), dim=1) * 5
    target = torch.arange(n)[None]
    mask = torch.ones(1, n, dtype=torch.bool)
    aligned = A.alignment_loss((e @ e.T)[None], mask, mask, target)
    shuffled = e[torch.as_tensor(rng.permutation(n))]
    wrong = A.alignment_loss((e @ shuffled.T)[None], mask, mask, target)
    assert aligned < 0.05 < wrong
    # the loss is exactly -log softmax at the partner, averaged over rows
    sim = torch.tensor([[[2.0, 0.0], [1.0, 1.0]]])
    m2 = torch.ones(1, 2, dtype=torch.bool)
    expect = -(np.log(np.exp(2) / (np.exp(2) + 1)) + np.log(0.5)) / 2
    assert float(A.alignment_loss(sim, m2, m2, torch.tensor([[0, 1]]))) == pytest.approx(expect, rel=1e-6)


def test_loss_ignores_padded_nodes():
    sim = torch.tensor([[[3.0, 0.0, 100.0], [0.0, 3.0, 100.0], [100.0, 100.0, 100.0]]])
    mask = torch.tensor([[True, True, False]])
    full = A.alignment_loss(sim[:, :2, :2], mask[:, :2], mask[:, :2], torch.tensor([[0, 1]]))
    padded = A.alignment_loss(sim, mask, mask, torch.tensor([[0, 1, 0]]))
    assert float(padded) == pytest.approx(float(full))


# --- rank stability -----------------------------------------------------------------------------
def test_rank_stability_on_hand_cases():
    same = np.array([[0.1, 0.2, 0.3, 0.4]] * 3)
    assert A.leave_one_out_rank_stability(same).tolist() == [1.0, 1.0, 1.0]
    # seed 0 reverses the others' order; the other two agree with each other
    mixed = np.array([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4]])
    s = A.leave_one_out_rank_stability(mixed)
    assert s[0] == pytest.approx(-1.0)
    # seed 1 vs mean of seeds 0 and 2 (all tied at 0.25): no ranking information
    assert s[1] == pytest.approx(0.0) and s[2] == pytest.approx(0.0)
    flat = np.full((3, 4), 0.5)  # every model equal: no information either
    assert A.leave_one_out_rank_stability(flat).tolist() == [0.0, 0.0, 0.0]


# --- models, batching, positional encodings -----------------------------------------------------
def test_zoo_has_four_isotropic_and_four_anisotropic_equivariant_models():
    assert len(ISOTROPIC) >= 4 and len(ANISOTROPIC) >= 4
    rng = np.random.default_rng(5)
    pair = G.make_pair("er", 14, 4.0, 0.0, rng)
    pair = {k: (torch.as_tensor(v) if k != "n" else v) for k, v in pair.items()}
    batch = next(iter(loader([pair], 1, False, 0)))
    for kind in MODELS:
        torch.manual_seed(0)
        model = AlignmentGNN(kind, 8, 2, 2, 10).eval()
        with torch.no_grad():
            hb = model(batch.edge_index_b, 14)
            hc = model(batch.edge_index_c, 14)
        # relabelling the graph relabels the embeddings: an isomorphic copy gets the same node embeddings
        assert torch.allclose(hc[pair["perm"]], hb, atol=1e-5), kind


def test_batching_keeps_each_pair_separate():
    rng = np.random.default_rng(6)
    pairs = [{k: (torch.as_tensor(v) if k != "n" else v) for k, v in G.make_pair("er", n, 3.0, 0.1, rng).items()}
             for n in (8, 11, 13)]
    batch = next(iter(loader(pairs, 3, False, 0)))
    offsets = np.cumsum([0, 8, 11])
    for i, (p, off) in enumerate(zip(pairs, offsets)):
        sel = (batch.batch[batch.edge_index_b[0]] == i)
        assert torch.equal(batch.edge_index_b[:, sel] - off, torch.cat([p["base"], p["base"].flip(0)], 1))
    assert torch.equal(batch.perm, torch.cat([p["perm"] for p in pairs]))


def test_laplacian_pe_is_the_nontrivial_spectrum():
    edges = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])  # 4-cycle
    pe = laplacian_pe(edges, 4, 6)
    assert pe.shape == (4, 6) and torch.all(pe[:, 3:] == 0)
    assert torch.allclose(pe[:, :3].sum(0), torch.zeros(3), atol=1e-6)  # orthogonal to the constant vector


# --- the smoke chain through Snakemake ----------------------------------------------------------


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "graph_alignment",
                                ("accuracy_vs_difficulty.png", "rank_stability_vs_difficulty.png", "transfer.png"),
                                lambda name: name.startswith("train_seconds"))
    for m in metrics.metrics.values():
        assert len(m.values) == len(metrics.replicates)
