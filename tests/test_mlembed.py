"""ML-Embed: the MRL weighting and InfoNCE on hand-computed cases, MEL's factorisation (exact at full rank,
the best rank-r' approximation below), exit and truncation shapes, the rank sampler, the synthetic languages
(no shared token between a query and its target, order twins, no test concept in training, resource = amount of
training data, redrawn per seed), the hard negatives, and the gates failing on planted idle depth / easy groups."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pandas as pd
import pytest
import torch

from icmlrepro.core.claims import load_claims
from icmlrepro.core.verdicts import judge_claim, judge_gate, judge_gates
from icmlrepro.papers.mlembed import data, evaluate, losses, model
from icmlrepro.papers.mlembed.evaluate import build_metrics
from icmlrepro.papers.mlembed.train import ARMS, hard_negatives, new_encoder, training_pairs

SMALL = {"n_high": 2, "n_low": 2, "n_syllables": 6, "n_atoms": 12, "phrase_len": 3, "n_concept_sets": 60,
         "n_test_sets": 10, "n_val_sets": 6, "low_fraction": 0.2}


@pytest.fixture(scope="module")
def tables():
    return data.build_tables(SMALL, 3)


def test_mrl_weights_follow_the_published_formula():
    w = losses.mrl_weights([8, 16, 32, 64], 64)
    # n = 1 for 64, 2 for 32, 3 for 16, 4 for 8; weight 1 / (n sqrt(64 / dim))
    assert w == pytest.approx({64: 1.0, 32: 1 / (2 * math.sqrt(2)), 16: 1 / 6, 8: 1 / (4 * math.sqrt(8))})
    assert losses.mrl_dims(64, 8) == [8, 16, 32, 64] and losses.mrl_dims(48, 8) == [8, 16, 32, 48]


def test_info_nce_on_a_hand_case():
    # two orthonormal queries, each with its own positive and one hard negative
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    pos = q.clone()
    neg = torch.tensor([[[0.0, 1.0]], [[-1.0, 0.0]]])
    tau = 0.5
    # query 0 logits: [1, 0 | 0] / tau; query 1: [0, 1 | 0] / tau
    expect = -math.log(math.exp(2) / (math.exp(2) + 2))
    assert float(losses.info_nce(q, pos, neg, tau)) == pytest.approx(expect, rel=1e-6)
    # the same concept in the batch is masked, not a negative: query 0's in-batch term vanishes
    both = torch.tensor([7, 7])
    masked = -math.log(math.exp(2) / (math.exp(2) + 1))
    assert float(losses.info_nce(q, pos, neg, tau, both)) == pytest.approx(masked, rel=1e-6)


def test_matryoshka_loss_is_the_weighted_sum_over_dims_and_the_mean_over_exits():
    g = torch.Generator().manual_seed(0)
    qs = [torch.randn(4, 16, generator=g) for _ in range(2)]
    ps = [torch.randn(4, 16, generator=g) for _ in range(2)]
    ns = [torch.randn(4, 2, 16, generator=g) for _ in range(2)]
    dims = [4, 8, 16]
    w = losses.mrl_weights(dims, 16)
    by_hand = np.mean([sum(w[m] * float(losses.info_nce(q[:, :m], p[:, :m], n[..., :m], 0.05)) for m in dims)
                       for q, p, n in zip(qs, ps, ns)])
    assert float(losses.matryoshka_loss(qs, ps, ns, dims, 0.05)) == pytest.approx(by_hand, rel=1e-5)
    # a wrong weighting (uniform) gives another value: the test would catch it
    uniform = np.mean([sum(float(losses.info_nce(q[:, :m], p[:, :m], n[..., :m], 0.05)) for m in dims)
                       for q, p, n in zip(qs, ps, ns)])
    assert abs(uniform - by_hand) > 1e-3


def test_mel_factorisation_equals_E_at_full_rank_and_is_the_best_low_rank_fit():
    E = torch.randn(50, 16, generator=torch.Generator().manual_seed(1))
    U, Vm = model.svd_factors(E)
    assert torch.allclose(U @ Vm, E, atol=1e-5)
    s = torch.linalg.svdvals(E)
    for r in (2, 8):
        err = torch.linalg.norm(E - U[:, :r] @ Vm[:r])
        assert float(err) == pytest.approx(float(torch.sqrt((s[r:] ** 2).sum())), rel=1e-4)  # Eckart-Young
    enc = model.Encoder(50, 16, 2, 2, 32, 8, mel=True)
    ids = torch.tensor([[3, 4, 0]])
    plain = model.Encoder(50, 16, 2, 2, 32, 8, mel=False)
    plain.tok.weight.data = (enc.U @ enc.V).detach()
    assert torch.allclose(enc.embed(ids, 16), plain.embed(ids), atol=1e-5)


def test_exits_and_truncation_shapes():
    torch.manual_seed(0)
    assert model.exit_layers(4) == [1, 2, 4] and model.exit_layers(6) == [1, 2, 4, 6] and model.exit_layers(1) == [1]
    enc = model.Encoder(40, 16, 4, 2, 32, 10, mel=True).eval()
    ids = torch.randint(1, 40, (5, 7))
    outs = enc(ids, exits=[1, 2, 4], rank=4)
    assert [tuple(o.shape) for o in outs] == [(5, 16)] * 3
    # an exit's embedding does not depend on later layers
    with torch.no_grad():
        a = enc(ids, exits=[1], rank=4)[0]
        enc.layers[1].linear1.weight.mul_(-2.0)  # (adding a constant would vanish: a pre-LN input sums to ~0)
        assert torch.allclose(enc(ids, exits=[1], rank=4)[0], a) and not torch.allclose(enc(ids, exits=[2], rank=4)[0], outs[1])
    # padding does not change the pooled embedding
    padded = torch.cat([ids, torch.zeros(5, 3, dtype=torch.long)], 1)
    with torch.no_grad():
        assert torch.allclose(enc(padded, exits=[4], rank=4)[0], enc(ids, exits=[4], rank=4)[0], atol=1e-5)
    # parameter counts shrink along rank and depth
    p = {(r, l): model.sub_model_params(40, 16, 4, 2, 32, 10, r, l) for r in (4, 16) for l in (1, 4)}
    assert p[(4, 1)] < p[(16, 1)] < p[(16, 4)] and p[(4, 1)] < p[(4, 4)]


def test_rank_sampler_is_proportional_to_rank():
    rng = np.random.default_rng(0)
    draws = np.array([losses.sample_rank([8, 16, 32, 64], rng) for _ in range(6000)])
    share = {r: float((draws == r).mean()) for r in (8, 16, 32, 64)}
    assert share == pytest.approx({8: 8 / 120, 16: 16 / 120, 32: 32 / 120, 64: 64 / 120}, abs=0.02)


def test_retrieval_ranks_on_a_hand_case():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    c = torch.tensor([[1.0, 0.1], [0.1, 1.0], [-1.0, 0.0]])
    assert evaluate.retrieval_ranks(q, c, np.array([0, 0, 2])).tolist() == [1, 2, 3]


def test_query_and_target_share_no_token_and_words_need_two_tokens(tables):
    pairs, langs, concepts = tables
    eng = {int(c): set(ids) for c, ids in zip(concepts["concept"], concepts["ids"])}
    assert all(not set(ids) & eng[int(c)] for c, ids in zip(pairs["concept"], pairs["ids"]))
    # scripts are disjoint between languages (no surface overlap at all)
    scripts = [set(np.concatenate([np.asarray(w) for w in lex]).tolist()) for lex in langs["lexicon"]]
    assert all(not a & b for i, a in enumerate(scripts) for b in scripts[i + 1:])
    # every syllable serves several words: a single token does not name a meaning
    lex = np.stack([np.asarray(w) for w in langs["lexicon"].iloc[1]])
    assert len({tuple(w) for w in lex.tolist()}) == SMALL["n_atoms"]
    assert np.bincount(lex[:, 0]).max() >= 2


def test_order_twins_and_splits(tables):
    pairs, langs, concepts = tables
    for _, g in concepts.groupby("set"):
        assert len(g) == 2 and sorted(g["atoms"].iloc[0]) == sorted(g["atoms"].iloc[1])
        assert list(g["atoms"].iloc[0]) != list(g["atoms"].iloc[1]) and g["split"].nunique() == 1
    tr = pairs[pairs["split"] == "train"]
    held = set(concepts.loc[concepts["split"] != "train", "concept"])
    assert not set(tr["concept"]) & held and evaluate.test_leaks(pairs) == 0
    planted = pairs.copy()
    planted.loc[planted.index[planted["split"] == "test"][0], "split"] = "train"
    assert evaluate.test_leaks(planted) == 1  # the audit catches a planted leak
    # every non-English word order differs from English's
    assert all(list(o) != list(range(SMALL["phrase_len"])) for o in langs.loc[langs["lang"] != data.PIVOT, "order"])


def test_resource_is_training_data_amount_and_the_highres_arm_sees_no_low_language(tables):
    pairs, langs, concepts = tables
    n_train = int((concepts["split"] == "train").sum())
    counts = langs.set_index("lang")["n_train_pairs"]
    for r in langs.itertuples():
        expect = {"high": n_train, "low": round(SMALL["low_fraction"] * n_train), "pivot": 0}[r.resource]
        assert counts[r.lang] == expect
        n_test = int(((pairs["lang"] == r.lang) & (pairs["split"] == "test")).sum())
        assert r.resource == "pivot" or n_test == 2 * SMALL["n_test_sets"]  # same test items in every group
    assert set(training_pairs(pairs, ARMS["3dml_highres"][3])["resource"]) == {"high"}


def test_data_redrawn_per_seed_and_deterministic():
    a, b, c = data.build_tables(SMALL, 3), data.build_tables(SMALL, 3), data.build_tables(SMALL, 4)
    assert a[0]["ids"].map(tuple).tolist() == b[0]["ids"].map(tuple).tolist()
    assert a[1]["lexicon"].map(str).tolist() != c[1]["lexicon"].map(str).tolist()


def test_hard_negatives_swap_order_and_replace_a_word():
    rng = np.random.default_rng(0)
    atoms = np.array([[0, 1, 2], [5, 6, 7]])
    neg = hard_negatives(atoms, 3, 12, rng)
    for i in range(2):
        assert sorted(neg[i, 0]) == sorted(atoms[i]) and list(neg[i, 0]) != list(atoms[i])  # word order
        for j in (1, 2):
            assert (neg[i, j] != atoms[i]).sum() == 1  # one word's meaning


def test_untrained_encoder_is_near_chance(tables):
    pairs, langs, concepts = tables
    s = {"d": 16, "layers": 2, "heads": 2, "ff": 32, "smallest_dim": 4, "ranks": [4, 16], **SMALL}
    enc = new_encoder(s, 3, False).eval()
    rows = evaluate.score_model(enc, evaluate.eval_data(pairs, concepts), s)
    full = [r for r in rows if r["rank"] == 16 and r["layer"] == 2 and r["dim"] == 16 and r["group"] == "all"][0]
    assert full["r1"] < 0.25  # 20 test concepts: chance is 0.05


def _planted_metrics(depth_gain: float, low_bonus: float, seeds=(0, 1, 2, 3, 4), low_shift=None):
    """A metrics file from a planted grid: every arm 0.6 at full size, layer 1 lower by ``depth_gain``; the
    untrained encoder at 0.05, low-resource group easier by ``low_bonus``; ``low_shift`` {arm: delta} moves an
    arm's low-resource recall (per seed, alternating around the delta so the paired differences vary)."""
    s = {"scale": "smoke", "seeds": list(seeds), "d": 16, "layers": 2, "heads": 2, "ff": 32, "phrase_len": 3,
         "smallest_dim": 8, "ranks": [8, 16], "arms": list(ARMS), "n_high": 2, "n_low": 2, "n_syllables": 6}
    rows = []
    for seed, arm, rank, layer, dim, grp in product(seeds, [evaluate.RANDOM, *ARMS], [8, 16], [1, 2], [8, 16],
                                                     evaluate.GROUPS):
        base = 0.05 if arm == evaluate.RANDOM else 0.6 - (depth_gain if layer == 1 else 0.0)
        if arm == evaluate.RANDOM and grp == "low":
            base += low_bonus
        if grp == "low" and arm in (low_shift or {}):
            base += low_shift[arm] + (0.01 if seed % 2 else -0.01)
        rows.append({"seed": seed, "arm": arm, "rank": rank, "layer": layer, "dim": dim, "group": grp,
                     "r1": base + 0.01 * seed, "mrr": base, "params": 1000 * layer + rank, "n": 10})
    costs = [{"seed": sd, "arm": a, "train_seconds": 1.0} for sd in seeds for a in ARMS]
    costs += [{"seed": sd, "arm": "encode", "layer": ly, "ms_per_1k": 1.0} for sd in seeds for ly in (1, 2)]
    pairs = pd.DataFrame({"seed": [0, 0], "concept": [1, 2], "split": ["train", "test"]})
    tuning = {a: {"lr": 0.003, "grid": [0.0015, 0.003, 0.006], "se": 0.02, "default": 0.003, "interior": True,
                  "moved_by_tie": False, "tied": [0.003], "val_r1": [0.1, 0.2, 0.1], "n_val": 100} for a in ARMS}
    return build_metrics(pd.DataFrame(rows), pd.DataFrame(costs), pairs, s, tuning)


def test_gates_fail_on_a_planted_idle_depth_and_a_planted_easy_low_group():
    pc = load_claims("mlembed")
    gates = {g.id: g for g in pc.gates}
    good = _planted_metrics(depth_gain=0.2, low_bonus=0.0)
    assert judge_gate(gates["depth_useful"], good).state == "holds"
    assert judge_gate(gates["overlap_equalised"], good).state == "holds"
    assert judge_gate(gates["baseline_band"], good).state == "holds"
    idle = _planted_metrics(depth_gain=0.0, low_bonus=0.2)
    assert judge_gate(gates["depth_useful"], idle).state != "holds"
    assert judge_gate(gates["overlap_equalised"], idle).state == "fails"
    assert good.get("tuned_interior.plain").values == [1.0] * 5
    assert good.get("test_concept_pairs_in_training").values == [0.0] * 5


@pytest.mark.parametrize("shift, expected", [({"plain": 0.1}, "not reproduced"),  # the control wins
                                             ({}, "not reproduced"),  # the recipe adds nothing
                                             ({"3dml": 0.1}, "reproduced")])
def test_low_resource_strength_can_be_lost_to_the_plain_model_trained_on_the_same_data(shift, expected):
    """The control of ``low_resource_strength`` is the plain recipe on the same multilingual data: where it is as
    good or better on the low-resource languages the claim must fail, however far above the floor 3D-ML is."""
    pc = load_claims("mlembed")
    metrics = _planted_metrics(depth_gain=0.2, low_bonus=0.0, low_shift=shift)
    claim = next(c for c in pc.claims if c.id == "low_resource_strength")
    gates = judge_gates(pc, metrics)
    result = judge_claim(claim, metrics, gates=tuple(gates[g.id] for g in pc.gates_of(claim)))
    assert result.verdict == expected, (shift, result.verdict, result.reason)


# --- the smoke chain through Snakemake ------------------------------------------------------------
from .conftest import check_smoke_paper  # noqa: E402


@pytest.mark.integration
def test_smoke_chain_outputs_and_verdicts(smoke_run):
    metrics = check_smoke_paper(smoke_run, "mlembed", ("recall_along_axes.png", "quality_cost_frontier.png",
                                                       "language_groups.png"),
                                is_timing=lambda n: n.startswith(("encode_ms", "train_seconds")))
    assert metrics.get("test_concept_pairs_in_training").values == [0.0] * len(metrics.replicates)
    assert metrics.get("params@rank4.layer1").values[0] < metrics.get("params@rank16.layer2").values[0]
    assert metrics.get("lr.plain").values[0] in (0.0015, 0.003, 0.006)


def test_lifecycle_claim_compares_each_cut_with_the_strongest_arm_at_that_cut():
    """3D-ML above the plain model but below MRL at the output-dim cut is not 'comprehensive efficiency'."""
    from icmlrepro.core import verdicts as V
    from icmlrepro.core.claims import load_claims
    from icmlrepro.core.metrics import MetricsFile

    claim = {c.id: c for c in load_claims("mlembed").claims}["lifecycle_efficiency"]

    def planted(mrl_at_dim8):
        mf = MetricsFile("mlembed", "default", replicates=list(range(5)))
        j = [0.002 * k for k in range(5)]
        for cut in ("@dim8", "@layer1", "@rank8", "@smallest"):
            mf.add(f"r1.3dml{cut}", [0.3 + x for x in j])
            mf.add(f"r1.plain{cut}", [0.1 + x for x in j])
            mf.add(f"r1.mrl_mll{cut}", [0.2 + x for x in j])
            mf.add(f"r1.mrl{cut}", [(mrl_at_dim8 if cut == "@dim8" else 0.2) + x for x in j])
        return V.judge_claim(claim, mf).verdict

    assert planted(0.2) == V.REPRODUCED
    assert planted(0.4) == V.NOT_REPRODUCED
