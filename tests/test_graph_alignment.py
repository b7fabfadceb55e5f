"""Defining properties of the graph-alignment reproduction: density-keeping corruption, disjoint train
and test base graphs, the siamese loss, top-k / LAP metrics and the references on hand-computed cases,
rank stability, tuning, the controls of the claims, and the smoke chain."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icmlrepro.core import verdicts as V
from icmlrepro.core.claims import load_claims
from icmlrepro.core.metrics import MetricsFile
from icmlrepro.papers.graph_alignment import alignment as A
from icmlrepro.papers.graph_alignment import data as D
from icmlrepro.papers.graph_alignment import evaluate as E
from icmlrepro.papers.graph_alignment import graphs as G
from icmlrepro.papers.graph_alignment.batching import loader
from icmlrepro.papers.graph_alignment.models import (ANISOTROPIC, INPUTS, ISOTROPIC, MODELS, AlignmentGNN,
                                                     degree_histogram)
from icmlrepro.papers.graph_alignment.train import reference_scores
from icmlrepro.papers.graph_alignment.transfer import laplacian_pe
from icmlrepro.papers.graph_alignment.tune import choose

from .conftest import check_smoke_paper
from .test_claims_registry import substitute_controls


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
    real = G.real_graphs()
    for _ in range(10):
        edges, n, gi, nodes = G.bfs_subgraph(real, 18, rng)
        g = nx.Graph(list(map(tuple, edges.T)))
        assert n == 18 and g.number_of_nodes() == 18 and nx.is_connected(g)
        # the relabelled edges are exactly the original graph's edges among the recorded nodes
        original = {frozenset((int(nodes[u]), int(nodes[v]))) for u, v in edges.T}
        assert original == {frozenset(e) for e in real[gi].subgraph(nodes.tolist()).edges()}


def test_real_node_split_gives_connected_disjoint_halves():
    import networkx as nx

    real = G.real_graphs()
    for seed in range(20):
        parts = G.split_real(real, np.random.default_rng(seed))
        for (gi, tr), (gj, te) in zip(parts["train"], parts["test"]):
            assert gi == gj and not set(tr.nodes) & set(te.nodes)
            assert nx.is_connected(tr) and nx.is_connected(te)
            assert abs(tr.number_of_nodes() - te.number_of_nodes()) <= 0.25 * real[gi].number_of_nodes()


SMALL = {"seeds": [0], "sources": ["er", "real"], "noises": [0.05, 0.2, 0.3], "main_noise": 0.2, "n_nodes": [14, 18],
         "degree": 4.0, "n_train_pairs": 24, "n_test_pairs": 12, "tune": {"source": "real"},
         "transfer": {"source": "real", "n_regression_train": 2, "n_regression_test": 2, "regression_n_nodes": [14, 18],
                      "n_recon_train": 8, "n_recon_test": 8}}


def test_train_and_test_base_graphs_do_not_overlap():
    """Every split the data stage writes is disjoint: no real node in both, no repeated ER graph."""
    data = D.build(SMALL)
    splits = [*data[0]["alignment"].values(), data[0]["transfer"]["reconstruction"], data["tune"]]
    for split in splits:
        assert D.overlap(split) == []
        real_pairs = [p for part in split.values() for p in part if "nodes" in p]
        for p in real_pairs:  # origins recorded, one node per base node
            assert len(set(p["nodes"].tolist())) == p["n"]
    assert any("nodes" in p for p in data[0]["alignment"]["real@0.2"]["test"])


def test_overlap_audit_catches_planted_leaks():
    data = D.build(SMALL)
    for key in ("real@0.2", "er@0.2"):
        split = data[0]["alignment"][key]
        leaked = {"train": split["train"], "test": [*split["test"], split["train"][3]]}
        assert D.overlap(leaked), key
        with pytest.raises(ValueError, match="overlap"):
            D.check_disjoint(key, leaked)
    # drawing test subgraphs from all real nodes (the old sampler) shares nodes with the training pairs
    rng = np.random.default_rng(0)
    parts = G.split_real(G.real_graphs(), rng)
    old = {"train": [D._tensor_pair(G.make_pair("real", 16, 4.0, 0.1, rng, parts["train"])) for _ in range(20)],
           "test": [D._tensor_pair(G.make_pair("real", 16, 4.0, 0.1, rng, G.real_graphs())) for _ in range(20)]}
    assert D.overlap(old)


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
    # float32 rounding noise on equal scores is a tie too (it depends on degree through summation order)
    noisy = np.ones((4, 4)) + np.diag([1e-7] * 4)
    assert not A.topk_hits(noisy, np.arange(4), ks=(1,))[1].any()


def test_references_on_hand_computed_pairs():
    # a star with centre 0 and its copy relabelled by perm: the degree matcher finds the centre only
    base = torch.tensor([[0, 0, 0], [1, 2, 3]])
    perm = torch.tensor([2, 0, 1, 3])
    corr = torch.sort(perm[base], dim=0).values
    refs = reference_scores([{"n": 4, "base": base, "corrupted": corr, "perm": perm}])
    assert refs["chance"]["top1"] == pytest.approx(0.25) and refs["chance"]["top3"] == pytest.approx(0.75)
    assert refs["chance"]["lap"] == pytest.approx(0.25)
    assert refs["degree_reference"]["top1"] == pytest.approx(0.25)  # leaves tie with each other: never found
    assert refs["degree_reference"]["top3"] == pytest.approx(1.0)


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
def test_zoo_has_four_isotropic_and_six_anisotropic_equivariant_models():
    import torch_geometric.nn as gnn

    assert len(ISOTROPIC) >= 4 and {"pna", "gps"} <= set(ANISOTROPIC)
    rng = np.random.default_rng(5)
    pair = G.make_pair("er", 14, 4.0, 0.0, rng)
    pair = {k: (torch.as_tensor(v) if k != "n" else v) for k, v in pair.items()}
    batch = next(iter(loader([pair], 1, False, 0)))
    hist = degree_histogram([(pair["base"], 14)], 10)
    assert int(hist.sum()) == 14
    for inputs in INPUTS:
        for kind in MODELS:
            torch.manual_seed(0)
            model = AlignmentGNN(kind, 8, 2, 2, 10, inputs, hist).eval()
            with torch.no_grad():
                hb = model(batch.edge_index_b, 14, batch.batch)
                hc = model(batch.edge_index_c, 14, batch.batch)
            # relabelling the graph relabels the embeddings: an isomorphic copy gets the same node embeddings
            assert torch.allclose(hc[pair["perm"]], hb, atol=1e-5), (kind, inputs)
    # PyG's own layers, not look-alikes
    assert isinstance(AlignmentGNN("pna", 8, 1, 2, 10, "ones", hist).convs[0], gnn.PNAConv)
    assert isinstance(AlignmentGNN("gps", 8, 1, 2, 10, "ones", hist).convs[0], gnn.GPSConv)


def test_attention_models_are_blind_with_all_ones_inputs():
    """The stated reason the degree input is reported beside the headline: with all-ones features,
    GAT-style attention averages identical vectors, so every node gets the same embedding (top-1 = 0)."""
    rng = np.random.default_rng(7)
    pair = {k: (torch.as_tensor(v) if k != "n" else v) for k, v in G.make_pair("er", 16, 4.0, 0.1, rng).items()}
    batch = next(iter(loader([pair], 1, False, 0)))
    for kind, blind in (("gat", True), ("transformer", True), ("gcn", False), ("gatedgcn", False)):
        torch.manual_seed(0)
        with torch.no_grad():
            h = AlignmentGNN(kind, 8, 2, 2, 10, "ones").eval()(batch.edge_index_b, 16, batch.batch)
        assert torch.allclose(h, h[:1].expand_as(h), atol=1e-5) == blind, kind
        if blind:
            assert A.pair_scores((h @ h.T).double().numpy(), pair["perm"].numpy())["top1"] == 0.0


def test_wl_colours_and_ceiling_on_hand_cases():
    cycle = np.array([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    assert G.wl_colours(cycle, 6).tolist() == [0] * 6  # vertex-transitive: one colour
    assert G.wl_topk_ceiling(cycle, 6, 1) == pytest.approx(1 / 6) and G.wl_topk_ceiling(cycle, 6, 3) == 0.5
    path = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    col = G.wl_colours(path, 5)
    assert col[0] == col[4] and col[1] == col[3] and len(set(col.tolist())) == 3
    assert G.wl_topk_ceiling(path, 5, 1) == pytest.approx(3 / 5)
    # a star plus a pendant path: the centre, the path nodes and the leaves split as WL says
    star = np.array([[0, 0, 0, 0, 4], [1, 2, 3, 4, 5]])
    assert G.wl_topk_ceiling(star, 6, 1) == pytest.approx(4 / 6)


@pytest.mark.parametrize("inputs", INPUTS)
def test_no_model_beats_the_wl_ceiling(inputs):
    """The ceiling the calibration gates use is a bound for every layer of the zoo: on a graph whose WL
    colours are few (two disjoint-ish cycles with pendants), trained or not, no model's top-1 exceeds it."""
    rng = np.random.default_rng(8)
    edges = np.array([[0, 1, 2, 3, 4, 5, 0, 6, 7, 8, 9], [1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 6]])
    n = 10
    corr, perm = G.permute(edges, n, rng)
    pair = {"n": n, "base": torch.as_tensor(edges), "corrupted": torch.as_tensor(corr), "perm": torch.as_tensor(perm)}
    ceiling = reference_scores([pair])["wl_ceiling"]["top1"]
    assert ceiling == pytest.approx(G.wl_topk_ceiling(edges, n, 1)) and ceiling < 1
    batch = next(iter(loader([pair], 1, False, 0)))
    hist = degree_histogram([(pair["base"], n)], 10)
    for kind in MODELS:
        torch.manual_seed(1)
        model = AlignmentGNN(kind, 8, 2, 2, 10, inputs, hist).eval()
        with torch.no_grad():
            hb = model(batch.edge_index_b, n, batch.batch)
            hc = model(batch.edge_index_c, n, batch.batch)
        top1 = A.pair_scores((hb @ hc.T).double().numpy(), perm)["top1"]
        assert top1 <= ceiling + 1e-9, (kind, inputs, top1, ceiling)


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


def test_fast_loaders_give_pyg_dataloaders_batches():
    """The plain-concatenation loaders (a speed-up) make the same tensors, in the same shuffled order over
    epochs (same generator draws), as PyG's DataLoader over PairData / regression Data."""
    from torch_geometric.loader import DataLoader as PygLoader

    from icmlrepro.papers.graph_alignment.batching import to_data
    from icmlrepro.papers.graph_alignment.transfer import graph_loader, regression_data

    rng = np.random.default_rng(9)
    pairs = [{k: (torch.as_tensor(v) if k != "n" else v) for k, v in G.make_pair("er", int(n), 3.0, 0.1, rng).items()}
             for n in rng.integers(6, 14, size=11)]
    graphs = []
    for n in rng.integers(8, 16, size=11):
        edges, y = G.regression_graph(int(n), 3.0, rng)
        graphs.append({"n": int(n), "edges": torch.as_tensor(edges), "y": y})
    reg = regression_data(graphs, "laplacian", {}, 3)
    cases = [(lambda s, g: PygLoader([to_data(p) for p in pairs], batch_size=4, shuffle=s, generator=g),
              lambda s, g: loader(pairs, 4, s, 17), ("edge_index_b", "edge_index_c", "perm", "batch")),
             (lambda s, g: PygLoader(reg, batch_size=4, shuffle=s, generator=g),
              lambda s, g: graph_loader(reg, 4, s, g), ("deg", "pe", "y", "batch"))]
    for make_ref, make_new, keys in cases:
        for shuffle in (True, False):
            g_ref, g_new = torch.Generator().manual_seed(17), torch.Generator().manual_seed(17)
            ref_loader, new_loader = make_ref(shuffle, g_ref), make_new(shuffle, g_new)
            for _ in range(3):  # epochs: the shuffles must follow the same generator draws
                for a, b in zip(ref_loader, new_loader, strict=True):
                    assert a.num_graphs == b.num_graphs
                    for key in keys:
                        x, z = getattr(a, key), getattr(b, key)
                        assert x.dtype == z.dtype and torch.equal(x, z), key


def test_speedups_keep_the_training_bits(monkeypatch):
    """foreach Adam (a speed-up) gives bit-identical trained scores."""
    from icmlrepro.papers.graph_alignment import train as T

    rng = np.random.default_rng(10)
    pairs = [{k: (torch.as_tensor(v) if k != "n" else v) for k, v in G.make_pair("er", 10, 3.0, 0.1, rng).items()}
             for _ in range(6)]
    split = {"train": pairs[:4], "test": pairs[4:]}
    p = {"hidden": 8, "layers": 2, "heads": 2, "max_degree": 8, "epochs": 2, "batch_size": 2}

    def scores():
        return {kind: T.train_one(kind, "degree", split, p, 0.01, 0, "t")[1] for kind in ("gcn", "pna", "gps")}

    fast = scores()
    adam = torch.optim.Adam
    monkeypatch.setattr(torch.optim, "Adam", lambda params, lr, foreach=None: adam(params, lr=lr, foreach=False))
    slow = scores()
    for kind in fast:
        assert {k: v for k, v in fast[kind].items() if k != "train_seconds"} == \
            {k: v for k, v in slow[kind].items() if k != "train_seconds"}, kind
